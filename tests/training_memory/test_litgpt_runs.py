"""What a LitGPT run holds beyond a plain PyTorch loop (interfaces.validation.litgpt_row, fine_tuning_row):
the output head quantised with the base under Lightning's BitsandbytesPrecision (`FineTuning.quantized_head`)
and the model without dropout, each against a hand derivation; and the validation rules that read them.

Llama 2 7B (h 4096, vocab 32000, untied, ffn 11008) comes from the catalog.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gpuplan.interfaces.validation.fine_tuning_row import fine_tuning_from_row
from gpuplan.interfaces.validation.litgpt_row import litgpt_dropout_free, litgpt_source
from gpuplan.models import load_model
from gpuplan.specs.execution import Framework
from gpuplan.specs.finetune import FineTuning
from gpuplan.specs.plan import TrainPlan
from gpuplan.workloads.training.memory import training_memory
from gpuplan.workloads.training.output_head import head_calls

LITGPT_SOURCE = "Lightning-AI/litgpt@0cc02afa:tutorials/resource-tables.md (measured at lit-gpt commit 8641822)"


@pytest.fixture(scope="module")
def llama7b():
    return load_model("llama-2-7b")


def _plan(head: bool, **ft) -> TrainPlan:
    fine = FineTuning(**{"method": "qlora", "master_weights": "none", "quantized_head": head, **ft})
    return TrainPlan(framework=Framework.OTHER, seq_len=1024, micro_batch=1, global_batch=1, fine_tuning=fine)


def test_quantized_head_storage_and_dequantised_copy(llama7b):
    # the head 32,000 x 4,096 = 131,072,000 elements. bf16: 262,144,000 B. NF4 with double-quantised scales
    # (base_weights docstring): codes 65,536,000 + one byte per 64-block 2,048,000 + an fp32 absmax per 256
    # such bytes 8,000 x 4 = 32,000 + the 4-byte offset = 67,616,004 B
    kept, quantized = (training_memory(llama7b, _plan(h)) for h in (False, True))
    assert kept.per_gpu_bytes["weights"] - quantized.per_gpu_bytes["weights"] == pytest.approx(
        262_144_000 - 67_616_004, abs=1e-3)
    # its matmuls dequantise it whole: 131,072,000 x 2 B, larger than the largest layer projection
    # (gate / up 11,008 x 4,096 x 2 B = 90,177,536)
    assert kept.other_bytes_detail["dequant_workspace"] == 11008 * 4096 * 2
    assert quantized.other_bytes_detail["dequant_workspace"] == 131_072_000 * 2
    assert "output head quantised" in quantized.notes[0]


def test_quantized_head_needs_a_quantised_base():
    with pytest.raises(ValidationError, match="quantized_head"):
        FineTuning(method="lora", quantized_head=True)
    assert FineTuning(method="lora", base_dtype="int8", quantized_head=True).quantized_head


def test_a_tied_head_stays_the_embedding(llama7b):
    tied = llama7b.model_copy(update={"tied_embeddings": True})
    kept, quantized = (training_memory(tied, _plan(h)) for h in (False, True))
    assert kept.per_gpu_bytes["weights"] == quantized.per_gpu_bytes["weights"]


def test_litgpt_qlora_rows_quantise_the_head():
    # lit-gpt finetune/lora.py@8641822 builds BitsandbytesPrecision(quantize[4:], dtype) with no ignore_modules
    row = {"finetune": "qlora", "precision": "bf16", "source": LITGPT_SOURCE, "notes": "Quantization 'bnb.nf4'"}
    ft, notes = fine_tuning_from_row(row)
    assert ft.quantized_head and not ft.double_quant and any("output head quantised" in n for n in notes)
    assert not fine_tuning_from_row({**row, "finetune": "lora"})[0].quantized_head
    assert not fine_tuning_from_row({**row, "source": "AnswerDotAI/fsdp_qlora@4cd6923"})[0].quantized_head


def test_litgpt_models_run_without_dropout():
    # lit_gpt/model.py@8641822 has no dropout module; Megatron's GPT default (0.1) does not apply
    model = load_model("gpt3-1.3b").model_copy(update={"hidden_dropout": 0.1, "attention_dropout": 0.1})
    row = {"source": LITGPT_SOURCE}
    free = litgpt_dropout_free(model, row)
    assert free.hidden_dropout == 0.0 and free.attention_dropout == 0.0
    assert litgpt_dropout_free(model, {"source": "NVIDIA/Megatron-LM README"}) is model
    assert litgpt_source(row) and not litgpt_source({"source": "x", "notes": "litgpt config.py Llama-2-7b-hf"})


@settings(max_examples=20, deadline=None)
@given(seq=st.sampled_from([128, 512, 2048]), mb=st.integers(1, 4))
def test_quantising_the_head_never_raises_the_weights(llama7b, seq, mb):
    plans = [_plan(h).model_copy(update={"seq_len": seq, "micro_batch": mb, "global_batch": mb}) for h in (False, True)]
    kept, quantized = (training_memory(llama7b, p) for p in plans)
    assert quantized.per_gpu_bytes["weights"] < kept.per_gpu_bytes["weights"]
    # the dequantised head is at least the layers' largest dequantised projection
    assert quantized.other_bytes_detail["dequant_workspace"] >= kept.other_bytes_detail["dequant_workspace"]


def test_head_calls():
    # unchunked: once; torchtune's CEWithChunkedOutputLoss: 8 chunks; LitGPT's 128-token chunks of a
    # 1,034-token sequence: ceil(1034 / 128) = 9 (8 full chunks and one of 10 tokens)
    base = TrainPlan(framework=Framework.OTHER, seq_len=1034, micro_batch=1, global_batch=1,
                     fine_tuning=FineTuning(method="lora"))
    assert head_calls(base) == 1
    chunked = base.model_copy(update={"fine_tuning": FineTuning(method="lora", chunked_loss=True)})
    assert head_calls(chunked) == 8
    litgpt = base.model_copy(update={"fine_tuning": FineTuning(method="lora", chunked_loss=True, loss_chunk_tokens=128)})
    assert head_calls(litgpt) == 9
    with pytest.raises(ValidationError, match="loss_chunk_tokens"):
        FineTuning(method="lora", loss_chunk_tokens=128)


def test_autocast_keeps_a_head_cast_per_chunk(llama7b):
    # LoRA over an fp32 base under bf16 autocast (LitGPT bf16-mixed): the frozen fp32 head is cast anew at
    # each call (autocast caches only leaves that require grad) and each chunk's matmul keeps its cast for
    # the input gradient: 1,024 tokens in 128-token chunks = 8 casts of 32,000 x 4,096 x 2 B, against 1 cast
    def plan(chunk):
        ft = FineTuning(method="lora", base_dtype="fp32", chunked_loss=True, loss_chunk_tokens=chunk)
        return TrainPlan(framework=Framework.OTHER, seq_len=1024, micro_batch=1, global_batch=1, fine_tuning=ft)
    one, eight = (training_memory(llama7b, plan(c)).other_bytes_detail["autocast_weight_copies"] for c in (1024, 128))
    assert eight - one == 7 * 32000 * 4096 * 2


def test_litgpt_rows_chunk_the_head_in_128_tokens():
    row = {"finetune": "lora", "precision": "bf16", "source": LITGPT_SOURCE,
           "notes": "no activation checkpointing, chunked lm_head/cross-entropy"}
    ft, _ = fine_tuning_from_row(row)
    assert ft.chunked_loss and ft.loss_chunk_tokens == 128  # finetune/lora.py@8641822: lm_head_chunk_size=128
    ft, _ = fine_tuning_from_row({**row, "notes": "logits in chunks (lm_head_chunk_size=64) with chunked cross-entropy"})
    assert ft.loss_chunk_tokens == 64
    ft, _ = fine_tuning_from_row({**row, "source": "pytorch/torchtune@1814feb17", "notes": "CEWithChunkedOutputLoss"})
    assert ft.chunked_loss and ft.loss_chunk_tokens is None
