"""Memory savings (TrainPlan.memory_savings; workloads.training.memory_savings): each term derived by hand
from the model's shapes and the DeepSeek-V3 report's statements (arXiv 2412.19437 sec. 3.2.3, 3.3.2)."""

import json

import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from gpuplan.cli.main import app
from gpuplan.models.bundled import load_model
from gpuplan.specs import TrainPlan
from gpuplan.specs.memory_savings import MemorySaving, memory_savings_of
from gpuplan.workloads.training.memory import layer_activation_bytes_per_token, state_bytes_per_param, training_memory

runner = CliRunner()
DSV3 = load_model("deepseek-v3")
LLAMA = load_model("llama-3-8b")
ALL = "norm_recompute+up_projection_recompute+expert_activation_recompute+bf16_optimizer_states"
#: DeepSeek-V3's own layout (validation row dsv3-1's notes: pp 16, ep 64, ZeRO-1, no TP, FP8, seq 4096)
DS_LAYOUT = dict(tp=1, pp=16, dp=128, ep=64, micro_batch=1, global_batch=15360, seq_len=4096, precision="fp8",
                 sharding="zero1", recompute="selective")


def _delta(model, layer, savings, **plan):
    """Bytes per token one layer keeps with `savings` less without them."""
    base = TrainPlan(**plan)
    saved = TrainPlan(**plan, memory_savings=savings)
    return layer_activation_bytes_per_token(model, saved, layer) - layer_activation_bytes_per_token(model, base, layer)


# DeepSeek-V3 config: h 7168, q_lora 1536, kv_lora 512, 128 heads of qk_nope 128 + qk_rope 64, v 128, 256
# routed experts of ffn 2048, top 8. Layer 10 is an MoE layer (the first 3 are dense). FP8: li = 1, b = 2.

def test_norm_recompute_deepseek_layer():
    # the linears reading a norm's output keep no input: q_a (li h = 7168), q_b (li q_lora = 1536),
    # kv_b (li kv_lora = 512), the router's input (li h = 7168; its fp32 probabilities 4 x 256 stay);
    # kv_a and the shared expert already share q_a's / the router's input: 7168 + 1536 + 512 + 7168 = 16384
    assert _delta(DSV3, 10, "norm_recompute", precision="fp8") == -16384
    # dense layer 0: q_a 7168 + q_b 1536 + kv_b 512 + fc1 (li h = 7168) = 16384
    assert _delta(DSV3, 0, "norm_recompute", precision="fp8") == -16384


def test_up_projection_recompute_deepseek_layer():
    # the core kept Q a (128 + 64), K a (128 + 64), V a 128 in b = 2 bytes: 2 x (24576 + 24576 + 16384) = 131072;
    # it keeps the decoupled RoPE key b x 64 = 128: 131072 - 128 = 130944 less (the fp32 LSE stays)
    assert _delta(DSV3, 10, "up_projection_recompute", precision="fp8") == -130944
    # tp 2: Q, K, V split over the heads (65536), the RoPE key is whole (128): 65408 less
    assert _delta(DSV3, 10, "up_projection_recompute", precision="fp8", tp=2, dp=1) == -65408


def test_expert_activation_recompute_deepseek_layer():
    # 8 routed copies: the SwiGLU input 2 x 2048 kept in li = 1 instead of b = 2 bytes (8 x 4096 = 32768 less)
    # and no down-projection input (8 x li 2048 = 16384 less): 49152; the shared expert is unchanged
    assert _delta(DSV3, 10, "expert_activation_recompute", precision="fp8") == -49152
    # bf16 (li = b = 2): only the down-projection input goes, 8 x 2 x 2048 = 32768
    assert _delta(DSV3, 10, "expert_activation_recompute", precision="bf16") == -32768
    assert _delta(DSV3, 0, "expert_activation_recompute", precision="fp8") == 0  # a dense layer has no routed experts


def test_dense_gqa_model():
    # Llama 3 8B, bf16, tp 1: the QKV and fc1 inputs (b h = 2 x 4096 each) go: 16384; no MLA, no experts
    assert _delta(LLAMA, 0, "norm_recompute") == -16384
    # tp 2 with sequence parallelism: the inputs are kept at h / sp: 8192
    assert _delta(LLAMA, 0, "norm_recompute", tp=2, sequence_parallel=True) == -8192
    assert _delta(LLAMA, 0, "up_projection_recompute+expert_activation_recompute") == 0


def test_bf16_optimizer_states_bytes_per_param():
    # report sec. 3.3.2: m and v in BF16 (2 + 2), fp32 master kept (4): Megatron 2 + 4 + (4 + 2 + 2) = 16 B, not 18
    assert state_bytes_per_param(TrainPlan(memory_savings="bf16_optimizer_states")) == (2.0, 4.0, 8.0)
    # fp32 compute has no master copy: m + v 8 -> 4
    assert state_bytes_per_param(TrainPlan(precision="fp32", memory_savings="bf16_optimizer_states"))[2] == 4.0
    # torchtitan: fp32 parameter + fp32 grad + m v 8 -> 4
    assert state_bytes_per_param(TrainPlan(framework="torchtitan", memory_savings="bf16_optimizer_states")) == (4.0, 4.0, 4.0)


def test_deepseek_layout_itemised():
    before = training_memory(DSV3, TrainPlan(**DS_LAYOUT, pipeline_schedule="dualpipe"))
    after = training_memory(DSV3, TrainPlan(**DS_LAYOUT, pipeline_schedule="dualpipe", memory_savings=ALL))
    # the optimizer term is the ZeRO-1 share of 12 -> 8 B per parameter on the same (peak) rank
    assert before.peak_pipeline_rank == after.peak_pipeline_rank
    assert after.per_gpu_bytes["optimizer"] == pytest.approx(before.per_gpu_bytes["optimizer"] * 8 / 12, rel=1e-12)
    assert after.per_gpu_bytes["weights"] == before.per_gpu_bytes["weights"]
    assert after.per_gpu_bytes["gradients"] == before.per_gpu_bytes["gradients"]
    # the stored layers fall by the per-token savings: an MoE layer 462336 -> 265856 B per token (the three
    # deltas above), a dense one 289280 -> 289280 - 16384 - 130944 = 141952
    assert after.activations_bytes_detail["layers"] < 0.6 * before.activations_bytes_detail["layers"]


def test_plan_dump_omits_empty_savings_and_orders_names():
    assert "memory_savings" not in TrainPlan().model_dump()
    p = TrainPlan(memory_savings="bf16-optimizer-states,norm_recompute+norm_recompute")
    assert p.memory_savings == (MemorySaving.NORM_RECOMPUTE, MemorySaving.BF16_OPTIMIZER_STATES)
    assert TrainPlan.model_validate(p.model_dump()) == p
    assert memory_savings_of("none") == () and memory_savings_of(None) == ()
    with pytest.raises(ValueError, match="optimizer adamw"):
        TrainPlan(memory_savings="bf16_optimizer_states", fine_tuning={"optimizer": "sgd"})


@settings(max_examples=25, deadline=None)
@given(st.sets(st.sampled_from([m for m in MemorySaving if m is not MemorySaving.BF16_OPTIMIZER_STATES])),
       st.sampled_from(["bf16", "fp8"]), st.sampled_from([0, 10]))
def test_savings_never_add_and_add_up(savings, precision, layer):
    """Each activation saving removes bytes (never adds), and together they remove the sum of their parts
    (they touch different operators)."""
    names = sorted(m.value for m in savings)
    together = _delta(DSV3, layer, "+".join(names), precision=precision)
    parts = [_delta(DSV3, layer, n, precision=precision) for n in names]
    assert all(p <= 0 for p in parts)
    assert together == pytest.approx(sum(parts), abs=1e-9)


@settings(max_examples=25, deadline=None)
@given(st.text(min_size=1, max_size=20).filter(lambda s: s.strip().lower() not in ("", "none")))
def test_unknown_names_refused(text):
    try:
        out = memory_savings_of(text)
    except ValueError as exc:
        assert "allowed:" in str(exc)
    else:  # only names of the enum get through
        assert all(isinstance(m, MemorySaving) for m in out) and out


def test_cli_fit_and_train():
    args = ["fit", "train", "deepseek-v3", "--system", "hgx-h800", "--gpus", "2048", "--pp", "16", "--ep", "64",
            "--global-batch", "15360", "--seq-len", "4096", "--precision", "fp8", "--sharding", "zero1",
            "--recompute", "selective", "--pipeline-schedule", "dualpipe"]
    r = runner.invoke(app, [*args, "--memory-savings", ALL, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["plan"]["memory_savings"] == ALL.split("+") and d["plan"]["pipeline_schedule"] == "dualpipe"
    assert d["bytes_per_param"]["optimizer"] == 8  # fp32 master 4 + BF16 m 2 + v 2
    bad = runner.invoke(app, [*args, "--memory-savings", "ema_on_cpu"])
    assert bad.exit_code == 2 and "memory-savings" in bad.output and "Traceback" not in bad.output
    sgd = runner.invoke(app, [*args, "--memory-savings", "bf16_optimizer_states", "--optimizer", "sgd"])
    assert sgd.exit_code == 2 and "adamw" in sgd.output
    search = runner.invoke(app, ["train", "gpt3-125m", "--gpus", "8", "--memory-savings", "norm_recompute"])
    assert search.exit_code == 2 and "one plan" in search.output


def test_stated_in_notes():
    from gpuplan.interfaces.validation.training import stated_memory_savings

    # row dsv3-1's wording (DeepSeek-V3 report sec. 3.2.3)
    row = {"notes": "FP8 mixed-precision training, DualPipe; recompute of RMSNorm and MLA up-projections (selective)."}
    assert stated_memory_savings(row) == ("norm_recompute", "up_projection_recompute")
    # NeMo AutoModel rows name TE's RMSNorm kernels, not a recompute
    assert stated_memory_savings({"notes": "NeMo AutoModel (TE linear/attention/RMSNorm kernels); selective recompute."}) == ()
