"""Rows that ran the Hugging Face stack are predicted with `Framework.TRANSFORMERS`
(interfaces.validation.hf_stack_row): the words that name it, the framework cells it overrides and
those it keeps, and the shipped rows it reaches."""

import csv

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.interfaces.validation.hf_stack_row import hf_stack_framework, hf_stack_named
from gpuplan.interfaces.validation.training import framework_from_row, plan_from_row
from gpuplan.specs.execution import Framework


@pytest.mark.parametrize("notes, named", [
    # HF Trainer, as hf1gpu's notes say it (transformers perf_train_gpu_one.mdx)
    ("bert-large-uncased trained with HF Trainer on 512 dummy sequences", "HF Trainer"),
    ("run with the Hugging Face Trainer, bf16=True", "Hugging Face Trainer"),
    # transformers' <Model>For<Task> / AutoModelFor<Task> classes (models/*/modeling_*.py)
    ("loaded as AutoModelForCausalLM in bf16", "AutoModelForCausalLM"),
    ("LlamaForCausalLM, sdpa attention", "LlamaForCausalLM"),
    ("accelerate + TRL SFTTrainer, packing", "TRL"),
    ("LoRA via PEFT get_peft_model", "PEFT"),
    ("Axolotl config qlora.yml", "Axolotl"),
])
def test_the_words_that_state_the_stack(notes, named):
    assert hf_stack_named({"notes": notes}) == named


def test_fsdp_qlora_is_named_by_its_source():
    row = {"source": "AnswerDotAI/fsdp_qlora@4cd6923:benchmarks_03_2024.md", "notes": "QLoRA, context 512"}
    assert hf_stack_named(row) == "fsdp_qlora"


@pytest.mark.parametrize("notes", [
    "Arch: HF config.json of Llama 3 (Hugging Face hub)",  # a config file, not the stack that ran
    "NeMo AutoModel (PyTorch FSDP2 backend, TE kernels)",  # NVIDIA's AutoModel, not transformers' classes
    "lit-gpt finetune/lora.py, litgpt config.py Llama-2-7b-hf",  # LitGPT's own modules
    "torchtune recipe lora_finetune_single_device",
])
def test_words_that_do_not(notes):
    assert hf_stack_named({"notes": notes}) is None


@pytest.mark.parametrize("cell, expected", [
    ("other", Framework.TRANSFORMERS), ("fsdp", Framework.TRANSFORMERS), ("", Framework.TRANSFORMERS),
    # stated stacks that run their own modules or their own precision engine keep their framework
    ("deepspeed", Framework.DEEPSPEED), ("megatron", Framework.MEGATRON), ("torchtitan", Framework.TORCHTITAN),
])
def test_framework_cells(cell, expected):
    row = {"framework": cell, "notes": "trained with HF Trainer"}
    assert framework_from_row(row) is expected


def test_rows_without_the_stack_keep_their_cell():
    assert framework_from_row({"framework": "other", "notes": "lit-gpt finetune/lora.py"}) is Framework.OTHER
    assert framework_from_row({"framework": "fsdp", "notes": "llm-foundry"}) is Framework.FSDP
    assert hf_stack_framework({"framework": "deepspeed", "notes": "TRL SFTTrainer"}) is None


@given(st.text(max_size=200))
def test_any_notes_give_a_framework(notes):
    """Whatever the notes say, the row has one framework, and TRANSFORMERS only with a named stack."""
    fw = framework_from_row({"framework": "other", "notes": notes})
    assert fw in (Framework.OTHER, Framework.TRANSFORMERS)
    assert (fw is Framework.TRANSFORMERS) == (hf_stack_named({"notes": notes}) is not None)


def _family(shared_dir, family):
    with open(shared_dir / "validation" / "training.csv") as f:
        return [r for r in csv.DictReader(f) if r["id"].rsplit("-", 1)[0] == family]


@pytest.mark.parametrize("family, expected", [
    ("hf1gpu", Framework.TRANSFORMERS),  # notes: "HF Trainer", AutoModelForSequenceClassification
    ("aai3090", Framework.TRANSFORMERS),  # source: AnswerDotAI/fsdp_qlora
    ("ltres", Framework.OTHER),  # lit-gpt's own modules
    ("ttflags", Framework.OTHER),  # torchtune's own modules
    ("peftds", Framework.DEEPSPEED),  # TRL under the DeepSpeed engine
])
def test_shipped_fine_tuning_families(shared_dir, family, expected):
    rows = _family(shared_dir, family)
    assert rows
    assert {framework_from_row(r) for r in rows} == {expected}


def test_the_plan_says_why(shared_dir):
    row = _family(shared_dir, "hf1gpu")[0]
    _, notes = plan_from_row(row, "Volta GV100")
    assert "framework=transformers (the row names HF Trainer)" in notes
