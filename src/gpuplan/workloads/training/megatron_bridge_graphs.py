"""CUDA-graph scopes of the Megatron-Bridge performance recipes, by (NeMo container release, model
family, system, precision): what `cfg.model.cuda_graph_impl` / `cuda_graph_scope` the recipe that
produced each published Megatron-Bridge performance-summary table set. Read from the configs at
the tag of that release (NVIDIA-NeMo/Megatron-Bridge; v0.4.2 = 26.04.01, v0.5.1 = 26.06, and for
26.08 the commit that published its table, 4ab94dfad "docs: update performance summary for 26.08",
whose recipes v0.6.0 keeps). The recipe variant is the one whose layout (GPUs, PP, VP, EP, GBS, MBS)
the table prints. Where a workload base config leaves `cuda_graph_impl` None the model recipe's
default holds: "none" (recipes/gpt_oss/gpt_oss.py, recipes/deepseek/deepseek_v3.py set it; the Qwen3
recipes leave Megatron-core's default, "none").

Only the entries read are listed; a combination not listed is unknown (`recipe_graph_scope` returns
None) and a caller assumes no graphs and says so. What each scope removes from the step time:
`step.cuda_graphs`.
"""

from __future__ import annotations

from typing import NamedTuple

from gpuplan.specs.execution import CudaGraphScope

_FULL = frozenset({CudaGraphScope.FULL_ITERATION})
_PARTIAL = frozenset({CudaGraphScope.ATTN, CudaGraphScope.MOE_ROUTER, CudaGraphScope.MOE_PREPROCESS})
_NONE: frozenset = frozenset()
_MB = "NVIDIA-NeMo/Megatron-Bridge"


class RecipeGraphs(NamedTuple):
    """One recipe's graph scope and where it was read."""

    scope: frozenset
    source: str


#: (release, family, system id, precision) -> RecipeGraphs. Family: "qwen3-235b-a22b", "qwen3-30b-a3b",
#: "deepseek-v3", "gpt-oss-120b"; system: the gpuplan catalog id of the table's System (DGX-GB200 =
#: gb200-nvl72, DGX-B200 = dgx-b200, DGX-H100 = dgx-h100); precision as the table prints it, lower case
#: (MXFP8 = "mxfp8"; "fp8" = the FP8-CS recipes).
RECIPE_GRAPH_SCOPES: dict[tuple[str, str, str, str], RecipeGraphs] = {
    ("26.08", "qwen3-235b-a22b", "gb200-nvl72", "mxfp8"): RecipeGraphs(
        _FULL, f"{_MB}@4ab94dfad src/megatron/bridge/perf_recipes/qwen/gb200/qwen3_moe.py "
               "qwen3_235b_a22b_pretrain_256gpu_gb200_fp8mx_config -> _enable_hybridep_full_iteration_mxfp8 "
               "(cuda_graph_impl full_iteration, HybridEP moe_expert_rank_capacity_factor 1.5)"),
    ("26.08", "qwen3-30b-a3b", "gb200-nvl72", "mxfp8"): RecipeGraphs(
        _FULL, f"{_MB}@4ab94dfad src/megatron/bridge/perf_recipes/qwen/gb200/qwen3_moe.py "
               "qwen3_30b_a3b_pretrain_8gpu_gb200_fp8mx_config -> _enable_hybridep_full_iteration_mxfp8"),
    ("26.06", "qwen3-30b-a3b", "dgx-h100", "fp8"): RecipeGraphs(
        _NONE, f"{_MB}@v0.5.1 scripts/performance/configs/qwen/qwen3_workload_base_configs.py "
               "QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1 (no cuda_graph_impl: recipe default none)"),
    ("26.04.01", "deepseek-v3", "dgx-b200", "mxfp8"): RecipeGraphs(
        _PARTIAL, f"{_MB}@v0.4.2 scripts/performance/configs/deepseek/deepseek_workload_base_configs.py "
                  "DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2 (transformer_engine: attn, moe_router, "
                  "moe_preprocess; DeepEP)"),
    ("26.04.01", "qwen3-235b-a22b", "dgx-b200", "mxfp8"): RecipeGraphs(
        _NONE, f"{_MB}@v0.4.2 scripts/performance/configs/qwen/qwen3_workload_base_configs.py "
               "QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_MX_V2 (no cuda_graph_impl)"),
    ("26.04.01", "qwen3-235b-a22b", "dgx-h100", "fp8"): RecipeGraphs(
        _NONE, f"{_MB}@v0.4.2 scripts/performance/configs/qwen/qwen3_workload_base_configs.py "
               "QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2 (no cuda_graph_impl)"),
    ("26.04.01", "gpt-oss-120b", "gb200-nvl72", "bf16"): RecipeGraphs(
        _NONE, f"{_MB}@v0.4.2 scripts/performance/configs/gpt_oss/gpt_oss_workload_base_configs.py "
               "GPT_OSS_120B_PRETRAIN_CONFIG_GB200_BF16_V2 (no cuda_graph_impl; recipe sets none)"),
    ("26.04.01", "gpt-oss-120b", "dgx-h100", "bf16"): RecipeGraphs(
        _NONE, f"{_MB}@v0.4.2 scripts/performance/configs/gpt_oss/gpt_oss_workload_base_configs.py "
               "GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16_V2 (no cuda_graph_impl; recipe sets none)"),
}

#: model-name fragments (lower case, separators removed) -> table family
_FAMILIES = (("qwen3235ba22b", "qwen3-235b-a22b"), ("qwen330ba3b", "qwen3-30b-a3b"),
             ("deepseekv3", "deepseek-v3"), ("gptoss120b", "gpt-oss-120b"))


def model_family(name: str) -> str | None:
    """The table family of a model name ("Qwen3-235B-A22B", "Qwen3_235B_a22B", "DeepSeek-V3 671B",
    "GPT OSS 120B"), or None."""
    key = "".join(ch for ch in name.lower() if ch.isalnum())
    return next((fam for frag, fam in _FAMILIES if frag in key), None)


def recipe_graph_scope(release: str, model: str, system: str, precision: str) -> RecipeGraphs | None:
    """The graph scope of the Megatron-Bridge recipe for (release, model name, system id, precision),
    or None where the table has no entry."""
    family = model_family(model)
    if family is None:
        return None
    return RECIPE_GRAPH_SCOPES.get((release, family, system.lower(), precision.lower()))


__all__ = ["RECIPE_GRAPH_SCOPES", "RecipeGraphs", "model_family", "recipe_graph_scope"]
