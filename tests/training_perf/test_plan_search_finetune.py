"""The plan search with fine-tuning choices (`SearchSpace.fine_tuning`): its memory screen applies
`fit`'s fine-tuning rules (memory_grid), so the seed case of issue 31 (Llama-2-70B QLoRA on two
24 GB RTX 4090s) is searched, screened and confirmed with the numbers `fit` gives."""

from __future__ import annotations

import pytest

from gpuplan.catalog import load_catalog
from gpuplan.errors import Infeasible, InputError
from gpuplan.models import load_model
from gpuplan.specs import Recompute, Sharding
from gpuplan.specs.finetune import FineTuning
from gpuplan.workloads.training.memory import training_memory
from gpuplan.workloads.training.memory_grid import screen_bytes
from gpuplan.workloads.training.plan_codes import RECOMPUTE_CODE, SHARDING_CODE
from gpuplan.workloads.training.finetune_search import FINE_TUNING_SHARDING_REASON
from gpuplan.workloads.training.plan_search import SearchSpace, search_plans

SEED = FineTuning(method="qlora", lora_rank=64, offload="params")


def _box():
    c = load_catalog()
    system = c.system("rtx-4090")
    return system, c.gpu(system.gpu)


def test_seed_case_is_searched_with_fits_rules():
    system, gpu = _box()
    model = load_model("llama-2-70b")
    space = SearchSpace(seq_len=4096, global_batch=16, tp=[1], pp=[1], cp=[1], vpp=[1], micro_batch=[1, 2],
                        recompute=[Recompute.NONE, Recompute.FULL], sharding=[Sharding.NONE, Sharding.FSDP],
                        sequence_parallel=[False], fine_tuning=SEED)
    result = search_plans(model, system, gpu, 2, space, top=4, framework="fsdp")
    # 2 micro-batches x 2 recompute x 2 shardings = 8 layouts: the 4 without sharding cannot offload
    # parameters; 70B weights of 24 GB cards fit only with activation checkpointing (stored layer
    # inputs 80 layers x 4,096 tokens x 8,192 x 2 B = 5 GiB a micro-batch, against 80 GiB without)
    assert result.rejected[FINE_TUNING_SHARDING_REASON] == 4
    assert {(p.plan.recompute, p.plan.sharding) for p in result.best} == {(Recompute.FULL, Sharding.ZERO3)}
    for ranked in result.best:
        exact = training_memory(model, ranked.plan, gpu)
        assert exact.fits and ranked.plan.fine_tuning == SEED
        # the screen of this one plan is fit's total (one pipeline rank: the bound is the peak)
        axes = dict(tp=1, pp=1, dp=2, cp=1, ep=1, etp=1, vpp=1, micro_batch=ranked.plan.micro_batch,
                    m=ranked.plan.global_batch / (ranked.plan.micro_batch * 2),
                    recompute=RECOMPUTE_CODE[ranked.plan.recompute], sequence_parallel=False,
                    sharding=SHARDING_CODE[ranked.plan.sharding])
        total, _ = screen_bytes(model, ranked.plan, **axes, num_gpus=2)
        assert float(total) == pytest.approx(exact.per_gpu_bytes["total"], rel=1e-12)
    # without the fine-tuning rules the same space is 18 B per parameter: nothing fits
    with pytest.raises(Infeasible, match="no plan of"):
        search_plans(model, system, gpu, 2, SearchSpace(**{**space.__dict__, "fine_tuning": None}), framework="fsdp")


def test_fine_tuning_the_layout_cannot_express_is_refused():
    system, gpu = _box()
    space = SearchSpace(seq_len=1024, precision="fp8", fine_tuning=FineTuning(master_weights="none"))
    with pytest.raises(InputError, match="master_weights none trains the weights themselves"):
        search_plans(load_model("llama-2-7b"), system, gpu, 2, space, framework="fsdp")
