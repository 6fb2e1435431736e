"""The memory model's array form (`memory_grid.rank_memory_arrays`, the plan search's screen) against
the model itself (`memory._rank_memory`, what `training_memory` reports), term by term, on 10,000
seeded random plans: every model kind (dense MHA with learned positions and dropout, GQA, sliding
windows, MoE, MLA + MoE + MTP with dense first layers), every framework, precision, attention
kernel, recompute and sharding. The two sum a rank's layers in different orders (by kind / one by
one), so they agree to float rounding: 1e-12 relative."""

from __future__ import annotations

import numpy as np
import pytest

from gpuplan.errors import InputError
from gpuplan.models import load_model
from gpuplan.specs.execution import AttentionKernel, Framework
from gpuplan.specs.plan import Precision, Recompute, Sharding, TrainPlan
from gpuplan.workloads.training.memory import _layer_split, _rank_memory, microbatches_per_step, training_memory
from gpuplan.workloads.training.memory_grid import layer_kinds, rank_memory_arrays, screen_bytes
from gpuplan.workloads.training.plan_codes import RECOMPUTE_CODE, SHARDING_CODE
from gpuplan.workloads.training.plan_validity import check_plan

MODELS = ("gpt3-1.3b", "llama-3-8b", "gemma-2-9b", "mixtral-8x7b", "deepseek-v3")
PROTOS = [
    dict(framework=Framework.MEGATRON, precision=Precision.BF16, attention_kernel=AttentionKernel.FLASH),
    dict(framework=Framework.MEGATRON, precision=Precision.FP8, attention_kernel=AttentionKernel.FLASH),
    dict(framework=Framework.MEGATRON, precision=Precision.FP16, attention_kernel=AttentionKernel.UNFUSED),
    dict(framework=Framework.TORCHTITAN, precision=Precision.BF16, attention_kernel=AttentionKernel.FLASH),
    dict(framework=Framework.FSDP, precision=Precision.BF16, attention_kernel=AttentionKernel.FLASH_V1,
         grad_precision=Precision.BF16),
    dict(framework=Framework.DEEPSPEED, precision=Precision.FP32, attention_kernel=AttentionKernel.UNFUSED),
]
PLANS_PER_GROUP = 10_000 // (len(MODELS) * len(PROTOS)) + 1


def _random_plans(rng, model, proto: TrainPlan, n: int) -> list[TrainPlan]:
    """n plans that pass check_plan, on up to 1,024 GPUs."""
    pick = lambda values: values[int(rng.integers(len(values)))]  # noqa: E731
    moe = model.moe is not None
    plans: list[TrainPlan] = []
    while len(plans) < n:
        tp, dp, mb = pick((1, 2, 4, 8)), pick((1, 2, 4, 8, 16)), pick((1, 2, 3))
        update = dict(tp=tp, pp=pick((1, 2, 3, 4, 8)), dp=dp, cp=pick((1, 2)), vpp=pick((1, 1, 2, 3)),
                      ep=pick((1, 2, 4, 8)) if moe else 1, etp=pick((None, 1)) if moe else None, micro_batch=mb,
                      global_batch=pick((None, mb * dp * pick((4, 8, 24)))), recompute=pick(list(Recompute)),
                      sharding=pick(list(Sharding)), sequence_parallel=tp > 1 and (moe or bool(rng.integers(2))))
        plan = proto.model_copy(update=update)
        try:
            check_plan(model, plan)
        except InputError:
            continue
        plans.append(plan)
    return plans


def _scalar_terms(model, plan: TrainPlan, last: bool) -> dict[str, float]:
    rank = plan.pp - 1 if last else 0
    r = _rank_memory(model, plan, rank, _layer_split(model, plan)[rank])
    out = {"weights": r["weights"], "gradients": r["gradients"], "optimizer": r["optimizer"], **r["acts"], **r["other"]}
    out["total"] = sum(float(v) for v in out.values())
    return {k: float(v) for k, v in out.items()}


def _axes(plans: list[TrainPlan]) -> dict[str, np.ndarray]:
    col = lambda f: np.array([f(p) for p in plans])  # noqa: E731
    return dict(tp=col(lambda p: p.tp), pp=col(lambda p: p.pp), dp=col(lambda p: p.dp), cp=col(lambda p: p.cp),
                ep=col(lambda p: p.ep), etp=col(lambda p: p.expert_tp), vpp=col(lambda p: p.vpp),
                micro_batch=col(lambda p: p.micro_batch), m=col(microbatches_per_step),
                recompute=col(lambda p: RECOMPUTE_CODE[p.recompute]), sequence_parallel=col(lambda p: p.sequence_parallel),
                sharding=col(lambda p: SHARDING_CODE[p.sharding]))


@pytest.mark.parametrize("name", MODELS)
def test_array_form_equals_the_memory_model_term_by_term(name):
    # 6 execution setups x 334 plans per model, 5 models: 10,020 plans, first and last rank each
    model = load_model(name)
    rng = np.random.default_rng(sum(map(ord, name)))
    checked = 0
    for setup in PROTOS:
        proto = TrainPlan(seq_len=int(rng.choice([1024, 2048, 4096])), **setup)
        plans = _random_plans(rng, model, proto, PLANS_PER_GROUP)
        by_gpus: dict[int, list[TrainPlan]] = {}
        for plan in plans:  # the outside-allocator term depends on the GPU count: one call per count
            by_gpus.setdefault(plan.num_gpus, []).append(plan)
        for num_gpus, group in by_gpus.items():
            for last in (False, True):
                grid = rank_memory_arrays(model, proto, **_axes(group), num_gpus=num_gpus, last=last)
                for i, plan in enumerate(group):
                    scalar = _scalar_terms(model, plan, last)
                    for term, values in grid.items():
                        expected = scalar.get(term, 0.0)
                        assert float(np.broadcast_to(values, (len(group),))[i]) == pytest.approx(
                            expected, rel=1e-12, abs=1e-6), (name, plan, last, term)
                    assert set(scalar) <= set(grid)
        checked += len(plans)
    assert checked >= 2000


def test_screen_is_a_lower_bound_of_the_peak_over_all_ranks():
    # DeepSeek-V3 (3 dense layers first, MTP on the last stage) on uneven splits: the screen takes
    # the larger of the first and the last rank, training_memory the largest of all ranks
    model = load_model("deepseek-v3")
    rng = np.random.default_rng(61)
    proto = TrainPlan(seq_len=4096)
    plans = _random_plans(rng, model, proto, 300)
    for plan in plans:
        total, outside = screen_bytes(model, proto, **_axes([plan]), num_gpus=plan.num_gpus)
        exact = training_memory(model, plan)
        assert float(total[0]) <= exact.per_gpu_bytes["total"] * (1 + 1e-12)
        if plan.pp <= 2:  # every rank is the first or the last: the bound is the peak
            assert float(total[0]) == pytest.approx(exact.per_gpu_bytes["total"], rel=1e-12)
        # outside the allocator: the CUDA context and the plan's NCCL communicators (one value per plan)
        assert np.asarray(outside).item() == pytest.approx(exact.per_gpu_bytes["total"] - exact.allocated_bytes,
                                                           rel=1e-12)


def test_layer_kinds_group_equal_inventories():
    # DeepSeek-V3: first_k_dense_replace = 3 dense layers, then 58 MoE layers (config.json): two kinds
    kind, representative = layer_kinds(load_model("deepseek-v3"))
    assert kind == (0,) * 3 + (1,) * 58 and representative == (0, 3)
    # Llama 3 8B: 32 identical layers
    assert layer_kinds(load_model("llama-3-8b")) == ((0,) * 32, (0,))


# ---- fine-tuning plans: the screen applies `fit`'s rules -------------------------------------------
FINE_TUNING_PROTOS = [
    dict(framework=Framework.FSDP, fine_tuning=dict(method="qlora", lora_rank=64, lora_targets="all_linear")),
    dict(framework=Framework.FSDP, fine_tuning=dict(method="lora", lora_rank=64, master_weights="none",
                                                    logits_held_in_backward=True)),
    dict(framework=Framework.FSDP, sharding=Sharding.FSDP, fine_tuning=dict(method="qlora", lora_rank=16, offload="params", lora_dropout=0.1,
                                                    master_weights="none", base_matmul_keeps_input=True)),
    dict(framework=Framework.OTHER, fine_tuning=dict(method="lora", chunked_loss=True, offload_activations=True,
                                                     master_weights="none", fused_qkv_views=True, lora_dropout=0.05,
                                                     lora_targets="attn")),
    dict(framework=Framework.OTHER, compiled_model=True,
         fine_tuning=dict(method="full", optimizer="adamw_8bit", master_weights="none")),
    dict(framework=Framework.DEEPSPEED, fine_tuning=dict(method="lora", base_dtype="fp32", offload="optimizer")),
    dict(framework=Framework.MEGATRON, fine_tuning=dict(method="full", optimizer="paged_adamw_8bit")),
    dict(framework=Framework.OTHER, fine_tuning=dict(method="full", master_weights="none", optimizer_in_backward=True,
                                                     chunked_loss=True)),
    # HF Trainer in eager PyTorch: ordinary training over an fp32 model under autocast, PEFT's fp32 adapters
    dict(framework=Framework.TRANSFORMERS),
    dict(framework=Framework.TRANSFORMERS, fine_tuning=dict(method="lora", lora_rank=16, lora_targets="all_linear")),
]


@pytest.mark.parametrize("name", ("llama-3-8b", "mixtral-8x7b"))
def test_fine_tuning_array_form_equals_the_memory_model_term_by_term(name):
    # 7 fine-tuning setups x 40 plans: the rules of finetune_memory / finetune_activations on the grid
    model = load_model(name)
    rng = np.random.default_rng(sum(map(ord, name)) + 7)
    for setup in FINE_TUNING_PROTOS:
        proto = TrainPlan(seq_len=int(rng.choice([512, 2048])), **setup)
        plans = [p for p in _random_plans(rng, model, proto, 60)
                 if not (p.fine_tuning.offload.value == "params" and p.sharding not in (Sharding.ZERO3, Sharding.FSDP))][:40]
        # one micro-batch per step: a PyTorch loop's gradients exist only at the end of backward
        plans += [p.model_copy(update={"global_batch": p.micro_batch * p.dp}) for p in plans[:20]]
        for plan in plans:
            for last in (False, True):
                grid = rank_memory_arrays(model, proto, **_axes([plan]), num_gpus=plan.num_gpus, last=last)
                scalar = _scalar_terms(model, plan, last)
                for term, expected in scalar.items():
                    assert float(np.ravel(grid[term])[0]) == pytest.approx(expected, rel=1e-12, abs=1e-6), (
                        name, plan, last, term)


def test_fine_tuning_screen_equals_fit_on_the_seed_case():
    # `gpuplan fit train llama-2-70b --gpu rtx-4090 --gpus 2 --finetune qlora --lora-rank 64 --sharding fsdp
    # --offload params`: the plan fit evaluates (seq 4096, micro-batch 1, PyTorch FSDP)
    model = load_model("llama-2-70b")
    proto = TrainPlan(seq_len=4096, framework=Framework.FSDP, sharding=Sharding.FSDP,
                      fine_tuning=dict(method="qlora", lora_rank=64, offload="params"))
    plan = proto.model_copy(update=dict(dp=2, micro_batch=1))
    exact = training_memory(model, plan)
    total, _ = screen_bytes(model, proto, **_axes([plan]), num_gpus=2)
    assert float(total[0]) == pytest.approx(exact.per_gpu_bytes["total"], rel=1e-12)
    grid = rank_memory_arrays(model, proto, **_axes([plan]), num_gpus=2)
    # offload params: weights, gradients and optimizer states live on the host
    assert float(grid["weights"][0]) == float(grid["gradients"][0]) == float(grid["optimizer"][0]) == 0.0
    # one dequantised projection in bf16: the largest, gate / up / down 28,672 x 8,192 (config.json) x 2 B
    assert float(np.ravel(grid["dequant_workspace"])[0]) == 28_672 * 8_192 * 2
    # the ordinary-training screen of the same layout (18 B per parameter, sharded over 2) is far larger
    ordinary, _ = screen_bytes(model, TrainPlan(seq_len=4096, framework=Framework.FSDP), **_axes([plan]), num_gpus=2)
    assert float(ordinary[0]) > float(total[0]) + 18 * 60e9 / 2
