"""Training-row predictor for `gpuplan validate` (../shared/validation/SCHEMA.md, training.csv).

`predict_row(row)` builds the ModelSpec from the architecture columns (`models.model_from_arch_row`), a
TrainPlan from the parallelism columns, the system from the catalog, and predicts the row's metric with
`step.assembly.estimate_step_time` (time metrics) or `memory.training_memory` (memory metrics).

Defaults for empty cells (documented, the same for every row):
- tp, pp, dp, cp, ep, vpp, micro_batch: 1; dp = num_gpus / (tp pp cp) when empty.
- expert tensor parallelism (no column): 1 on MoE rows with tp > 1, what the published Megatron MoE
  recipes set (Megatron-Bridge scripts/performance/configs/*_workload_base_configs.py:
  `expert_tensor_parallel_size=1` for DeepSeek-V3, Qwen3, gpt-oss, Kimi; Megatron-core's MoE
  parallel folding), not Megatron-core's argument default (etp = tp).
- global_batch: one sequence per GPU (num_gpus sequences: the Megatron papers' choice, e.g. 1536 on 1536
  GPUs, 2520 on 2520, 3072 on 3072 in Narayanan et al. 2021 Table 1), rounded to whole micro-batches.
- recompute: none, except on the pre-FlashAttention Megatron / Megatron-DeepSpeed rows (the
  attention-kernel rule below): full. Those recipes checkpoint every layer (`--checkpoint-activations`);
  Narayanan et al. 2021 count the recompute forward pass in their FLOPs (eq. 3: 4 passes, 96 B s l h^2)
  because their runs recompute. sharding: none; sequence_parallel: false, except on fp8 rows (below).
- fp8 rows ran TransformerEngine, whose published FP8 training recipes (NeMo / Megatron-core
  performance configs, e.g. NeMo-Framework-Launcher gpt3/175b, llama2/70b, nemotron/340b) run
  sequence parallelism with TP communication overlap (`sequence_parallel: True`,
  `tp_comm_overlap: True`) whenever tp > 1: an empty sequence_parallel cell is true there, and
  TP comm overlap is on; a stated `false` keeps both off.
- Megatron-core rows in bf16 (framework megatron, FlashAttention era: not the legacy rule below)
  follow the same rule: tuned Megatron-core runs overlap TP communication with TransformerEngine
  userbuffers, which requires sequence parallelism (Megatron-LM README, 2024 weak-scaling runs:
  "fine-grained overlapping of ... tensor-parallel (`--tp-comm-overlap`) ... communication";
  Megatron-LM arguments.py refuses `--tp-comm-overlap` without `--sequence-parallel`; NeMo's
  recipes ship userbuffers configs for bf16 as for fp8, nemo/collections/llm/recipes/
  tp_overlap_configs/userbuffers.py `userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192`). This rule
  is for published runs that omit their launch configuration, told by an empty micro_batch cell
  as well (a throughput table of a tuned run); a row that states its micro-batch was read from a
  complete configuration (e.g. a CI test's model_config.yaml), where an absent
  `--sequence-parallel` is off. There, an empty sequence_parallel cell with tp > 1 is true and TP
  comm overlap on; the row's notes say so. With pp > 1 and an empty vpp cell such a run is
  interleaved: Megatron-core overlaps pipeline sends only under the interleaved schedule
  (arguments.py turns `overlap_p2p_comm` off without virtual stages, "non-interleaved schedule does
  not support overlapping p2p communication"), and the README's runs overlap "pipeline-parallel
  communication (enabled by default)". The virtual stages: 2 layers each, as NeMo's tuned recipes
  (GPT-3 175B pp 8 vp 6 of 96 layers, Llama 3.1 405B pp 8 vp 8; Megatron-Bridge's tables here
  state 2 layers per virtual stage), the most virtual stages whose chunks hold at least 2 layers
  (`interleaved_virtual_stages`), 1 layer each where the stage's layer count is prime; only where
  the micro-batches divide by pp (the interleaved schedule's requirement in Megatron-LM).
- sequence parallelism on every Megatron MoE row with tp > 1, whatever its cell says: Megatron-core
  refuses the layout otherwise (TransformerConfig: "When using expert parallelism and tensor
  parallelism, sequence parallelism must be used"; `megatron_moe_requires_sp`). The TP overlap
  rule above is unchanged.
- precision: fp16 for megatron / deepspeed rows on pre-Hopper GPUs (the same pre-FlashAttention
  recipes as the attention-kernel rule below: fp16 mixed precision, gradients reduced in fp16), bf16 otherwise
  (the A100/H100 tensor-core peak is the same for both).
- framework: megatron (its data-parallel overlap); `deepspeed` rows reduce gradients after the
  backward pass, `fsdp`/`torchtitan` rows overlap per micro-batch (see specs.execution.Framework).
  A `deepspeed` row runs the DeepSpeed release its notes state, else the 2021 engine when its
  source is dated before DeepSpeed v0.6.0 (2022-03-07), else the current one
  (`deepspeed_row.deepspeed_release_from_row`).
- CUDA module loading: eager for rows whose notes state PyTorch < 1.13 or CUDA < 11.7, or whose source is
  dated before PyTorch 1.13's lazy default (2022-11; a year before 2023), else lazy
  (`cuda_loading_row.lazy_loading_from_row`): the CUDA context the memory model charges.
- attention kernel: FlashAttention, except for rows whose precision is fp16 and framework megatron
  or deepspeed, or empty precision with those frameworks, on GPUs that predate Hopper (Volta,
  Ampere): those are the pre-FlashAttention Megatron / Megatron-DeepSpeed recipes (fp16 mixed
  precision, fused scale-mask-softmax with materialised scores; FlashAttention entered
  Megatron-LM with bf16 TransformerEngine in 2023). On Hopper and later those recipes never ran:
  Megatron on H100 runs TransformerEngine (the library's FP8 path exists for Hopper), so an empty
  precision there is bf16 with FlashAttention, no implied recompute.
  `fsdp` rows (PyTorch FSDP via Composer / llm-foundry, whose published MPT benchmark tables date
  from 2023) run FlashAttention v1: llm-foundry's `gpu` extra pinned flash-attn==1.0.3.post0 until
  its FlashAttention-2 extra was added. This is the documented default, the same for every row;
  a row that states its kernel overrides it (`stated_attention_kernel`): an `attention_kernel`
  column (flash, flash_v1, unfused), or notes naming Megatron's unfused backend ("unfused attention
  backend", `--attention-backend unfused`: core_attention.DotProductAttention, which materialises
  the b x a x s x s scores and keeps the softmax output for its backward).
  On Volta no stack has a fused FlashAttention kernel (Dao-AILab flash-attn README: v1 "supports
  Turing or Ampere GPUs", v2 Ampere, Ada and Hopper): unstated rows there run unfused attention.
  Megatron rows on Blackwell whose notes state deterministic mode (`--deterministic-mode`) run
  flash-attn's FlashAttention-2 (`AttentionKernel.FLASH2`, `deterministic_flash2`): the mode sets
  NVTE_ALLOW_NONDETERMINISTIC_ALGO=0 (megatron/training/determinism.py), under which TransformerEngine
  admits its cuDNN backend for training on sm100 only with attention dropout 0 (and cuDNN >= 9.18.1:
  transformer_engine/common/fused_attn/fused_attn.cpp, "determinism on Blackwell"), while
  Megatron-core's attention dropout defaults to 0.1 (TransformerConfig.attention_dropout); FlashAttention-4
  refuses dropout and FlashAttention-3 is sm90-only (TE attention/dot_product_attention/utils.py), which
  leaves FlashAttention-2 (deterministic from flash-attn 2.4.1). On Ampere TE runs FlashAttention-2 under
  determinism already (fused attention needs sm90 there), on Hopper its cuDNN backend stays: the default
  rule's kernel.
  The same rows run in deterministic mode (`plan.deterministic`, `deterministic_stated`): collectives
  without NVLink SHARP and the documented per-class operator cost (`workloads.training.step.deterministic`:
  Megatron-LM's op catalog, ~4% large dense, ~17% hybrid MoE). Megatron rows whose notes state
  `--no-gradient-accumulation-fusion` run it (`plan.grad_accum_fusion` False,
  `grad_accum_fusion_off_stated`): each weight gradient is written and added to the fp32 main_grad in a
  separate pass (`workloads.training.step.grad_accumulation`).
- memory figures: `peak_mem_gib` is PyTorch's allocated peak, `peak_mem_reserved_gib` its reserved
  peak; a row whose notes say the figure is the device's used memory (NVML, nvidia-smi: SCHEMA.md
  "notes say when a figure is NVML's used memory") adds what lives outside PyTorch's allocator, the
  CUDA context and NCCL buffers (`device_memory_stated`).
- torch.compile (torchtitan rows): a torchtitan row whose notes or source say torch.compile (or
  "compile") runs its transformer blocks compiled (`training.compile`: `apply_compile`, every release),
  and its cross entropy compiled when the run postdates torchtitan PR #1033 (2025-04-02: `build_cross_entropy_loss`
  wraps the loss in `torch.compile` under `training.compile`; before, only the model was compiled). The
  run's date is what the row states (`torchtitan_run_month`): a PyTorch version in its notes (2.8 and
  later postdate it, 2.7 and earlier predate it: 2.7.0 was released 2025-04-23, its pre-release builds
  came from before its branch cut), else a year-month in its source's document name (torchtitan names
  its benchmark files `..._202412_...`, `..._2025-06_...`). A row that states neither keeps the eager
  loss (`Framework.assumed_defaults`).
- activation checkpointing: a torchtitan run before its PR #1580 (2025-08-29) stops its full-AC recompute
  early (`checkpoint_row.checkpoint_early_stop_from_row`; `plan.checkpoint_early_stop`).
- dropout: `fsdp` rows (llm-foundry's MPT under Composer) train without dropout: MPTConfig's
  `resid_pdrop`, `emb_pdrop` and `attn_config.attn_pdrop` default to 0.0 and neither the pretrain yamls
  (scripts/train/yamls/pretrain/mpt-*.yaml) nor the benchmark launcher (scripts/train/benchmarking/
  submit_benchmarks.py) set them (llm-foundry llmfoundry/models/mpt/configuration_mpt.py, commit b2a43a1
  of the benchmark tables); the Megatron GPT dropout of a gelu architecture row (models.arch_row) is
  cleared there (`llm_foundry_dropout_free`).
- tied embeddings: an architecture row is untied (models.arch_row) unless its notes say the input
  embedding and output head are tied (`embeddings_tied_stated`; Llama 3.2 1B / 3B tie them).
- pipeline schedule: a pp > 1 row whose notes name DualPipe runs `PipelineSchedule.DUALPIPE`
  (`stated_pipeline_schedule`); a pp > 1 row whose notes state a local batch size ("LBS 8 per DP
  rank": torchtitan / NeMo AutoModel `local_batch_size`, the sequences one schedule run takes per
  data-parallel rank) ran global_batch / (local batch x dp) schedule runs per step
  (`TrainPlan.pipeline_flushes`, `stated_pipeline_flushes`); otherwise one.
- memory savings: notes stating a recompute of the norms or of the up-projections in one clause
  (DeepSeek-V3's "recompute of RMSNorm and MLA up-projections") set `TrainPlan.memory_savings`
  norm_recompute / up_projection_recompute (`stated_memory_savings`); memory reads them, step time not.
- fine-tuning columns (finetune, lora_rank, lora_targets, base_dtype, optimizer, offload,
  master_weights): `fine_tuning_row.fine_tuning_from_row`.
- CUDA graphs: a row citing a Megatron-Bridge performance-summary table of a NeMo container release
  runs the graph scope that release's recipe set (`megatron_bridge_row`; table and sources in
  `workloads.training.megatron_bridge_graphs`).
- the Hugging Face stack: a row whose framework cell is other, fsdp or empty and whose notes name the HF Trainer,
  a transformers model class, PEFT, TRL, Axolotl or Answer.AI's fsdp_qlora runs `Framework.TRANSFORMERS`, for
  time and memory (`hf_stack_row`, which gives the sources).
"""

from __future__ import annotations

import re

from gpuplan.errors import GpuplanError, InputError
from gpuplan.interfaces.row_types import Prediction, SkipRow
from gpuplan.interfaces.validation.checkpoint_row import checkpoint_early_stop_from_row
from gpuplan.interfaces.validation.cuda_loading_row import lazy_loading_from_row
from gpuplan.interfaces.validation.deepspeed_row import deepspeed_release_from_row
from gpuplan.interfaces.validation.fine_tuning_row import compiled_stated, fine_tuning_from_row
from gpuplan.interfaces.validation.hf_stack_row import hf_stack_framework
from gpuplan.interfaces.validation.litgpt_row import litgpt_dropout_free
from gpuplan.interfaces.validation.megatron_bridge_row import graph_scope_from_row
from gpuplan.interfaces.validation.router_row import model_with_stated_router
from gpuplan.interfaces.validation.source_dates import source_name_month, stated_torch_version
from gpuplan.interfaces.validation.torchtitan_schedule_row import torchtitan_virtual_stages
from gpuplan.specs import Precision, Recompute, Sharding, TrainPlan
from gpuplan.specs.execution import AttentionKernel, Framework, PipelineSchedule
from gpuplan.specs.gpu import architecture_family
from gpuplan.validation_rules import parse_row_cell
from gpuplan.workloads.training.plan_validity import moe_tp_needs_sequence_parallel
from gpuplan.workloads.training.step.assembly import estimate_step_time

TIME_METRICS = ("iteration_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu_model", "mfu_pct", "gpu_hours_per_1t_tokens")
MEMORY_METRICS = ("peak_mem_gib", "mem_activations_gib", "mem_states_gib", "peak_mem_reserved_gib")


def _cell(row: dict[str, str], key: str) -> str:
    return (row.get(key) or "").strip()


def _int(row: dict[str, str], key: str, default: int | None) -> int | None:
    raw = _cell(row, key)
    if not raw:
        return default
    try:  # ASCII digits, within the range of the CLI option of the same quantity (--tp, --seq-len ...)
        return int(parse_row_cell(key, raw))
    except InputError as exc:
        raise SkipRow(str(exc)) from None


#: GPU families the pre-FlashAttention Megatron / Megatron-DeepSpeed recipes (fp16, unfused
#: attention, full recompute) ran on; Hopper and later ran TransformerEngine (module docstring).
LEGACY_STACK_FAMILIES = ("volta", "ampere")


def _legacy_gpu(gpu_architecture: str | None) -> bool:
    """True when the row's GPU predates Hopper (or is unknown: the rule as it was before GPUs were told)."""
    if gpu_architecture is None:
        return True
    return architecture_family(gpu_architecture) in LEGACY_STACK_FAMILIES


def legacy_stack(row: dict[str, str], framework: Framework, gpu_architecture: str | None = None) -> bool:
    """The row is a pre-FlashAttention Megatron / Megatron-DeepSpeed recipe (module docstring):
    framework megatron or deepspeed, precision fp16 or empty, on a pre-Hopper GPU."""
    prec = _cell(row, "precision").lower()
    return (framework in (Framework.MEGATRON, Framework.DEEPSPEED) and prec in ("", "fp16")
            and _legacy_gpu(gpu_architecture))


def plan_from_row(row: dict[str, str], gpu_architecture: str | None = None) -> tuple[TrainPlan, list[str]]:
    """The TrainPlan of a training.csv row and the notes on the defaults used. `gpu_architecture`
    (the row's GPU, `Gpu.architecture`) decides the legacy-stack rule; None: pre-Hopper."""
    notes: list[str] = []
    num_gpus = _int(row, "num_gpus", None)
    tp, pp, cp = (_int(row, k, 1) for k in ("tp", "pp", "cp"))
    dp = _int(row, "dp", None)
    if dp is None:
        if num_gpus is None:
            raise SkipRow("neither dp nor num_gpus given")
        dp = num_gpus // (tp * pp * cp)
        notes.append(f"dp={dp} from num_gpus")
    ep, vpp = _int(row, "ep", 1), _int(row, "vpp", None)
    mb = _int(row, "micro_batch", None)
    gb = _int(row, "global_batch", None)
    if mb is None:
        mb = torchtitan_pipeline_micro_batch(row, dp, pp, gb) or 1
        notes.append(f"micro_batch={mb}" + (" (torchtitan: pp micro-batches per step, its default then)" if mb > 1 else ""))
    if gb is None:
        gb = max(1, round(tp * pp * cp * dp / (mb * dp))) * mb * dp
        notes.append(f"global_batch={gb} (one sequence per GPU)")
    if gb % (mb * dp):
        # llm-foundry rows: "microbatching may not divide the global batch"; round to whole micro-batches
        gb = max(1, round(gb / (mb * dp))) * mb * dp
        notes.append(f"global_batch rounded to {gb}")
    rc_raw = _cell(row, "recompute") or "none"
    if not _cell(row, "recompute"):
        notes.append("recompute=none")
    framework = framework_from_row(row)
    release, release_note = deepspeed_release_from_row(row, framework)
    if release_note:
        notes.append(release_note)
    lazy_loading, loading_note = lazy_loading_from_row(row)
    if loading_note and _cell(row, "metric") in MEMORY_METRICS:
        notes.append(loading_note)
    legacy = legacy_stack(row, framework, gpu_architecture)
    default_prec = "fp16" if legacy else "bf16"  # the pre-FlashAttention stacks ran fp16 mixed precision
    prec_raw = _cell(row, "precision") or default_prec
    # TransformerEngine low-precision recipes (torchtitan's float8 is torchao's, without TE userbuffers)
    te_fp8 = prec_raw.lower() in ("fp8", "mxfp8", "nvfp4") and framework is not Framework.TORCHTITAN
    # tuned Megatron-core runs (TE userbuffers recipes in bf16 too) whose launch configuration is unstated
    megatron_core = framework is Framework.MEGATRON and not legacy and not _cell(row, "micro_batch")
    sp_raw = _cell(row, "sequence_parallel").lower()
    te_overlap = (te_fp8 or megatron_core) and not sp_raw
    # torchtitan's TP plan shards the norms' sequence unless told not to
    # (`parallelism.enable_sequence_parallel = True`, torchtitan/config/configs.py)
    torchtitan_sp = framework is Framework.TORCHTITAN and not sp_raw and tp > 1
    sp = sp_raw == "true" or te_overlap or torchtitan_sp
    if torchtitan_sp:
        notes.append("sequence_parallel (torchtitan's default, unstated)")
    if megatron_moe_requires_sp(row, framework, tp) and not sp:
        sp = True
        notes.append("sequence_parallel (Megatron requires it for MoE with tp > 1)")
    if te_overlap and tp > 1:
        recipe = "fp8 TransformerEngine recipe" if te_fp8 else "tuned Megatron-core recipe"
        notes.append(f"sequence_parallel + tp_comm_overlap ({recipe}, unstated)")
    if not _cell(row, "precision"):
        notes.append(f"precision={default_prec}")
    layers = _int(row, "layers", None)
    if vpp is None:
        (vpp, vpp_notes), m = torchtitan_virtual_stages(_cell(row, "notes"), framework, pp), gb // (mb * dp)
        notes += vpp_notes
        if vpp == 1 and megatron_core and pp > 1 and layers and m % pp == 0:
            vpp = interleaved_virtual_stages(layers, pp)
            if vpp > 1:
                notes.append(f"vpp={vpp} (interleaved schedule of a tuned Megatron-core run, unstated)")
    shard_raw = _cell(row, "sharding") or "none"
    seq = _int(row, "seq_len", 2048)
    fine_tuning, ft_notes = fine_tuning_from_row(row)
    notes += ft_notes
    hf = hf_stack_framework(row)
    if hf is not None:
        notes.append(hf[1])
    try:
        plan = TrainPlan(
            tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vpp=vpp, micro_batch=mb, global_batch=gb, seq_len=seq,
            recompute=Recompute(rc_raw), sequence_parallel=sp and tp > 1, precision=Precision(prec_raw),
            tp_comm_overlap=te_overlap and sp and tp > 1,
            sharding=Sharding(shard_raw), fine_tuning=fine_tuning, deepspeed_release=release,
            cuda_lazy_loading=lazy_loading,
        )
    except ValueError as exc:
        raise SkipRow(f"plan columns not expressible: {exc}") from None
    if num_gpus is not None and plan.num_gpus != num_gpus:
        raise SkipRow(f"tp*pp*dp*cp = {plan.num_gpus} differs from num_gpus {num_gpus}")
    if _cell(row, "moe_experts") and tp > 1:
        plan = plan.model_copy(update={"etp": 1})
        notes.append("etp=1 (published Megatron MoE recipes)")
    scope, scope_note = graph_scope_from_row(row)
    if scope:
        plan = plan.model_copy(update={"cuda_graph_scope": scope})
        notes.append(scope_note)
    schedule, flushes = stated_pipeline_schedule(row, pp), stated_pipeline_flushes(row, pp, dp, gb)
    if schedule is not PipelineSchedule.ONE_F_ONE_B or flushes != 1:
        try:
            plan = TrainPlan.model_validate({**plan.model_dump(), "pipeline_schedule": schedule,
                                             "pipeline_flushes": flushes})
        except ValueError as exc:
            raise SkipRow(f"pipeline columns not expressible: {exc}") from None
        if schedule is not PipelineSchedule.ONE_F_ONE_B:
            notes.append(f"pipeline_schedule={schedule.value} (stated)")
        if flushes != 1:
            notes.append(f"pipeline_flushes={flushes} (stated local batch)")
    savings = stated_memory_savings(row)
    if savings:
        plan = TrainPlan.model_validate({**plan.model_dump(), "memory_savings": savings})
        notes.append(f"memory_savings={'+'.join(savings)} (stated)")
    return plan, notes


#: Notes stating a recompute of the norms / of the (MLA) up-projections in one clause ("recompute of RMSNorm
#: and MLA up-projections": DeepSeek-V3 report sec. 3.2.3).
_STATED_RECOMPUTE = {"norm_recompute": re.compile(r"\brecomput\w*[^.;]*\b(?:RMSNorm|LayerNorm|norms)\b", re.IGNORECASE),
                     "up_projection_recompute": re.compile(r"\brecomput\w*[^.;]*\bup-projections?\b", re.IGNORECASE)}


def stated_memory_savings(row: dict[str, str]) -> tuple[str, ...]:
    """The memory savings (TrainPlan.memory_savings) a row's notes state (module docstring)."""
    notes = _cell(row, "notes")
    return tuple(name for name, pattern in _STATED_RECOMPUTE.items() if pattern.search(notes))


#: Notes naming DeepSeek's DualPipe schedule.
_STATED_DUALPIPE = re.compile(r"\bDualPipe\b", re.IGNORECASE)
#: Notes stating a local batch size per data-parallel rank ("LBS 8 per DP rank", "local_batch_size: 8").
_STATED_LOCAL_BATCH = re.compile(r"\b(?:LBS|local[_ ]batch(?:[_ ]size)?)[ :=]+(\d+)", re.IGNORECASE)


def stated_pipeline_schedule(row: dict[str, str], pp: int) -> PipelineSchedule:
    """DUALPIPE for a pp > 1 row whose notes name DualPipe (module docstring), else ONE_F_ONE_B."""
    if pp > 1 and _STATED_DUALPIPE.search(_cell(row, "notes")):
        return PipelineSchedule.DUALPIPE
    return PipelineSchedule.ONE_F_ONE_B


def stated_pipeline_flushes(row: dict[str, str], pp: int, dp: int, global_batch: int) -> int:
    """Schedule runs per step of a pp > 1 row whose notes state a local batch size: global_batch /
    (local batch x dp) (module docstring); 1 otherwise or where it does not divide."""
    found = _STATED_LOCAL_BATCH.search(_cell(row, "notes"))
    if pp <= 1 or not found:
        return 1
    local = int(found.group(1))
    if local <= 0 or global_batch % (local * dp):
        return 1
    return max(1, global_batch // (local * dp))


def torchtitan_pipeline_micro_batch(row: dict[str, str], dp: int, pp: int, global_batch: int | None) -> int | None:
    """Sequences per micro-batch of a torchtitan pipeline row that does not state it, or None.

    torchtitan split each data-parallel rank's batch into `experimental.pipeline_parallel_microbatches`
    micro-batches, "the number of pipeline stages, if unspecified" (torchtitan/config_manager.py and
    parallelisms/pipelining_utils.py `build_pipeline_schedule`, through PR #1073 of 2025-04-07, which
    replaced it by `pipeline_parallel_microbatch_size`, default 1): micro-batch = global batch /
    (dp x pp). The public torchtitan pipeline rows (benchmarks/llama3_h100_202412_torchtitan.md) ran
    the earlier releases; a later row must state its micro-batch. None where the batch does not
    split that way (the caller then assumes 1)."""
    if framework_from_row(row) is not Framework.TORCHTITAN or pp <= 1 or not global_batch:
        return None
    if global_batch % (dp * pp):
        return None
    return global_batch // (dp * pp)


#: torchtitan PR #1033 (commit bbb1b616e, 2025-04-02): the loss is compiled with the model (module docstring).
TORCHTITAN_COMPILED_LOSS_SINCE = (2025, 4)
#: PyTorch release whose first builds postdate that change (2.7.0 released 2025-04-23, branch cut before).
TORCH_COMPILED_LOSS_ERA = (2, 8)
_STATED_COMPILE = re.compile(r"\b(?:torch\.)?compile\b", re.IGNORECASE)


def torchtitan_run_month(row: dict[str, str]) -> tuple[int, int] | None:
    """Whether the row's run postdates torchtitan's compiled loss, as (year, month) or None when the row
    states no date: TORCHTITAN_COMPILED_LOSS_SINCE where its notes state PyTorch TORCH_COMPILED_LOSS_ERA
    or later, (2025, 3) where they state an earlier PyTorch, else the year-month in its source's
    document name (module docstring)."""
    version = stated_torch_version(_cell(row, "notes"))
    if version:
        return TORCHTITAN_COMPILED_LOSS_SINCE if version >= TORCH_COMPILED_LOSS_ERA else (2025, 3)
    return source_name_month(_cell(row, "source"))


def compiled_model_from_row(row: dict[str, str], framework: Framework) -> bool:
    """A torchtitan row whose notes or source say torch.compile runs its blocks compiled (module docstring)."""
    if framework is not Framework.TORCHTITAN:
        return False
    return bool(_STATED_COMPILE.search(_cell(row, "notes")) or _STATED_COMPILE.search(_cell(row, "source")))


def compiled_loss_from_row(row: dict[str, str], framework: Framework) -> bool:
    """A torchtitan row that says torch.compile (`compiled_model_from_row`) and runs from
    TORCHTITAN_COMPILED_LOSS_SINCE on (`torchtitan_run_month`) compiles its loss (module docstring)."""
    if not compiled_model_from_row(row, framework):
        return False
    month = torchtitan_run_month(row)
    return month is not None and month >= TORCHTITAN_COMPILED_LOSS_SINCE


def megatron_moe_requires_sp(row: dict[str, str], framework: Framework, tp: int) -> bool:
    """A Megatron MoE row with tp > 1 runs sequence parallelism whatever its cell says: Megatron-core
    refuses the layout otherwise (the rule and its source: `plan_validity.moe_tp_needs_sequence_parallel`)."""
    return bool(moe_tp_needs_sequence_parallel(bool(_cell(row, "moe_experts")), framework, tp))


def interleaved_virtual_stages(layers: int, pp: int) -> int:
    """Virtual stages per pipeline rank of a tuned Megatron-core run (module docstring): the most
    whose chunks hold at least 2 layers of the stage's ceil(layers / pp), 1 layer per chunk where
    only a single chunk would qualify (a prime layer count)."""
    stage = -(-layers // pp)
    for v in range(stage // 2, 1, -1):
        if stage % v == 0:
            return v
    return stage


def llm_foundry_dropout_free(model, framework: Framework):
    """The row's model without dropout on an `fsdp` (Composer / llm-foundry MPT) row, whose MPT configs
    default every dropout to 0.0 (module docstring); unchanged otherwise."""
    if framework is not Framework.FSDP or not (model.hidden_dropout or model.attention_dropout):
        return model
    return model.model_copy(update={"hidden_dropout": 0.0, "attention_dropout": 0.0})


def framework_from_row(row: dict[str, str]) -> Framework:
    """The row's stack: `transformers` where its notes state the Hugging Face stack
    (`hf_stack_row.hf_stack_framework`), else its `framework` cell (empty: megatron; a value the
    enum lacks: other)."""
    hf = hf_stack_framework(row)
    if hf is not None:
        return hf[0]
    raw = _cell(row, "framework").lower()
    try:
        return Framework(raw) if raw else Framework.MEGATRON
    except ValueError:
        return Framework.OTHER


#: Notes that state Megatron's unfused attention backend (`--attention-backend unfused`, Megatron-LM
#: arguments.py AttnBackend.unfused): "unfused attention", "attention backend: unfused", ...
_STATED_UNFUSED = re.compile(r"\bunfused attention\b|attention[-_ ]backend[ :=]+unfused\b")


def stated_attention_kernel(row: dict[str, str]) -> AttentionKernel | None:
    """The attention kernel the row states: its `attention_kernel` column (a SkipRow naming the
    allowed values when it is not one), else UNFUSED when the notes name the unfused backend, else
    None (the documented default applies, `attention_kernel_from_row`)."""
    raw = _cell(row, "attention_kernel").lower()
    if raw:
        try:
            return AttentionKernel(raw)
        except ValueError:
            allowed = ", ".join(k.value for k in AttentionKernel)
            raise SkipRow(f"attention_kernel: '{raw}' is not one of {allowed}") from None
    if _STATED_UNFUSED.search(_cell(row, "notes").lower()):
        return AttentionKernel.UNFUSED
    return None


def _volta(gpu_architecture: str | None) -> bool:
    """A Volta GPU, for which no FlashAttention kernel exists (module docstring)."""
    return architecture_family(gpu_architecture) == "volta"


#: Notes that state tied input / output embeddings ("input embedding and output head are tied").
_TIED_EMBEDDINGS = re.compile(r"\b(?:embeddings?|head)\b[^.;]*\bare tied\b", re.IGNORECASE)


def embeddings_tied_stated(row: dict[str, str]) -> bool:
    """Whether the row's notes say the input embedding and the output head share one matrix."""
    return bool(_TIED_EMBEDDINGS.search(row.get("notes") or ""))


#: Notes that state a memory figure as the device's used memory (NVML / nvidia-smi), which includes
#: the CUDA context and other memory outside PyTorch's caching allocator.
_STATED_DEVICE_MEMORY = re.compile(r"\bNVML\b|nvidia-smi", re.IGNORECASE)


def device_memory_stated(row: dict[str, str]) -> bool:
    """Whether the row's notes say its memory figure is the device's used memory (module docstring)."""
    return bool(_STATED_DEVICE_MEMORY.search(_cell(row, "notes")))


#: Notes that state Megatron's deterministic mode ("Deterministic mode", `--deterministic-mode`).
_STATED_DETERMINISTIC = re.compile(r"\bdeterministic[- ]mode\b")


def deterministic_flash2(row: dict[str, str], framework: Framework, gpu_architecture: str | None) -> bool:
    """Whether the row ran flash-attn's FlashAttention-2 because of deterministic mode on Blackwell: a
    Megatron row whose notes state deterministic mode, on a Blackwell GPU (module docstring)."""
    return (framework is Framework.MEGATRON and architecture_family(gpu_architecture) == "blackwell"
            and bool(_STATED_DETERMINISTIC.search(_cell(row, "notes").lower())))


def deterministic_stated(row: dict[str, str], framework: Framework) -> bool:
    """Whether the row is a Megatron run whose notes state deterministic mode (`--deterministic-mode`)."""
    return framework is Framework.MEGATRON and bool(_STATED_DETERMINISTIC.search(_cell(row, "notes").lower()))


#: Notes that state Megatron's `--no-gradient-accumulation-fusion`.
_STATED_NO_GRAD_ACCUM_FUSION = re.compile(r"--no-gradient-accumulation-fusion\b")


def grad_accum_fusion_off_stated(row: dict[str, str], framework: Framework) -> bool:
    """Whether the row is a Megatron run whose notes state `--no-gradient-accumulation-fusion`."""
    return framework is Framework.MEGATRON and bool(_STATED_NO_GRAD_ACCUM_FUSION.search(_cell(row, "notes").lower()))


def attention_kernel_from_row(row: dict[str, str], framework: Framework,
                              gpu_architecture: str | None = None) -> AttentionKernel:
    """The kernel the row states (`stated_attention_kernel`); else unfused attention for fp16 (or
    unstated precision) Megatron / DeepSpeed rows on pre-Hopper GPUs (`legacy_stack`),
    FlashAttention v1 for `fsdp` (Composer / llm-foundry) rows, flash-attn's FlashAttention-2 for
    deterministic Megatron rows on Blackwell (`deterministic_flash2`), FLASH otherwise; see module doc."""
    stated = stated_attention_kernel(row)
    if stated is not None:
        return stated
    if legacy_stack(row, framework, gpu_architecture) or _volta(gpu_architecture):
        return AttentionKernel.UNFUSED
    if framework is Framework.FSDP:
        return AttentionKernel.FLASH_V1
    if deterministic_flash2(row, framework, gpu_architecture):
        return AttentionKernel.FLASH2
    return AttentionKernel.FLASH


def predict_row(row: dict[str, str]) -> Prediction:
    """Predicted value of the row's metric (unit of the metric); SkipRow when not expressible."""
    from gpuplan.catalog import load_catalog
    from gpuplan.models import model_from_arch_row

    metric = _cell(row, "metric")
    if metric not in TIME_METRICS + MEMORY_METRICS:
        raise SkipRow(f"metric '{metric}' is not a training metric")
    try:
        model = model_with_stated_router(row, model_from_arch_row(row))
        if embeddings_tied_stated(row) and not model.tied_embeddings:
            model = model.model_copy(update={"tied_embeddings": True})
        catalog = load_catalog()
        system = catalog.system(_cell(row, "system"))
        gpu = catalog.gpu(system.gpu)
    except GpuplanError as exc:
        raise SkipRow(str(exc)) from None
    plan, notes = plan_from_row(row, gpu.architecture)
    framework = framework_from_row(row)
    model = litgpt_dropout_free(llm_foundry_dropout_free(model, framework), row)
    kernel = attention_kernel_from_row(row, framework, gpu.architecture)
    # the memory model stores the s x s scores only when the kernel is unfused
    plan = plan.model_copy(update={"attention_kernel": kernel, "framework": framework})
    if deterministic_stated(row, framework):
        plan = plan.model_copy(update={"deterministic": True})
        notes.append("deterministic mode")
    if grad_accum_fusion_off_stated(row, framework):
        plan = plan.model_copy(update={"grad_accum_fusion": False})
        notes.append("no gradient-accumulation fusion")
    if compiled_model_from_row(row, framework):
        plan = plan.model_copy(update={"compiled_model": True})
        notes.append("compiled blocks (torchtitan training.compile)")
    elif not plan.fine_tuning.ordinary and compiled_stated(row):
        plan = plan.model_copy(update={"compiled_model": True})
        notes.append("compiled model (torch.compile on)")
    if compiled_loss_from_row(row, framework):
        plan = plan.model_copy(update={"compiled_loss": True})
        notes.append("compiled loss (torchtitan training.compile, 2025-04 on)")
    if checkpoint_early_stop_from_row(row, framework):
        plan = plan.model_copy(update={"checkpoint_early_stop": True})
        if plan.recompute is Recompute.FULL:
            notes.append("full AC recompute stops early (torchtitan before PR #1580)")
    if not _cell(row, "recompute") and kernel is AttentionKernel.UNFUSED and stated_attention_kernel(row) is None:
        # the pre-FlashAttention Megatron / Megatron-DeepSpeed recipes recompute every layer
        plan = plan.model_copy(update={"recompute": Recompute.FULL})
        notes[:] = [n for n in notes if n != "recompute=none"] + ["recompute=full (legacy Megatron recipe, unstated)"]
    if metric in MEMORY_METRICS:
        from gpuplan.workloads.training.memory import training_memory, to_gib

        try:
            mem = training_memory(model, plan, gpu)
        except GpuplanError as exc:
            raise SkipRow(str(exc)) from None
        per = mem.per_gpu_bytes
        outside = per["total"] - mem.allocated_bytes if device_memory_stated(row) else 0.0  # CUDA context, NCCL
        if outside:
            notes.append("device used memory (NVML): + CUDA context and NCCL buffers")
        value = {
            "peak_mem_gib": mem.allocated_bytes + outside,
            "peak_mem_reserved_gib": mem.reserved_bytes + outside,
            "mem_activations_gib": per["activations"],
            "mem_states_gib": per["weights"] + per["gradients"] + per["optimizer"],
        }[metric]
        return Prediction(to_gib(value), "; ".join(notes))
    try:
        st = estimate_step_time(model, system, plan, gpu, framework=framework, attention_kernel=kernel)
    except GpuplanError as exc:
        raise SkipRow(str(exc)) from None
    notes.append(f"framework={framework.value}, attention={kernel.value}")
    value = {
        "iteration_time_s": st.step_time_s,
        "tokens_per_s_per_gpu": st.tokens_per_s_per_gpu,
        "tflops_per_gpu_model": st.tflops_per_gpu_model,
        "mfu_pct": st.mfu_pct,
        "gpu_hours_per_1t_tokens": 1e12 / st.tokens_per_s_per_gpu / 3600.0,
    }[metric]
    return Prediction(value, "; ".join(notes))


__all__ = ["MEMORY_METRICS", "TIME_METRICS", "attention_kernel_from_row", "llm_foundry_dropout_free", "deterministic_flash2", "deterministic_stated", "grad_accum_fusion_off_stated", "compiled_loss_from_row", "compiled_model_from_row", "checkpoint_early_stop_from_row", "torchtitan_run_month", "device_memory_stated", "stated_attention_kernel", "interleaved_virtual_stages", "legacy_stack",
           "megatron_moe_requires_sp", "stated_memory_savings", "stated_pipeline_flushes", "stated_pipeline_schedule",
           "plan_from_row", "predict_row", "torchtitan_pipeline_micro_batch"]
