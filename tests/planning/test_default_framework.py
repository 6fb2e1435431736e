"""The stack a plan assumes when the user names none (plan_search.default_framework)."""

import pytest

from gpuplan import api
from gpuplan.catalog import load_catalog
from gpuplan.specs import Sharding
from gpuplan.specs.execution import Framework
from gpuplan.specs.finetune import FineTuning
from gpuplan.workloads.training.framework_defaults import default_framework


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_pretraining_is_megatron_on_gpus_and_maxtext_on_tpu_pods(catalog):
    assert default_framework(catalog.system("dgx-h100")) is Framework.MEGATRON
    assert default_framework(catalog.system("tpu-v6e-pod")) is Framework.MAXTEXT  # ICI torus: JAX's stack
    # full fine-tuning is ordinary training: the pretraining stack
    assert default_framework(catalog.system("dgx-h100"), FineTuning(method="full"), Sharding.FSDP) is Framework.MEGATRON


@pytest.mark.parametrize("sharding, want", [(None, Framework.FSDP), (Sharding.NONE, Framework.FSDP),
                                            (Sharding.FSDP, Framework.FSDP), (Sharding.ZERO2, Framework.DEEPSPEED),
                                            (Sharding.ZERO3, Framework.DEEPSPEED)])
def test_adapter_fine_tuning_runs_on_pytorch(catalog, sharding, want):
    # Megatron-core has no bitsandbytes 4-bit base and no PEFT adapters: LoRA / QLoRA is PEFT on PyTorch
    # FSDP / DDP (Accelerate, torchtune, LitGPT) or DeepSpeed ZeRO (Accelerate's DeepSpeed plugin)
    qlora = FineTuning(method="qlora", lora_rank=64)
    assert default_framework(catalog.system("dgx-h100"), qlora, sharding) is want
    assert default_framework(None, qlora, sharding) is want  # a GPU alone (fit --gpu)


def test_seed_case_plans_on_pytorch_fsdp_and_says_so():
    # the seed curriculum's case: Llama-2-70B QLoRA with FSDP full sharding on two 24 GB cards
    kw = dict(gpus=2, fine_tuning={"method": "qlora", "lora_rank": 64, "offload": "params"}, sharding="fsdp",
              recompute="full")
    fit = api.fit_train("llama-2-70b", "rtx-4090", **kw)
    assert fit.plan.framework is Framework.FSDP
    assert api.fit_train("llama-2-70b", "rtx-4090", framework="megatron", **kw).plan.framework is Framework.MEGATRON
    run = api.train("llama-2-70b", system="rtx-4090", tokens=10_000_000, **kw)
    assert run.estimate.step.framework is Framework.FSDP
    assert any("framework fsdp assumed" in n for n in run.json_data()["plan_notes"])
