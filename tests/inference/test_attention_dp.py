"""Attention data parallelism (Deployment.attention_dp; SCHEMA.md `attention_dp`) against hand derivations."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuplan.catalog import load_catalog
from gpuplan.cli.main import app
from gpuplan.errors import InputError
from gpuplan.interfaces.validation.inference import (predict_row, stated_attention_dp_balance, trtllm_bench_limits,
                                                     trtllm_bench_requests)
from gpuplan.models import load_model
from gpuplan.primitives.collectives import Collective
from gpuplan.workloads.inference.cost import operators
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.memory import memory_plan
from gpuplan.workloads.inference.cost.weights import weights_bytes_per_gpu
from gpuplan.workloads.inference.cost.operators import step_time_model


def _dep(model, system="dgx-h100", **kw):
    cat = load_catalog()
    s = cat.system(system)
    return Deployment(load_model(model), cat.gpu(s.gpu), s, **kw)


def test_attention_dp_must_divide_tp():
    with pytest.raises(InputError) as e:
        _dep("llama-3-8b", tp=4, attention_dp=3)
    assert e.value.field == "attention_dp"
    with pytest.raises(InputError):
        _dep("llama-3-8b", tp=2, attention_dp=0)
    # tp=8 in 4 groups: attention over 8 / 4 = 2 GPUs per group
    assert _dep("llama-3-8b", tp=8, attention_dp=4).attention_tp == 2


def test_gqa_kv_sharded_over_attention_tp_only():
    # Llama-3-70B, tp=8 in 2 attention groups -> attention_tp 4: 8 kv heads / 4 = 2 heads per GPU;
    # bytes per token per GPU = 2 (K,V) x 80 layers x 2 heads x 128 x 2 B = 81,920 (tp=8 alone: 40,960)
    plan = memory_plan(_dep("llama-3-70b", tp=8, attention_dp=2, system="dgx-h100"))
    assert plan.kv_bytes_per_token_per_gpu == pytest.approx(81_920)
    assert memory_plan(_dep("llama-3-70b", tp=8)).kv_bytes_per_token_per_gpu == pytest.approx(40_960)


def test_mla_latent_per_group():
    # DeepSeek-V3 DEP8 with fp8 KV: each GPU holds only its own requests' latents,
    # 61 layers x (512 + 64) x 1 B = 35,136 B per token (the same per-token figure as TP8, where every GPU
    # holds the latent of every request of the replica: DEP8 stores 8x the tokens in the same bytes)
    plan = memory_plan(_dep("deepseek-v3", system="dgx-h200", tp=8, ep=8, attention_dp=8, weight_dtype="fp8",
                            kv_dtype="fp8"))
    assert plan.kv_bytes_per_token_per_gpu == pytest.approx(61 * 576)


def test_dense_full_dp_equals_one_gpu():
    # tp=2 as 2 attention groups of 1 GPU: every GEMM whole (attention_tp = 1), no all-reduce, no MoE:
    # the weights per GPU and the step of one group are those of the model on one GPU.
    dp = _dep("llama-3-8b", tp=2, attention_dp=2)
    one = _dep("llama-3-8b", tp=1)
    assert weights_bytes_per_gpu(dp) == pytest.approx(weights_bytes_per_gpu(one))
    n = np.array([1.0, 64.0, 4096.0])
    a, b = step_time_model(dp, table_tokens=64), step_time_model(one, table_tokens=64)
    np.testing.assert_allclose(a.linear_time(n), b.linear_time(n), rtol=1e-12)
    np.testing.assert_allclose(a.logits_time(n), b.logits_time(n), rtol=1e-12)


#: E[max of 2 / 4 / 8 standard normals]: Harter 1961 order-statistics tables (0.5642, 1.0294, 1.4236)
Z2, Z4, Z8 = 0.5642, 1.0294, 1.4236
#: load CV of an attention-DP rank from TensorRT-LLM tech blog 10 (DeepSeek-V3 DEP8 GB200, a = 8):
#: round-robin actual / SOL TPS 25,664 / 39,552; with the balance scheduler (context wait) 33,499 / 38,312
CV_ROUND_ROBIN = (39_552 / 25_664 - 1) / Z8
CV_BALANCED = (38_312 / 33_499 - 1) / Z8


def test_attention_dp_balance_reproduces_blog_at_eight_ranks():
    # at a = 8 the order-statistic model returns blog 10's measured actual / SOL ratios themselves
    assert operators.attention_dp_balance(8, balanced=False) == pytest.approx(25_664 / 39_552, rel=1e-3)
    assert operators.attention_dp_balance(8, balanced=True) == pytest.approx(33_499 / 38_312, rel=1e-3)
    # fewer ranks: 1 / (1 + z_a c); one rank loses nothing
    assert operators.attention_dp_balance(2, balanced=False) == pytest.approx(1 / (1 + Z2 * CV_ROUND_ROBIN), rel=1e-3)
    assert operators.attention_dp_balance(4, balanced=False) == pytest.approx(1 / (1 + Z4 * CV_ROUND_ROBIN), rel=1e-3)
    assert operators.attention_dp_balance(4, balanced=True) == pytest.approx(1 / (1 + Z4 * CV_BALANCED), rel=1e-3)
    assert operators.attention_dp_balance(1, balanced=False) == 1.0


@given(st.integers(min_value=1, max_value=63), st.booleans())
def test_attention_dp_balance_falls_with_ranks(a, balanced):
    # the busiest of more lock-step ranks is busier; the balance scheduler never loses more than round-robin
    lo, hi = operators.attention_dp_balance(a + 1, balanced), operators.attention_dp_balance(a, balanced)
    assert 0.0 < lo <= hi <= 1.0
    assert operators.attention_dp_balance(a, True) >= operators.attention_dp_balance(a, False)


def test_attention_dp_step_set_by_slowest_rank():
    # a step of the average group of tp=2 / attention_dp=2 lasts 1 / balance(2) = 1 + z_2 c x the 1-GPU
    # step (round-robin, the engine default: c from blog 10's 25,664 / 39,552 at a = 8)
    dp = step_time_model(_dep("llama-3-8b", tp=2, attention_dp=2), table_tokens=64)
    one = step_time_model(_dep("llama-3-8b", tp=1), table_tokens=64)
    assert dp.step_scale == pytest.approx(1 + Z2 * CV_ROUND_ROBIN, rel=1e-3)
    assert dp.decode_step_time(32, 1000) == pytest.approx(one.decode_step_time(32, 1000) * (1 + Z2 * CV_ROUND_ROBIN),
                                                          rel=1e-3)
    assert one.step_scale == 1.0
    balanced = step_time_model(_dep("llama-3-8b", tp=2, attention_dp=2, attention_dp_balance=True), table_tokens=64)
    assert balanced.step_scale == pytest.approx(1 + Z2 * CV_BALANCED, rel=1e-3)


def test_moe_dispatch_combine_all_to_all(monkeypatch):
    # Mixtral-8x7B DEP2 (tp=2, ep=2, attention_dp=2): each MoE layer does a dispatch and a combine
    # all-to-all over the 2 EP ranks; each rank sends its own group's n tokens x top_k 2 x hidden 4096 x 2 B.
    # n = 100: 100 x 2 x 4096 x 2 = 1,638,400 B per rank; 32 MoE layers -> 64 calls; no all-reduce
    # (attention_tp = 1).
    calls = []

    def fake(op, sizes, system, num_gpus, gpu):
        calls.append((op, float(np.asarray(sizes).ravel()[0]), num_gpus))
        return np.zeros_like(np.asarray(sizes, dtype=float))

    dep = _dep("mixtral-8x7b", tp=2, ep=2, attention_dp=2)
    st = step_time_model(dep, table_tokens=4)
    monkeypatch.setattr(operators, "collective_seconds", fake)
    calls.clear()
    st.linear_time(np.array([100.0]))
    assert [c[0] for c in calls] == [Collective.ALL_TO_ALL]
    assert calls[0][1] == pytest.approx(1_638_400) and calls[0][2] == 2
    # the cost is counted twice per MoE layer: compare with a 1 s all-to-all
    monkeypatch.setattr(operators, "collective_seconds",
                        lambda op, sizes, system, n, gpu: np.ones_like(np.asarray(sizes, dtype=float)))
    with_a2a = float(st.linear_time(np.array([100.0]))[0])
    monkeypatch.setattr(operators, "collective_seconds",
                        lambda op, sizes, system, n, gpu: np.zeros_like(np.asarray(sizes, dtype=float)))
    without = float(st.linear_time(np.array([100.0]))[0])
    assert with_a2a - without == pytest.approx(2 * 32)


def test_experts_see_every_group_tokens(monkeypatch):
    # The routed experts of one attention group's step carry all groups' tokens: with collectives free,
    # the expert part of DEP2 at n tokens equals that of ep=2 without attention DP at 2n tokens
    # (same expert shards E/ep), while the dense part of DEP2 is that of one GPU at n tokens.
    monkeypatch.setattr(operators, "collective_seconds",
                        lambda op, sizes, system, n, gpu: np.zeros_like(np.asarray(sizes, dtype=float)))
    # the TP all-reduce of the engine (workloads.inference.cost.tp_allreduce) free as well
    monkeypatch.setattr(operators, "tp_allreduce_seconds",
                        lambda sizes, n, system, gpu, impl, hidden=None: np.zeros_like(np.asarray(sizes, dtype=float)))
    dep2 = step_time_model(_dep("mixtral-8x7b", tp=2, ep=2, attention_dp=2), table_tokens=4)
    tp2 = step_time_model(_dep("mixtral-8x7b", tp=2, ep=2), table_tokens=4)

    def dense(st, n):
        t = np.array([float(n)])
        return sum(op.layers * st._gemm_seconds(t, 2.0 * t * op.n_out * op.k_in,
                                                op.n_out * op.k_in * st.weight_bytes
                                                + t * (op.k_in * st.act_in_bytes + op.n_out * 2.0))[0] for op in st.ops)

    n = 256
    m = load_model("mixtral-8x7b")
    layer = operators.model_ops(m).layers[0]
    hidden_ew = m.layers * layer.hidden_elementwise_bytes(2.0, training=False) / dep2.hbm_bytes_per_s
    expert_dep2 = float(dep2.linear_time(np.array([n]))[0]) - dense(dep2, n) - n * hidden_ew
    expert_tp2 = float(tp2.linear_time(np.array([2 * n]))[0]) - dense(tp2, 2 * n) - 2 * n * hidden_ew
    assert expert_dep2 == pytest.approx(expert_tp2, rel=1e-9)


def _row(**kw):
    base = dict(id="t-1", model="Llama-3-8B", layers="32", hidden="4096", heads="32", kv_heads="8", ffn="14336",
                ffn_kind="swiglu", vocab="128256", system="dgx-h100", weight_dtype="bf16", kv_dtype="bf16",
                engine="vllm", input_len="512", output_len="128", metric="output_tokens_per_s")
    base.update({k: str(v) for k, v in kw.items()})
    return base


def test_validation_row_splits_load_over_groups():
    # tp=2 as 2 attention groups at concurrency 16 = 2 1-GPU groups at concurrency 8 each, stepping in
    # lock-step: 2 replicas of tp=1 at concurrency 8 (rows count concurrency per replica) with every step
    # 1 + z_2 c longer (round-robin; the closed loop has no think time, so the whole timeline stretches by that factor).
    adp = predict_row(_row(tp=2, num_gpus=2, attention_dp=2, concurrency=16)).value
    reps = predict_row(_row(tp=1, num_gpus=2, concurrency=8)).value
    assert adp == pytest.approx(reps / (1 + Z2 * CV_ROUND_ROBIN), rel=1e-3)
    # a row stating TensorRT-LLM's balance scheduler (perf-overview.md's DeepSeek llm_options) loses less
    stated = predict_row(_row(tp=2, num_gpus=2, attention_dp=2, concurrency=16,
                              notes="llm_options: attention_dp_config: enable_balance: true")).value
    assert stated == pytest.approx(reps / (1 + Z2 * CV_BALANCED), rel=1e-3)


@pytest.mark.parametrize("text, stated", [
    ("DeepSeek R1 llm_options: kv_cache_config dtype fp8, attention-DP balance on", True),
    ("attention_dp_config: batching_wait_iters: 0 enable_balance: true timeout_iters: 60", True),
    ("enable_balance: false", False),
    ("Qwen3 MoE llm_options: attention DP on, CUDA graphs", False),
    ("", False),
])
def test_stated_attention_dp_balance(text, stated):
    assert stated_attention_dp_balance({"notes": text}) is stated


def test_trtllm_bench_limits_hand_values():
    # tensorrt_llm/bench/build/tuning.py finetune_setting:
    # 967 requests, 1024/1024: raw_bs 967 -> 128 x ceil(967/128) = 1024; raw tokens 967 x 2 = 1934 -> 2048 (floor)
    assert trtllm_bench_limits(967, 1024, 1024) == (1024, 2048)
    # 100 requests, 8192/1024: bs max(64, 32 x 4) = 128; tokens 100 x 9 = 900 -> 2048
    assert trtllm_bench_limits(100, 8192, 1024) == (128, 2048)
    # 5000 requests, 128/128: bs capped at 4096 -> 256 x 16 = 4096; tokens 8192 -> 1024 x 8 = 8192
    assert trtllm_bench_limits(5000, 128, 128) == (4096, 8192)
    # 2300 requests, 202/214: 256 x ceil(2300/256) = 2304; tokens 2300 x (1 + 202/214) = 4471 -> 512 x 9 = 4608
    assert trtllm_bench_limits(2300, 202, 214) == (2304, 4608)


def test_trtllm_bench_request_counts():
    # perf-overview.md "Preparing a Dataset": 1024/1024 -> 3000, 8192/1024 and 1024/8192 -> 1500,
    # 32768/1024 and 1024/32768 -> 1000
    assert trtllm_bench_requests(1024, 1024) == 3000
    assert trtllm_bench_requests(8192, 1024) == trtllm_bench_requests(1024, 8192) == 1500
    assert trtllm_bench_requests(32768, 1024) == trtllm_bench_requests(1024, 32768) == 1000


def test_cli_serve_attention_dp():
    runner = CliRunner()
    out = runner.invoke(app, ["serve", "qwen3-30b-a3b", "--system", "dgx-h100", "--tp", "2", "--ep", "2",
                              "--attention-dp", "2", "--input-len", "512", "--output-len", "64",
                              "--concurrency", "8", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["attention_dp"] == 2 and data["ep"] == 2
    assert "2 attention-DP groups" in data["load"]
    bad = runner.invoke(app, ["serve", "qwen3-30b-a3b", "--system", "dgx-h100", "--tp", "2", "--attention-dp", "3"])
    assert bad.exit_code == 2 and "attention_dp" in bad.output
    # the balance scheduler: every step 1 + z_2 c_balanced instead of 1 + z_2 c_round_robin of the
    # 1-group step, so the closed loop's throughput rises by their ratio (up to the front end's fixed latency)
    on = runner.invoke(app, ["serve", "qwen3-30b-a3b", "--system", "dgx-h100", "--tp", "2", "--ep", "2",
                             "--attention-dp", "2", "--attention-dp-balance", "--input-len", "512", "--output-len", "64",
                             "--concurrency", "8", "--json"])
    assert on.exit_code == 0, on.output
    balanced = json.loads(on.stdout)
    assert "(balance scheduler)" in balanced["load"]
    assert balanced["output_tokens_per_s"] / data["output_tokens_per_s"] == pytest.approx(
        (1 + Z2 * CV_ROUND_ROBIN) / (1 + Z2 * CV_BALANCED), rel=0.02)


def test_trtllm_bench_kv_estimate_hand_values():
    from gpuplan.interfaces.validation.inference import trtllm_bench_kv_max_requests

    # Llama-3-8B bf16 on one H100 (80 GiB in the catalog), 1024 + 1024 tokens, fraction 0.95:
    # engine 8,030,261,248 params x 2 B; KV 2 x 32 layers x max(1, 8) x 128 x 2 B = 131,072 B per token
    engine = 8_030_261_248 * 2 / 2**30
    expected = (80 - engine) * 0.95 / (131_072 / 2**30 * 2048)
    got = trtllm_bench_kv_max_requests(_dep("llama-3-8b", system="h100-sxm5-80gb"), 1024, 1024, 0.95)
    assert got == pytest.approx(expected) and 245 < got < 250
    # DeepSeek-V3 fp8 (FP8 block scales: 1 B per element) on 8 x H200 (141 GiB): the config's GQA fields,
    # num_key_value_heads 128 and head size 7168 / 128 = 56: 2 x 61 x 128 x 56 x 1 B = 874,496 B per token
    # (25x the 35,136 B MLA latent), so ~287 requests of 2048 tokens though the latent cache holds thousands
    dep = _dep("deepseek-v3", system="dgx-h200", tp=8, ep=8, attention_dp=8, weight_dtype="fp8", kv_dtype="fp8")
    expected = (8 * 141 - 671_026_419_200 / 2**30) * 0.95 / (874_496 / 2**30 * 2048)
    assert trtllm_bench_kv_max_requests(dep, 1024, 1024, 0.95) == pytest.approx(expected, rel=1e-6)
    # -> finetune_setting: raw_bs 286.5 -> 128 x ceil(286.5 / 128) = 384 per rank; tokens 573 -> 2048
    assert trtllm_bench_limits(expected, 1024, 1024) == (384, 2048)


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), adp=st.sampled_from([1, 2, 3, 4, 8]),
       model=st.sampled_from(["llama-3-70b", "mixtral-8x7b", "qwen3-30b-a3b"]))
def test_attention_dp_invariants(tp, adp, model):
    # invariants of DP attention on a tp-GPU replica: either an InputError naming attention_dp (it must
    # divide tp), or per-GPU weights and KV bytes per token at least those of plain TP (the non-expert
    # weights are replicated over groups, the KV of a group's requests sharded over fewer GPUs) and at most
    # those of attention_tp = tp / adp plain TP GPUs
    if tp % adp:
        with pytest.raises(InputError) as e:
            _dep(model, tp=tp, attention_dp=adp)
        assert e.value.field == "attention_dp"
        return
    dep = _dep(model, tp=tp, attention_dp=adp)
    plain = _dep(model, tp=tp)
    narrow = _dep(model, tp=tp // adp)
    w, w_plain, w_narrow = (weights_bytes_per_gpu(d) for d in (dep, plain, narrow))
    assert w_plain - 1 <= w <= w_narrow + 1
    # fraction of a token's KV each GPU holds (memory_plan multiplies it by the model's bytes per token)
    assert plain.kv_shard_fraction <= dep.kv_shard_fraction == narrow.kv_shard_fraction


def test_attention_dp_balance_round_trips_through_trtllm_launch(tmp_path):
    # serve run --attention-dp-balance --emit trtllm states attention_dp_config.enable_balance: true
    # (llm_args.py AttentionDpConfig); --from reads it back and runs the same deployment
    runner = CliRunner()
    base = ["serve", "run", "qwen3-30b-a3b", "--system", "dgx-h100", "--tp", "2", "--ep", "2", "--attention-dp", "2",
            "--input-len", "256", "--output-len", "32", "--concurrency", "4"]
    emitted = runner.invoke(app, base + ["--attention-dp-balance", "--emit", "trtllm"])
    assert emitted.exit_code == 0, emitted.output
    assert '"attention_dp_config": {"enable_balance": true}' in emitted.stdout
    script = tmp_path / "launch.sh"
    script.write_text(emitted.stdout)
    back = runner.invoke(app, ["serve", "run", "--from", str(script), "--system", "dgx-h100", "--input-len", "256",
                               "--output-len", "32", "--concurrency", "4", "--json"])
    assert back.exit_code == 0, back.output
    read = json.loads(back.stdout)
    assert read["attention_dp_balance"] is True and "(balance scheduler)" in read["load"]
    # without the flag nothing is stated
    plain = runner.invoke(app, base + ["--emit", "trtllm"])
    assert plain.exit_code == 0 and "attention_dp_config" not in plain.stdout
    # vLLM has no such scheduler: refused with a one-line error naming the field
    bad = runner.invoke(app, base + ["--attention-dp-balance", "--emit", "vllm"])
    assert bad.exit_code == 2 and "attention_dp_balance" in bad.output
