"""fp32 logits a training loop holds through backward (`FineTuning.logits_held_in_backward`: Answer.AI
fsdp_qlora train.py@4cd6923 sets `output = None` only after `loss.backward()`; transformers'
LlamaForCausalLM returns `logits.float()`): the loss's peak and every later backward phase, each
checked against a hand derivation, and the validation rule that reads it from a row.

Llama 2 7B (h 4096, vocab 32000, 32 layers, untied) comes from the catalog.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.interfaces.validation.fine_tuning_row import fine_tuning_from_row
from gpuplan.models import load_model
from gpuplan.specs.execution import Framework
from gpuplan.specs.finetune import FineTuning
from gpuplan.specs.plan import Recompute, Sharding, TrainPlan
from gpuplan.workloads.training.loss_memory import held_logits_bytes_per_vocab_entry, loss_bytes_per_vocab_entry
from gpuplan.workloads.training.memory import training_memory

LORA = dict(method="lora", lora_rank=64, lora_targets="all_linear", master_weights="none")


@pytest.fixture(scope="module")
def llama7b():
    return load_model("llama-2-7b")


def _plan(held: bool, **kw) -> TrainPlan:
    return TrainPlan(framework=Framework.FSDP, seq_len=2048, micro_batch=4, global_batch=8, dp=2,
                     sharding=Sharding.FSDP, recompute=Recompute.FULL,
                     fine_tuning=FineTuning(**LORA, logits_held_in_backward=held), **kw)


def test_loss_peak_per_vocab_entry():
    # PyTorch cross entropy on fp32 logits, at log_softmax_backward: saved log-softmax output 4 +
    # nll_loss_backward's gradient 4 + log_softmax_backward's gradient 4 = 12; plus the held logits 4 = 16
    assert loss_bytes_per_vocab_entry(_plan(False)) == 12.0
    assert loss_bytes_per_vocab_entry(_plan(True)) == 16.0
    assert held_logits_bytes_per_vocab_entry(_plan(True)) == 4.0
    assert held_logits_bytes_per_vocab_entry(_plan(False)) == 0.0


def test_loss_phase_grows_by_the_held_logits(llama7b):
    # 4 x 2048 tokens x 32000 entries: the loss phase is the larger phase in both plans (it holds
    # 8192 x 32000 x 12 B = 3.1 GB against a recomputed layer's set), so the activations differ by
    # the held logits alone: 8192 x 32000 x 4 B
    plain, held = (training_memory(llama7b, _plan(h)) for h in (False, True))
    assert "logits" in plain.activations_bytes_detail and "logits" in held.activations_bytes_detail
    drop = held.per_gpu_bytes["activations"] - plain.per_gpu_bytes["activations"]
    assert drop == pytest.approx(8192 * 32000 * 4, rel=1e-12)
    assert any("logits held" in n for n in held.notes)


def test_backward_phase_keeps_the_held_logits(llama7b):
    # a short sequence with full recompute: 1 x 128 tokens, loss 128 x 32000 x 16 B = 65.5 MB against
    # the backward phase; whichever wins, the held logits 128 x 32000 x 4 B = 16.4 MB are in it
    plan = _plan(True).model_copy(update={"seq_len": 128, "micro_batch": 1, "global_batch": 2})
    acts = training_memory(llama7b, plan).activations_bytes_detail
    held = 128 * 32000 * 4
    if "held_logits" in acts:
        assert acts["held_logits"] == pytest.approx(held, rel=1e-12)
    else:
        assert acts["logits"] == pytest.approx(128 * 32000 * 16 + 128 * 2 * 2 * 4096, rel=1e-12)


def test_chunked_loss_over_held_logits():
    # LitGPT under Lightning Fabric: the output chunks come back converted to fp32 and stay bound through
    # backward (4 per entry); lit-gpt's chunked_cross_entropy runs every chunk's cross entropy before
    # backward, each log_softmax saving its fp32 output (4 per entry, all chunks): 4 + 4 = 8
    plan = _plan(True).model_copy(update={"fine_tuning": FineTuning(**LORA, logits_held_in_backward=True,
                                                                     chunked_loss=True)})
    assert loss_bytes_per_vocab_entry(plan) == 8.0
    # without the held logits the chunked loss keeps its own rule: bf16 chunks 2 + one fp32 chunk of 8, 4 / 8
    plain = plan.model_copy(update={"fine_tuning": FineTuning(**LORA, chunked_loss=True)})
    assert loss_bytes_per_vocab_entry(plain) == 2.5


def test_litgpt_rows_hold_their_logits():
    # Fabric's _FabricModule.forward converts the output to the default dtype (fp32); lit-gpt's
    # finetune/lora.py keeps `logits` bound across fabric.backward
    row = {"finetune": "lora", "precision": "bf16", "notes": "chunked cross-entropy",
           "source": "Lightning-AI/litgpt@0cc02afa:tutorials/resource-tables.md (lit-gpt commit 8641822)"}
    ft, _ = fine_tuning_from_row(row)
    assert ft.chunked_loss and ft.logits_held_in_backward and ft.fused_qkv_views
    ft, _ = fine_tuning_from_row({**row, "source": "pytorch/torchtune@1814feb17:README.md"})
    assert ft.chunked_loss and not ft.logits_held_in_backward


def test_fsdp_qlora_rows_hold_their_logits():
    row = {"finetune": "qlora", "precision": "bf16",
           "source": "AnswerDotAI/fsdp_qlora@4cd6923:benchmarks_03_2024.md", "notes": "train.py defaults"}
    ft, notes = fine_tuning_from_row(row)
    assert ft.logits_held_in_backward and any("logits held" in n for n in notes)
    ft, _ = fine_tuning_from_row({**row, "source": "huggingface/transformers docs"})
    assert not ft.logits_held_in_backward
    ft, _ = fine_tuning_from_row({**row, "notes": "chunked cross-entropy"})
    assert ft.chunked_loss and not ft.logits_held_in_backward


@settings(max_examples=30, deadline=None)
@given(seq=st.sampled_from([128, 512, 2048]), mb=st.integers(1, 4))
def test_holding_the_logits_never_lowers_the_peak(llama7b, seq, mb):
    plan = _plan(False).model_copy(update={"seq_len": seq, "micro_batch": mb, "global_batch": 2 * mb})
    held = plan.model_copy(update={"fine_tuning": plan.fine_tuning.model_copy(update={"logits_held_in_backward": True})})
    low, high = (training_memory(llama7b, p).per_gpu_bytes["total"] for p in (plan, held))
    # at least the held logits at the larger phase, at most the held logits (4 B per entry)
    assert 0 <= high - low <= seq * mb * 32000 * 4 * (1 + 1e-12)
