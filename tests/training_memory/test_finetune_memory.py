"""Fine-tuning memory: quantised base storage, LoRA adapters, optimizer states, offload, activations
through a frozen base. Every expected number is derived by hand in its comment."""

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from gpuplan.layers.operators import Saved
from gpuplan.models import load_model, model_from_arch_row
from gpuplan.specs.finetune import FineTuning, parse_lora_targets
from gpuplan.specs.plan import Recompute, Sharding, TrainPlan
from gpuplan.workloads.training.base_weights import four_bit_bytes, int8_bytes
from gpuplan.workloads.training.finetune_activations import adapter_activation_delta_per_token
from gpuplan.workloads.training.lora import lora_parameter_count
from gpuplan.workloads.training.memory import training_memory
from gpuplan.workloads.training.optimizer_states import Tensor, state_bytes
from gpuplan.specs.finetune import Optimizer

LLAMA_ALL = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


# ---- storage of a frozen base -----------------------------------------------------------------
def test_nf4_bytes_of_a_4096_square_matrix():
    n = 4096 * 4096  # 16,777,216 elements, 262,144 blocks of 64
    # codes n / 2 = 8,388,608; one fp32 absmax per block 4 x 262,144 = 1,048,576
    assert four_bit_bytes(n, double_quant=False) == 8_388_608 + 1_048_576
    # double quantisation: 1 byte per block (262,144) + fp32 absmax per 256 blocks (1,024 x 4) + fp32 offset (4)
    assert four_bit_bytes(n, double_quant=True) == 8_388_608 + 262_144 + 4_096 + 4


def test_nf4_rounds_partial_blocks_up():
    # 100 elements: 50 bytes of codes, 2 blocks (64 + 36) -> 8 bytes of fp32 absmax
    assert four_bit_bytes(100, double_quant=False) == 58
    # double-quantised: 2 one-byte scales + 1 second-level fp32 absmax + fp32 offset = 50 + 2 + 4 + 4
    assert four_bit_bytes(100, double_quant=True) == 60


def test_int8_bytes_codes_plus_row_scales():
    # LLM.int8: 4096 x 11008 int8 codes + one fp32 scale per output row (11008)
    assert int8_bytes(4096, 11008) == 4096 * 11008 + 4 * 11008


# ---- adapters ---------------------------------------------------------------------------------
def test_lora_params_llama2_7b_qv_rank8_matches_peft():
    # 32 layers x 2 projections x (4096 x 8 + 8 x 4096) = 4,194,304 (PEFT print_trainable_parameters)
    assert lora_parameter_count(load_model("llama-2-7b"), parse_lora_targets("qv"), 8) == 4_194_304


def test_lora_params_llama2_7b_all_linear_rank64():
    # per layer: q, k, v, o 4 x 64 x (4096 + 4096) = 2,097,152; gate, up, down 3 x 64 x (4096 + 11008) = 2,899,968;
    # 4,997,120 x 32 = 159,907,840 (the figure PEFT prints for Llama-2-7B r 64 on every linear)
    assert lora_parameter_count(load_model("llama-2-7b"), parse_lora_targets("all_linear"), 64) == 159_907_840


def test_lora_params_phi15_matches_litgpt_table():
    # LitGPT resource table, phi-1.5 r 8 on q and v: 24 x 2 x (2048 x 8 + 8 x 2048) = 1,572,864
    phi = model_from_arch_row(dict(layers="24", hidden="2048", heads="32", ffn="8192", vocab="51200", ffn_kind="gelu"))
    assert lora_parameter_count(phi, ("q_proj", "v_proj"), 8) == 1_572_864


def test_grouped_query_k_and_v_are_narrower():
    # Llama-2-70B (h 8192, 64 heads, 8 kv heads, d 128): k_proj 8192 -> 1024; r 8 on k only:
    # 80 x 8 x (8192 + 1024) = 5,898,240
    assert lora_parameter_count(load_model("llama-2-70b"), ("k_proj",), 8) == 5_898_240


def test_lora_target_aliases_and_presets():
    assert parse_lora_targets("attn") == ("q_proj", "k_proj", "v_proj", "o_proj")
    # torchtune's names map to the Llama ones
    assert parse_lora_targets("q_proj+output_proj+w1+w2+w3") == ("q_proj", "o_proj", "gate_proj", "down_proj", "up_proj")
    with pytest.raises(ValueError, match="unknown LoRA target 'foo'"):
        parse_lora_targets("q_proj+foo")


# ---- optimizer states ---------------------------------------------------------------------------
def test_bnb_8bit_states_with_blockwise_absmax():
    t = Tensor(4096, 4096)  # 16,777,216 elements, 65,536 blocks of 256
    # two uint8 states 2 x 16,777,216 + two fp32 absmax per block 2 x 4 x 65,536
    assert state_bytes(Optimizer.ADAMW_8BIT, t, 4.0).device == 33_554_432 + 524_288
    paged = state_bytes(Optimizer.PAGED_ADAMW_8BIT, t, 4.0)
    assert (paged.device, paged.paged) == (524_288, 33_554_432)  # codes in unified memory, absmax on the device


def test_bnb_small_tensors_keep_fp32_or_device_states():
    # under min_8bit_size (4096 elements): two fp32 states, 2 x 4 x 4000
    assert state_bytes(Optimizer.ADAMW_8BIT, Tensor(4000), 4.0).device == 32_000
    # 50,000 elements: 8-bit, but under the 1e5 paging threshold: 2 x 50,000 + 2 x 4 x ceil(50,000 / 256) = 100,000 + 1,568
    small = state_bytes(Optimizer.PAGED_ADAMW_8BIT, Tensor(50_000), 4.0)
    assert (small.device, small.paged) == (101_568, 0.0)


def test_adafactor_factored_and_4bit_states():
    # HF Adafactor, no first moment: fp32 row (4096) and column (11008) vectors
    assert state_bytes(Optimizer.ADAFACTOR, Tensor(4096, 11008), 4.0).device == 4 * (4096 + 11008)
    assert state_bytes(Optimizer.ADAFACTOR, Tensor(4096), 4.0).device == 4 * 4096  # a vector: full fp32
    # torchao 4-bit: two moments of 0.5 B + fp32 scale per 128: 2 x (8,388,608 + 4 x 131,072)
    assert state_bytes(Optimizer.ADAMW_4BIT, Tensor(4096, 4096), 4.0).device == 17_825_792
    # pure bf16 AdamW: zeros_like(p) moments, 2 x 2 B
    assert state_bytes(Optimizer.ADAMW, Tensor(10, 10), 2.0).device == 400


# ---- whole-model memory -------------------------------------------------------------------------
# Llama-2-7B NF4 double-quantised, per layer: q, k, v, o (4096^2) 4 x 8,654,852 = 34,619,408; gate, up,
# down (45,088,768 elements: codes 22,544,384 + 704,512 one-byte scales + 2,752 x 4 + 4 = 23,259,908)
# 3 x 23,259,908 = 69,779,724; layer 104,399,132; 32 layers 3,340,772,224. Unquantised in bf16: norms
# (2 x 4096 x 32 + 4096) x 2 = 532,480, embedding and head 2 x 32,000 x 4096 x 2 = 524,288,000.
LLAMA7B_NF4_BASE = 3_340_772_224 + 532_480 + 524_288_000
QV8 = 4_194_304


def test_qlora_llama2_7b_states_one_gpu():
    m = load_model("llama-2-7b")
    mem = training_memory(m, TrainPlan(seq_len=512, fine_tuning=FineTuning(method="qlora", lora_targets="qv")))
    per = mem.per_gpu_bytes
    assert per["weights"] == LLAMA7B_NF4_BASE + 2 * QV8  # adapters in bf16
    assert per["gradients"] == 4 * QV8  # fp32 grads (master weights fp32)
    assert per["optimizer"] == 12 * QV8  # fp32 m, v and master
    # the largest projection dequantised into bf16 while it multiplies: 4096 x 11008 x 2
    assert mem.other_bytes_detail["dequant_workspace"] == 2 * 4096 * 11008
    assert mem.trainable_params == QV8


def test_pure_bf16_lora_states():
    m = load_model("llama-2-7b")
    ft = FineTuning(method="lora", lora_targets="qv", master_weights="none")
    per = training_memory(m, TrainPlan(seq_len=512, fine_tuning=ft)).per_gpu_bytes
    # bf16 base 6,738,415,616 x 2 + adapters 2; grads 2; AdamW moments in bf16 2 + 2
    assert per["weights"] == 2 * 6_738_415_616 + 2 * QV8
    assert (per["gradients"], per["optimizer"]) == (2 * QV8, 4 * QV8)


def test_fsdp_shards_the_quantised_base_and_offload_moves_it_to_the_host():
    m = load_model("llama-2-7b")
    ft = FineTuning(method="qlora", lora_targets="qv")
    sharded = training_memory(m, TrainPlan(dp=2, sharding=Sharding.FSDP, seq_len=512, fine_tuning=ft))
    assert sharded.per_gpu_bytes["weights"] == (LLAMA7B_NF4_BASE + 2 * QV8) / 2
    # gather buffer: two layers unsharded: 104,399,132 + norms 2 x 4096 x 2 + q, v adapters 2 x 8 x 8192 x 2
    assert sharded.other_bytes_detail["zero3_gather_buffer"] == 2 * (104_399_132 + 16_384 + 262_144)
    offloaded = training_memory(m, TrainPlan(dp=2, sharding=Sharding.FSDP, seq_len=512,
                                             fine_tuning=FineTuning(**{**ft.model_dump(), "offload": "params"})))
    per = offloaded.per_gpu_bytes
    assert per["weights"] == per["gradients"] == per["optimizer"] == 0
    # the host keeps this GPU's shard of the weights, gradients and optimizer
    assert offloaded.host_bytes == pytest.approx((LLAMA7B_NF4_BASE + 2 * QV8 + 4 * QV8 + 12 * QV8) / 2)


def test_paged_optimizer_states_are_reported_apart_and_not_in_allocated():
    m = load_model("llama-2-7b")
    plain = training_memory(m, TrainPlan(seq_len=512, fine_tuning=FineTuning(optimizer="adamw_8bit")))
    paged = training_memory(m, TrainPlan(seq_len=512, fine_tuning=FineTuning(optimizer="paged_adamw_8bit")))
    moved = plain.per_gpu_bytes["optimizer"] - paged.per_gpu_bytes["optimizer"]
    assert moved == paged.paged_optimizer_bytes > 0
    assert plain.allocated_bytes - paged.allocated_bytes == pytest.approx(moved)
    assert any("unified memory" in n for n in paged.notes)


def test_full_finetune_8bit_adam_saves_six_bytes_per_param_against_adamw():
    m = load_model("llama-2-7b")
    adam = training_memory(m, TrainPlan(seq_len=512, fine_tuning=FineTuning(optimizer="adamw"))).per_gpu_bytes
    bnb = training_memory(m, TrainPlan(seq_len=512, fine_tuning=FineTuning(optimizer="adamw_8bit"))).per_gpu_bytes
    n = 6_738_415_616
    # fp32 m, v = 8 B vs 2 x (1 + 4 / 256) = 2.03125 B; every tensor (norms: 4096 elements) reaches
    # min_8bit_size 4096, and every size here is a multiple of 256: n x 5.96875 exactly
    assert adam["optimizer"] - bnb["optimizer"] == n * 5.96875


def test_fp32_base_under_autocast_keeps_bf16_copies():
    m = load_model("llama-2-7b")
    ft = FineTuning(method="lora", base_dtype="fp32", lora_targets="qv")
    mem = training_memory(m, TrainPlan(seq_len=512, fine_tuning=ft))
    # every layer's projections cast to bf16 and saved: 32 x 202,375,168 x 2, and the frozen head, cast at
    # its one call (unchunked loss) and kept by its matmul: 32,000 x 4,096 x 2
    head = 32000 * 4096 * 2
    assert mem.other_bytes_detail["autocast_weight_copies"] == 32 * 202_375_168 * 2 + head
    full = training_memory(m, TrainPlan(seq_len=512, fine_tuning=ft, recompute=Recompute.FULL))
    assert full.other_bytes_detail["autocast_weight_copies"] == 202_375_168 * 2 + head  # only the layer recomputed


def test_frozen_base_activation_delta_llama2_7b():
    m = load_model("llama-2-7b")
    saved = Saved(act_bytes=2, linear_input_bytes=2)
    h, f, r = 4096, 11008, 8
    # q, v adapted: the qkv input stays; fc1 (2h) and fc2 (2f) inputs go (frozen); attention output stays
    # (FlashAttention keeps it); + A's output b r for q and for v
    ft = FineTuning(method="lora", lora_targets="qv")
    assert adapter_activation_delta_per_token(m, ft, 0, saved) == -2 * h - 2 * f + 2 * 2 * r
    # with dropout each adapter keeps its dropped input and mask (2 + 1) h instead of the shared input
    drop = FineTuning(**{**ft.model_dump(), "lora_dropout": 0.1})
    assert adapter_activation_delta_per_token(m, drop, 0, saved) == -2 * h - 2 * h - 2 * f + 2 * 3 * h + 2 * 2 * r
    assert adapter_activation_delta_per_token(m, FineTuning(), 0, saved) == 0.0


# ---- validation of the choices ----------------------------------------------------------------
@pytest.mark.parametrize("kw, match", [
    (dict(method="full", base_dtype="nf4"), "base_dtype applies to LoRA"),
    (dict(method="qlora", base_dtype="bf16"), "qlora stores the frozen base in 4 bits"),
    (dict(method="lora", base_dtype="nf4"), "is QLoRA"),
    (dict(method="full", lora_rank=8), "lora_rank applies"),
    (dict(optimizer="paged_adamw_8bit", offload="optimizer"), "paged_adamw_8bit"),
])
def test_impossible_fine_tuning_is_refused(kw, match):
    with pytest.raises(ValidationError, match=match):
        FineTuning(**kw)


def test_plan_level_rules():
    with pytest.raises(ValidationError, match="offload params moves parameter shards"):
        TrainPlan(fine_tuning=FineTuning(offload="params"))
    with pytest.raises(ValidationError, match="master_weights none"):
        TrainPlan(precision="fp8", fine_tuning=FineTuning(master_weights="none"))
    TrainPlan(sharding="fsdp", fine_tuning=FineTuning(offload="params"))  # allowed


_choices = st.fixed_dictionaries({}, optional={
    "method": st.sampled_from(["full", "lora", "qlora"]), "lora_rank": st.integers(-2, 300),
    "base_dtype": st.sampled_from(["bf16", "fp16", "fp32", "int8", "nf4", "fp4"]),
    "optimizer": st.sampled_from([o.value for o in Optimizer]), "offload": st.sampled_from(["none", "optimizer", "params", "nvme"]),
    "master_weights": st.sampled_from(["fp32", "none"]), "lora_dropout": st.one_of(st.floats(-1, 2), st.just(float("nan")), st.just(float("inf"))),
})


@settings(max_examples=200, deadline=None)
@given(_choices)
def test_fine_tuning_accepts_only_consistent_choices(kw):
    try:
        ft = FineTuning(**kw)
    except ValidationError:
        return
    assert (ft.method.value == "qlora") <= (ft.base_dtype is None or ft.base_dtype.four_bit)
    assert ft.adapters or (ft.lora_rank is None and ft.base_dtype is None)
    assert 0 <= ft.lora_dropout < 1 and (ft.lora_rank is None or ft.lora_rank > 0)


@settings(max_examples=25, deadline=None)
@given(method=st.sampled_from(["lora", "qlora"]), rank=st.sampled_from([1, 8, 64]),
       sharding=st.sampled_from(["none", "zero2", "fsdp"]), dp=st.sampled_from([1, 2, 4]))
def test_breakdowns_sum_and_lora_uses_less_than_full(method, rank, sharding, dp):
    m = load_model("llama-2-7b")
    ft = FineTuning(method=method, lora_rank=rank, lora_targets="all_linear")
    plan = TrainPlan(dp=dp, sharding=sharding, seq_len=1024, fine_tuning=ft)
    mem = training_memory(m, plan)
    per = mem.per_gpu_bytes
    assert per["total"] == pytest.approx(sum(v for k, v in per.items() if k != "total"))
    assert per["activations"] == pytest.approx(sum(mem.activations_bytes_detail.values()))
    full = training_memory(m, plan.model_copy(update={"fine_tuning": FineTuning()}))
    assert per["total"] < full.per_gpu_bytes["total"]


# ---- memory-saving settings: chunked loss, activation offloading --------------------------------
def test_chunked_loss_keeps_compute_dtype_logits_and_one_fp32_chunk():
    m = load_model("llama-2-7b")
    plain = FineTuning(method="lora", lora_targets="qv")
    chunked = FineTuning(method="lora", lora_targets="qv", chunked_loss=True)
    a = training_memory(m, TrainPlan(seq_len=512, fine_tuning=plain)).activations_bytes_detail["logits"]
    b = training_memory(m, TrainPlan(seq_len=512, fine_tuning=chunked)).activations_bytes_detail["logits"]
    # 512 tokens x 32,000 vocab: plain b + 4 = 6 B per entry; chunked b + 4 / 8 chunks = 2.5 B
    # (torchtune CEWithChunkedOutputLoss num_output_chunks=8); the norm terms are the same in both
    assert a - b == pytest.approx(512 * 32_000 * (6 - 2.5))


def test_offloaded_activations_leave_the_gpu_for_the_host():
    m = load_model("llama-2-7b")
    kw = dict(seq_len=1024, micro_batch=2, recompute=Recompute.FULL)
    on_gpu = training_memory(m, TrainPlan(**kw, fine_tuning=FineTuning(method="lora")))
    moved = training_memory(m, TrainPlan(**kw, fine_tuning=FineTuning(method="lora", offload_activations=True)))
    # full recompute keeps each layer's input: 32 layers x 2,048 tokens x 4,096 x 2 B = 536,870,912
    assert on_gpu.activations_bytes_detail["layers"] == 32 * 2048 * 4096 * 2
    assert moved.activations_bytes_detail["layers"] == 0
    assert moved.host_bytes == 32 * 2048 * 4096 * 2
    assert "activations offloaded" in FineTuning(offload_activations=True).label()


# ---- PyTorch training loops: gradient lifetime and the fp32 loss --------------------------------
def _pure_bf16_full(framework, **kw):
    ft = FineTuning(master_weights="none")
    return TrainPlan(seq_len=4096, micro_batch=2, global_batch=2, framework=framework, fine_tuning=ft, **kw)


def test_pytorch_loop_gradients_are_not_held_beside_the_forward_activations():
    m = load_model("llama-2-7b")
    megatron = training_memory(m, _pure_bf16_full("megatron"))
    loop = training_memory(m, _pure_bf16_full("other"))
    g = 2 * 6_738_415_616  # pure bf16: one bf16 gradient per parameter
    assert megatron.per_gpu_bytes["gradients"] == g
    # without recompute the forward's activations (32 layers x 8,192 tokens) outweigh the gradients:
    # the peak is the end of the forward, before any .grad exists (zero_grad(set_to_none=True))
    assert loop.per_gpu_bytes["gradients"] == 0
    assert any("allocated during backward" in n for n in loop.notes)
    # with full recompute the stored inputs are small: the peak is the end of backward, every
    # gradient and the backward working set, the stored activations freed
    rc = training_memory(m, _pure_bf16_full("other", recompute=Recompute.FULL))
    assert rc.per_gpu_bytes["gradients"] == g and "layers" not in rc.activations_bytes_detail
    # with two micro-batches per step the gradients persist, as in ordinary training
    two = training_memory(m, _pure_bf16_full("other").model_copy(update={"global_batch": 4}))
    assert two.per_gpu_bytes["gradients"] == g


def test_pytorch_loop_loss_is_fp32_cross_entropy_unless_chunked():
    m = load_model("llama-2-7b")
    lora = FineTuning(method="lora")
    logits = {fw: training_memory(m, TrainPlan(seq_len=512, framework=fw, fine_tuning=lora)).activations_bytes_detail["logits"]
              for fw in ("megatron", "fsdp")}
    # 512 tokens x 32,000: PyTorch's cross entropy on fp32 logits 12 B per entry against Megatron's fused b + 4 = 6
    assert logits["fsdp"] - logits["megatron"] == pytest.approx(512 * 32_000 * (12 - 6))
    chunked = FineTuning(method="lora", chunked_loss=True)
    c = training_memory(m, TrainPlan(seq_len=512, framework="fsdp", fine_tuning=chunked)).activations_bytes_detail["logits"]
    assert logits["megatron"] - c == pytest.approx(512 * 32_000 * (6 - 2.5))
