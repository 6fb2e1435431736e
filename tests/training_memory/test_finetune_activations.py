"""Fine-tuning activations beyond the frozen base's: bitsandbytes < 0.43.2 keeping each 4-bit
matmul's input, eager gated FFNs keeping silu's output, and the row rules that set them. Every
expected number is derived by hand in its comment."""

import pytest
from pydantic import ValidationError

from gpuplan.interfaces.validation.fine_tuning_row import bitsandbytes_keeps_matmul_input, compiled_stated, fine_tuning_from_row
from gpuplan.layers.operators import Saved
from gpuplan.models import load_model
from gpuplan.specs.finetune import FineTuning
from gpuplan.specs.plan import TrainPlan
from gpuplan.workloads.training.finetune_activations import (
    adapter_activation_delta_per_token, eager_activation_delta_per_token)
from gpuplan.workloads.training.memory import training_memory

H, F, R = 4096, 11008, 8  # Llama-2-7B hidden, FFN width; LoRA rank


def test_old_bitsandbytes_keeps_every_4bit_matmul_input():
    m = load_model("llama-2-7b")
    saved = Saved(act_bytes=2, linear_input_bytes=2)
    old = FineTuning(method="qlora", lora_targets="qv", base_matmul_keeps_input=True)
    # MatMul4Bit keeps A = the input of every projection (ctx.tensors = (A, B)): nothing is removed;
    # q's and v's B keep A's output, b r each: 2 x 2 x 8
    assert adapter_activation_delta_per_token(m, old, 0, saved) == 2 * 2 * R
    # with dropout each adapter adds its dropped copy and mask, (2 + 1) h, beside the kept input
    drop = FineTuning(**{**old.model_dump(), "lora_dropout": 0.05})
    assert adapter_activation_delta_per_token(m, drop, 0, saved) == 2 * 3 * H + 2 * 2 * R
    # bitsandbytes >= 0.43.2 (None, B): the frozen fc1 (2h) and fc2 (2f) inputs go, as for a bf16 base
    new = FineTuning(method="qlora", lora_targets="qv")
    assert adapter_activation_delta_per_token(m, new, 0, saved) == -2 * H - 2 * F + 2 * 2 * R


def test_old_bitsandbytes_whole_model_difference():
    m = load_model("llama-2-7b")
    plans = [TrainPlan(seq_len=1304, micro_batch=1, global_batch=1, framework="other",
                       fine_tuning=FineTuning(method="qlora", lora_targets="qv", master_weights="none",
                                              base_matmul_keeps_input=keep)) for keep in (False, True)]
    new, old = (training_memory(m, p).activations_bytes_detail["layers"] for p in plans)
    # 32 layers x 1,304 tokens x the fc1 and fc2 inputs old bitsandbytes keeps, 2 (h + f) B per token
    assert old - new == pytest.approx(32 * 1304 * 2 * (H + F), rel=1e-12)


def test_eager_gated_ffn_keeps_silu_output():
    m = load_model("llama-2-7b")
    saved = Saved(act_bytes=2, linear_input_bytes=2)
    loop = TrainPlan(seq_len=1024, framework="other", fine_tuning=FineTuning(method="lora"))
    # silu(gate(x)) * up(x): the product keeps silu's output, b x f = 2 x 11,008 B per token
    assert eager_activation_delta_per_token(m, loop, 0, saved) == 2 * F
    compiled = loop.model_copy(update={"compiled_model": True})
    assert eager_activation_delta_per_token(m, compiled, 0, saved) == 0.0  # recomputed by the partitioner
    megatron = loop.model_copy(update={"framework": "megatron"})
    assert eager_activation_delta_per_token(m, megatron, 0, saved) == 0.0  # fused SwiGLU
    # tp 2 splits the FFN: f / 2 per GPU
    tp2 = Saved(act_bytes=2, linear_input_bytes=2, tp=2)
    assert eager_activation_delta_per_token(m, loop, 0, tp2) == F
    # GELU keeps only its input, as the inventory counts: nothing to add
    assert eager_activation_delta_per_token(load_model("gpt2"), loop, 0, saved) == 0.0


def test_keeps_input_needs_a_4bit_base():
    with pytest.raises(ValidationError, match="base_matmul_keeps_input describes bitsandbytes' 4-bit matmul"):
        FineTuning(method="lora", base_matmul_keeps_input=True)


@pytest.mark.parametrize("source, notes, expected", [
    ("litgpt tables (measured with PyTorch 2.1.0, bitsandbytes 0.41.1)", "", True),  # 0.41.1 < 0.43.2
    ("x", "bitsandbytes 0.43.2", False),  # the release with the fix
    ("benchmarks run Feb-Mar 2024", "bitsandbytes Linear4bit nf4", True),  # March 2024 < 2024-07-16
    ("README (PR #2003, 2024-11-18)", "bnb nf4", False),  # after the fix
    ("README (PR #2003, 2023-11-18)", "NF4 (torchao)", False),  # torchao's NF4, not bitsandbytes
    ("peft docs", "bnb nf4", False),  # no version, no date: the current library
])
def test_bitsandbytes_release_from_the_row(source, notes, expected):
    assert bitsandbytes_keeps_matmul_input({"source": source, "notes": notes}) is expected


def test_row_rules_for_quantize_name_and_compile():
    row = {"finetune": "qlora", "source": "bitsandbytes 0.41.1", "notes": "Quantization 'bnb.nf4', micro-batch 1."}
    ft, _ = fine_tuning_from_row(row)
    assert ft.base_matmul_keeps_input and not ft.double_quant
    compiled_row = {**row, "notes": "Quantization 'bnb.nf4-dq'; torch.compile on"}
    ft, _ = fine_tuning_from_row(compiled_row)
    assert ft.double_quant and compiled_stated(compiled_row) and not compiled_stated(row)
    ft, _ = fine_tuning_from_row({"finetune": "lora", "source": "bitsandbytes 0.41.1"})
    assert not ft.base_matmul_keeps_input  # a bf16 base runs no 4-bit matmul


# ---- the optimizer stepped in backward (torchtune optimizer_in_bwd) --------------------------------
def test_gradient_lifetime_with_the_optimizer_in_backward():
    from gpuplan.workloads.training.finetune_memory import gradient_lifetime

    # 10 B of gradients, a backward working set of 2 B: the end of backward holds 10 + 2 = 12 > 3 at
    # the end of the forward; stepping in backward it holds only the largest one gradient, 4 + 2 = 6
    assert [float(x) for x in gradient_lifetime(10.0, 3.0, 2.0, True)] == [10.0, 1.0]
    assert [float(x) for x in gradient_lifetime(10.0, 3.0, 2.0, True, 4.0)] == [4.0, 1.0]
    # 7 B at the end of the forward beats 4 + 2: no gradient exists at the peak
    assert [float(x) for x in gradient_lifetime(10.0, 7.0, 2.0, True, 4.0)] == [0.0, 0.0]
    # gradients accumulated over micro-batches are all held
    assert [float(x) for x in gradient_lifetime(10.0, 3.0, 2.0, False)] == [10.0, 0.0]


def test_optimizer_in_backward_holds_the_largest_gradient():
    m = load_model("llama-2-7b")
    ft = FineTuning(master_weights="none", optimizer_in_backward=True)
    plan = TrainPlan(seq_len=256, micro_batch=1, global_batch=1, framework="other", recompute="full", fine_tuning=ft)
    mem = training_memory(m, plan)
    # at the end of backward the largest one tensor's bf16 gradient: the 32,000 x 4,096 embedding (or
    # head), 2 B each, against 2 x 6,738,415,616 B for every gradient
    full = training_memory(m, plan.model_copy(update={"fine_tuning": FineTuning(master_weights="none")}))
    assert full.per_gpu_bytes["gradients"] == 2 * 6_738_415_616
    assert mem.per_gpu_bytes["gradients"] == 32_000 * 4096 * 2
    with pytest.raises(ValidationError, match="optimizer_in_backward frees each gradient after its step"):
        TrainPlan(seq_len=256, micro_batch=1, global_batch=2, fine_tuning=ft)
    with pytest.raises(ValidationError, match="give one of the two"):
        FineTuning(optimizer_in_backward=True, offload="optimizer")
