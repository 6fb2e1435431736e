"""What the Hugging Face stack's loops change beside the modules: torch FSDP's unsharded root under
`Framework.TRANSFORMERS` (finetune_memory.torch_fsdp), PEFT's fp32 adapters only where the trainable
weights are not stated 16-bit (finetune_time.peft_fp32_adapters), and gradients zeroed in place by
`zero_grad()` before PyTorch 2.0 (FineTuning.zero_grad_keeps_buffers). Values by hand from Llama-2-7B's
config (vocab 32,000, hidden 4,096, untied head) and bert-large's columns."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.interfaces.validation.fine_tuning_row import fine_tuning_from_row, trainer_zero_grad_keeps_buffers
from gpuplan.models import load_model, model_from_arch_row
from gpuplan.specs.choices import Sharding
from gpuplan.specs.execution import Framework
from gpuplan.specs.finetune import FineTuning, MasterWeights
from gpuplan.specs.plan import TrainPlan
from gpuplan.workloads.training.finetune_memory import gradients_freed_between_steps, torch_fsdp
from gpuplan.workloads.training.finetune_time import peft_fp32_adapters
from gpuplan.workloads.training.memory import training_memory

QLORA = dict(method="qlora", lora_rank=64, lora_targets="q_proj+k_proj+v_proj+gate_proj+up_proj+down_proj",
             master_weights="none", lora_dropout=0.1)


def test_torch_fsdp_frameworks():
    for fw in (Framework.FSDP, Framework.TORCHTITAN, Framework.TRANSFORMERS):
        assert torch_fsdp(TrainPlan(dp=2, framework=fw, sharding=Sharding.FSDP))
    assert not torch_fsdp(TrainPlan(dp=2, framework=Framework.TRANSFORMERS, sharding=Sharding.ZERO2))
    assert not torch_fsdp(TrainPlan(dp=2, framework=Framework.DEEPSPEED, sharding=Sharding.ZERO3))


def test_fsdp_root_held_whole_under_transformers():
    # fsdp_qlora's layout (aai3090): Llama-2-7B QLoRA over 2 GPUs, FSDP FULL_SHARD. The root unit holds the
    # embedding and the untied head in bf16: 2 x 32,000 x 4,096 x 2 B = 524,288,000 B, plus the final
    # RMSNorm's 4,096 weights x 2 B = 8,192 B
    model = load_model("llama-2-7b")
    plan = TrainPlan(dp=2, seq_len=512, framework=Framework.TRANSFORMERS, sharding=Sharding.FSDP, fine_tuning=QLORA)
    mem = training_memory(model, plan)
    assert mem.other_bytes_detail["fsdp_root_unsharded"] == pytest.approx(524_288_000 + 8_192)


def test_peft_fp32_adapters_only_without_a_16bit_statement():
    fp32 = FineTuning(method="lora", lora_rank=8)  # master_weights fp32: PEFT >= 0.12 upcasts the adapters
    bf16 = FineTuning(method="lora", lora_rank=8, master_weights=MasterWeights.NONE)  # PEFT < 0.12: base dtype
    assert peft_fp32_adapters(Framework.TRANSFORMERS, fp32, 2.0)
    assert not peft_fp32_adapters(Framework.TRANSFORMERS, bf16, 2.0)
    assert not peft_fp32_adapters(Framework.TRANSFORMERS, fp32, 4.0)  # fp32 compute: nothing to cast
    assert not peft_fp32_adapters(Framework.OTHER, fp32, 2.0)  # LitGPT / torchtune adapters: their own dtype


HF1GPU = {"source": "huggingface/transformers@0016acf7ef42:docs/source/en/perf_train_gpu_one.mdx (2022 version)",
          "notes": "bert-large-uncased trained with HF Trainer; fp16=True"}


@pytest.mark.parametrize("row, expected", [
    (HF1GPU, True),  # a 2022 page: Trainer's model.zero_grad() on PyTorch 1.x
    ({**HF1GPU, "notes": HF1GPU["notes"] + "; PyTorch 2.0.1"}, False),  # a stated PyTorch 2.x frees them
    ({**HF1GPU, "source": "blog post, Feb 2023 (2023-02-10)"}, True),
    ({**HF1GPU, "source": "docs, 2023-03-20"}, False),  # transformers PR #22136 of 2023-03-13 on
    ({**HF1GPU, "source": "a page of 2023"}, False),  # a year alone of 2023 may postdate March
    ({**HF1GPU, "notes": "lit-gpt finetune/lora.py"}, False),  # not the HF Trainer
])
def test_trainer_zero_grad_rule(row, expected):
    assert trainer_zero_grad_keeps_buffers(row) is expected
    assert fine_tuning_from_row(row)[0].zero_grad_keeps_buffers is expected


def test_gradients_held_through_the_forward():
    # hf1gpu-1's plan: bert-large, HF Trainer fp16 over an fp32 model, bs 4 x 512, one micro-batch per step.
    # Freed by zero_grad (PyTorch 2): the peak is the end of the forward with no gradient. Zeroed in place
    # (PyTorch 1.x): every fp32 gradient of the trainable weights is there too, 4 B per parameter
    model = model_from_arch_row({"id": "t-1", "layers": "24", "hidden": "1024", "heads": "16", "ffn": "4096",
                                 "vocab": "30522", "seq_len": "512", "ffn_kind": "gelu"})
    base = TrainPlan(seq_len=512, micro_batch=4, global_batch=4, precision="fp16", framework=Framework.TRANSFORMERS)
    kept = base.model_copy(update={"fine_tuning": FineTuning(zero_grad_keeps_buffers=True)})
    assert gradients_freed_between_steps(base) and not gradients_freed_between_steps(kept)
    freed, held = training_memory(model, base), training_memory(model, kept)
    assert freed.per_gpu_bytes["gradients"] == 0.0
    assert held.per_gpu_bytes["gradients"] == pytest.approx(4.0 * held.trainable_params)
    assert held.allocated_bytes - freed.allocated_bytes == pytest.approx(4.0 * held.trainable_params)


@given(st.integers(2015, 2030), st.integers(1, 12))
def test_zero_grad_rule_follows_the_date(year, month):
    row = {**HF1GPU, "source": f"a page of {year}-{month:02d}-15"}
    assert trainer_zero_grad_keeps_buffers(row) is ((year, month) < (2023, 3))
