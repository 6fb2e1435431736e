"""torchtitan: a TrainPlan as a job-config TOML, and such a TOML read back (options.TORCHTITAN,
torchtitan/config/job_config.py at v0.2.2; run with `torchrun ... -m torchtitan.train
--job.config_file FILE`).

Plan -> keys (job_config.py docstrings):
  tp                 parallelism.tensor_parallel_degree; TP shards the sequence too (torchtitan's TP
                     plan puts norms under SequenceParallel), so a plan with tp > 1 must use sequence
                     parallelism and one with tp = 1 must not
  TP comm overlap    parallelism.enable_async_tensor_parallel
  pp, vpp            parallelism.pipeline_parallel_degree; schedule 1F1B (vpp 1) or Interleaved1F1B with
                     pipeline_parallel_layers_per_stage = ceil(layers / (pp x vpp)); first_ and last_stage_less_layers
                     0, so the layers split evenly as gpuplan's pipeline model assumes (torchtitan makes
                     ceil((layers + first_less + last_less) / layers_per_stage) virtual stages,
                     torchtitan/distributed/pipeline_parallel.py; its defaults give the first and last
                     stages one layer less for the embedding and the output head)
  micro-batch        parallelism.pipeline_parallel_microbatch_size (pp > 1; training.local_batch_size is then
                     the rank's global_batch / dp), else training.local_batch_size (gradient accumulation
                     makes up training.global_batch_size)
  cp, ep, etp        parallelism.context_parallel_degree, expert_parallel_degree, expert_tensor_parallel_degree
  dp and sharding    none: data_parallel_replicate_degree = dp; zero3 / fsdp: data_parallel_shard_degree = dp
                     (FSDP2); zero2: the same with fsdp_reshard_after_forward = "never" (parameters stay
                     gathered after forward). ZeRO-1 has no FSDP2 setting: refused.
  recompute          activation_checkpoint.mode none | full | selective with selective_ac_option "op"
                     (per-op SAC, the one gpuplan's torchtitan memory model counts); early_stop = true
                     where a full-AC plan's recompute stops early (TrainPlan.checkpoint_early_stop)
  precision          bf16: training.mixed_precision_param "bfloat16"; fp8 / mxfp8: model.converters
                     ["quantize.linear.float8"] / ["quantize.linear.mx"]
  seq_len, steps     training.seq_len, training.steps
  compiled parts     compile.enable = true with compile.components ["model"] / ["loss"] / ["model", "loss"]
                     (TrainPlan.compiled_model / compiled_loss, `--compile`); written only when a part is
                     compiled (compile.enable defaults to false); read back with components defaulting to both
  model              [model] name + flavor (FLAVORS: torchtitan/models/llama3/__init__.py llama3_args) and
                     hf_assets_path (its tokenizer gives the vocabulary)
"""

from __future__ import annotations

import math

from gpuplan.errors import InputError
from gpuplan.interfaces.deploy.launch import TrainingLaunch, hub_id
from gpuplan.interfaces.deploy.options import TORCHTITAN
from gpuplan.specs import ModelSpec, Precision, Recompute, Sharding, TrainPlan
from gpuplan.specs.execution import Framework
from gpuplan.specs.model import FfnKind, NormKind
from gpuplan.workloads.training.framework_defaults import TORCHTITAN_MULTI_STAGE_STAGES_PER_RANK

T = TORCHTITAN
#: the search axes a torchtitan config can state (interfaces.api.deploy limits the plan search to them)
SEARCH_LIMITS = {"sharding": [Sharding.NONE, Sharding.ZERO2, Sharding.ZERO3]}

#: torchtitan v0.2.2 torchtitan/models/llama3/__init__.py `llama3_args` (dim, n_layers, n_heads,
#: n_kv_heads, ffn_dim_multiplier, multiple_of); vocab 128256 (TransformerModelArgs.vocab_size, the
#: Llama 3 tokenizer's)
FLAVORS: dict[tuple[str, str], tuple[int, int, int, int, float, int]] = {
    ("llama3", "8B"): (4096, 32, 32, 8, 1.3, 1024),
    ("llama3", "70B"): (8192, 80, 64, 8, 1.3, 4096),
    ("llama3", "405B"): (16384, 126, 128, 8, 1.2, 4096),
}
LLAMA3_VOCAB = 128256


def flavor_ffn(dim: int, multiplier: float, multiple_of: int) -> int:
    """torchtitan's SwiGLU hidden size (llama3/model/model.py FeedForward): int(2 x 4 dim / 3), times
    ffn_dim_multiplier (int), rounded up to a multiple of multiple_of."""
    hidden = int(2 * (4 * dim) / 3)
    hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def _matches(model: ModelSpec, flavor: tuple) -> bool:
    dim, layers, heads, kv, mult, multiple = flavor
    return (model.hidden, model.layers, model.heads, model.kv_heads, model.ffn, model.vocab, model.ffn_kind,
            model.norm, model.tied_embeddings, model.moe, model.mla) == (
        dim, layers, heads, kv, flavor_ffn(dim, mult, multiple), LLAMA3_VOCAB, FfnKind.SWIGLU, NormKind.RMSNORM,
        False, None, None)


def flavor_of(model: ModelSpec) -> tuple[str, str]:
    for key, flavor in FLAVORS.items():
        if _matches(model, flavor):
            return key
    names = ", ".join(f"{n} {f}" for n, f in FLAVORS)
    raise InputError(f"model: torchtitan {T.version} has no flavor with {model.name}'s architecture; flavors: {names}",
                     field="model", allowed=names)


def _check_plan(plan: TrainPlan) -> None:
    if plan.sequence_parallel != (plan.tp > 1):
        raise InputError("sequence_parallel: torchtitan's tensor parallelism always shards the sequence; give "
                         "--sequence-parallel with tp > 1 (and none with tp 1)", field="sequence_parallel")
    if plan.dp == 1 and plan.sharding is not Sharding.NONE:
        raise InputError("sharding: with dp 1 torchtitan applies no FSDP; allowed: none", field="sharding",
                         allowed="none")
    if plan.sharding is Sharding.ZERO1:
        raise InputError("sharding: torchtitan (FSDP2) has no ZeRO-1; allowed: none, zero2, zero3, fsdp",
                         field="sharding", allowed="none, zero2, zero3, fsdp")
    if Precision(plan.precision) not in (Precision.BF16, Precision.FP32, Precision.FP8, Precision.MXFP8):
        raise InputError(f"precision: torchtitan {T.version} trains in bf16, fp32, fp8 or mxfp8, not {plan.precision}",
                         field="precision", allowed="bf16, fp32, fp8, mxfp8")


def layers_per_stage(layers: int, stages: int) -> int:
    """pipeline_parallel_layers_per_stage giving `stages` virtual stages with no layers less on the
    first and last (module docstring)."""
    per = math.ceil(layers / stages)
    if math.ceil(layers / per) != stages:
        raise InputError(f"vpp: torchtitan cannot split {layers} layers into {stages} virtual stages", field="vpp")
    return per


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def keys(launch: TrainingLaunch) -> dict[str, object]:
    """The job-config keys of `launch` (module docstring), checked against the option table."""
    plan, model = launch.plan, launch.model
    _check_plan(plan)
    name, flavor = flavor_of(model)
    repo = hub_id(model)
    k: dict[str, object] = {"model.name": name, "model.flavor": flavor}
    if repo:
        k["model.hf_assets_path"] = f"./assets/hf/{repo.split('/')[1]}"
    p = Precision(plan.precision)
    if p in (Precision.FP8, Precision.MXFP8):
        k["model.converters"] = ["quantize.linear.float8" if p is Precision.FP8 else "quantize.linear.mx"]
    per_rank = (plan.global_batch or plan.micro_batch * plan.dp) // plan.dp
    k["training.local_batch_size"] = per_rank if plan.pp > 1 else plan.micro_batch
    k["training.global_batch_size"] = plan.global_batch or plan.micro_batch * plan.dp
    k["training.seq_len"] = plan.seq_len
    if launch.steps is not None:
        k["training.steps"] = launch.steps
    k["training.mixed_precision_param"] = "float32" if p is Precision.FP32 else "bfloat16"
    shard = plan.sharding in (Sharding.ZERO2, Sharding.ZERO3, Sharding.FSDP)
    k["parallelism.data_parallel_replicate_degree"] = 1 if shard else plan.dp
    k["parallelism.data_parallel_shard_degree"] = plan.dp if shard else 1
    k["parallelism.fsdp_reshard_after_forward"] = "never" if plan.sharding is Sharding.ZERO2 else "default"
    k["parallelism.tensor_parallel_degree"] = plan.tp
    k["parallelism.enable_async_tensor_parallel"] = bool(plan.tp_comm_overlap and plan.tp > 1)
    k["parallelism.pipeline_parallel_degree"] = plan.pp
    if plan.pp > 1:
        k["parallelism.pipeline_parallel_schedule"] = "Interleaved1F1B" if plan.vpp > 1 else "1F1B"
        k["parallelism.pipeline_parallel_first_stage_less_layers"] = 0
        k["parallelism.pipeline_parallel_last_stage_less_layers"] = 0
        if plan.vpp > 1:
            k["parallelism.pipeline_parallel_layers_per_stage"] = layers_per_stage(model.layers, plan.pp * plan.vpp)
        k["parallelism.pipeline_parallel_microbatch_size"] = plan.micro_batch
    k["parallelism.context_parallel_degree"] = plan.cp
    k["parallelism.expert_parallel_degree"] = plan.ep
    k["parallelism.expert_tensor_parallel_degree"] = plan.expert_tp if plan.ep > 1 else 1
    k["activation_checkpoint.mode"] = plan.recompute.value
    if plan.recompute is Recompute.SELECTIVE:
        k["activation_checkpoint.selective_ac_option"] = "op"
    if plan.recompute is Recompute.FULL and plan.checkpoint_stops_early:
        k["activation_checkpoint.early_stop"] = True
    if plan.compiled_model or plan.compiled_loss:
        k["compile.enable"] = True
        k["compile.components"] = [c for c, on in (("model", plan.compiled_model), ("loss", plan.compiled_loss)) if on]
    return {name_: T.key(name_, v) for name_, v in k.items()}


def emit(launch: TrainingLaunch, header: str = "") -> str:
    """The job-config TOML of `launch`."""
    sections: dict[str, list[str]] = {}
    for dotted, v in keys(launch).items():
        section, _, key = dotted.partition(".")
        sections.setdefault(section, []).append(f"{key} = {_toml_value(v)}")
    out = [f"# written for {T.written_for} ({T.source}){header}",
           (f"# run: torchrun --nproc-per-node GPUS_PER_NODE --nnodes NODES -m torchtitan.train --job.config_file FILE "
            f"(world size {launch.gpus})")]
    for section, lines in sections.items():
        out += ["", f"[{section}]", *lines]
    return "\n".join(out) + "\n"


# ---- read ------------------------------------------------------------------------------------------
def _int(cfg: dict, dotted: str, default: int | None) -> int | None:
    section, _, key = dotted.partition(".")
    v = cfg.get(section, {}).get(key, default)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool):
        raise InputError(f"{dotted}: {v!r} is not an integer", field=dotted)
    return v


def _get(cfg: dict, dotted: str, default=None):
    section, _, key = dotted.partition(".")
    return cfg.get(section, {}).get(key, default)


def read(text: str, model: ModelSpec | None = None, gpus: int | None = None) -> TrainingLaunch:
    """A torchtitan job-config TOML as a TrainingLaunch (`model` overrides the [model] flavor; `gpus`
    fills a data_parallel_shard_degree of -1, torchtitan's "the rest of the world")."""
    from gpuplan.validation_rules import load_toml_text

    cfg = load_toml_text(text, "from: a torchtitan TOML", "from")
    known = set(T.options)
    unmodelled = [f"{s}.{k} = {v!r}" for s, sec in cfg.items() if isinstance(sec, dict) for k, v in sec.items()
                  if f"{s}.{k}" not in known]
    unmodelled += [f"{s} = {v!r}" for s, v in cfg.items() if not isinstance(v, dict)]
    spec = model if model is not None else _model_of(cfg)
    tp = _int(cfg, "parallelism.tensor_parallel_degree", 1)
    pp = _int(cfg, "parallelism.pipeline_parallel_degree", 1)
    cp = _int(cfg, "parallelism.context_parallel_degree", 1)
    rep = _int(cfg, "parallelism.data_parallel_replicate_degree", 1)
    shard = _int(cfg, "parallelism.data_parallel_shard_degree", -1)
    if shard == -1 and gpus is not None and rep >= 1 and tp >= 1 and pp >= 1 and cp >= 1 and gpus % (tp * pp * cp * rep) == 0:
        shard = gpus // (tp * pp * cp * rep)
    if shard is None or shard < 1 or rep < 1:
        raise InputError("parallelism.data_parallel_shard_degree: give it (-1, inferred from the world size, "
                         "needs --gpus)", field="data_parallel_shard_degree")
    for name, v in (("tensor_parallel_degree", tp), ("pipeline_parallel_degree", pp), ("context_parallel_degree", cp)):
        if v < 1:
            raise InputError(f"parallelism.{name}: {v} must be >= 1", field=name)
    dp = rep * shard
    sharding = Sharding.NONE
    if shard > 1:
        reshard = _get(cfg, "parallelism.fsdp_reshard_after_forward", "default")
        sharding = Sharding.ZERO2 if reshard == "never" else Sharding.ZERO3
    if shard > 1 and rep > 1:
        unmodelled.append(f"HSDP: replicate {rep} x shard {shard} (modelled as {sharding.value} over dp {dp})")
    local = _int(cfg, "training.local_batch_size", 8)
    gb = _int(cfg, "training.global_batch_size", -1)
    gb = local * dp if gb is None or gb < 1 else gb
    mb = _int(cfg, "parallelism.pipeline_parallel_microbatch_size", 1) if pp > 1 else local
    schedule = _get(cfg, "parallelism.pipeline_parallel_schedule", "1F1B")
    vpp = 1
    if pp > 1 and schedule not in ("1F1B", "GPipe"):
        per = _int(cfg, "parallelism.pipeline_parallel_layers_per_stage", None)
        less = sum(_int(cfg, f"parallelism.pipeline_parallel_{end}_stage_less_layers", 1) for end in ("first", "last"))
        vpp = max(1, math.ceil((spec.layers + less) / per) // pp) if per else TORCHTITAN_MULTI_STAGE_STAGES_PER_RANK
    mode = _get(cfg, "activation_checkpoint.mode", "selective")
    recompute = {"none": Recompute.NONE, "full": Recompute.FULL, "selective": Recompute.SELECTIVE}.get(mode)
    if recompute is None:
        raise InputError(f"activation_checkpoint.mode: '{mode}' is not modelled; allowed: none, selective, full",
                         field="activation_checkpoint.mode", allowed="none, selective, full")
    if recompute is Recompute.SELECTIVE and str(_get(cfg, "activation_checkpoint.selective_ac_option", "2")) != "op":
        unmodelled.append("activation_checkpoint.selective_ac_option (every n-th layer; modelled as per-op SAC)")
    converters = _get(cfg, "model.converters", []) or []
    precision = Precision.FP32 if _get(cfg, "training.mixed_precision_param", "bfloat16") == "float32" else Precision.BF16
    if "quantize.linear.float8" in converters or "float8" in converters:
        precision = Precision.FP8
    elif "quantize.linear.mx" in converters or "mx" in converters:
        precision = Precision.MXFP8
    compiled_model, compiled_loss = _compiled(cfg)
    ep = _int(cfg, "parallelism.expert_parallel_degree", 1)
    etp = _int(cfg, "parallelism.expert_tensor_parallel_degree", 1)
    try:
        plan = TrainPlan(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=etp if ep > 1 else None, vpp=vpp, micro_batch=mb,
                         global_batch=gb, seq_len=_int(cfg, "training.seq_len", 2048), recompute=recompute,
                         sequence_parallel=tp > 1, precision=precision, sharding=sharding, framework=Framework.TORCHTITAN,
                         tp_comm_overlap=bool(_get(cfg, "parallelism.enable_async_tensor_parallel", False)),
                         compiled_model=compiled_model, compiled_loss=compiled_loss,
                         checkpoint_early_stop=_get(cfg, "activation_checkpoint.early_stop", False) is True or None)
    except ValueError as exc:
        raise InputError(f"plan: {str(exc).splitlines()[-1].strip()}", field="plan") from None
    return TrainingLaunch("torchtitan", spec, plan, plan.num_gpus, _int(cfg, "training.steps", 10000),
                          tuple(unmodelled))


def _compiled(cfg: dict) -> tuple[bool, bool]:
    """(compiled_model, compiled_loss) of a config's [compile]: nothing unless `enable` is true; then its
    `components` (default ["model", "loss"], torchtitan's Compile.components)."""
    if _get(cfg, "compile.enable", False) is not True:
        return False, False
    parts = _get(cfg, "compile.components", ["model", "loss"])
    if not isinstance(parts, list) or any(p not in ("model", "loss") for p in parts):
        raise InputError(f"compile.components: {parts!r} is not a list of \"model\" and \"loss\"",
                         field="compile.components", allowed="model, loss")
    return "model" in parts, "loss" in parts


def _model_of(cfg: dict) -> ModelSpec:
    from gpuplan.models.bundled import bundled_model_names, load_model

    key = (_get(cfg, "model.name", "llama3"), str(_get(cfg, "model.flavor", "debugmodel")))
    flavor = FLAVORS.get(key)
    if flavor is None:
        names = ", ".join(f"{n} {f}" for n, f in FLAVORS)
        raise InputError(f"model.flavor: '{key[0]} {key[1]}' is not a flavor gpuplan maps to a model ({names}); "
                         "give --model", field="model", allowed=names)
    for name in bundled_model_names():
        spec = load_model(name)
        if _matches(spec, flavor):
            return spec
    raise InputError(f"model.flavor: no bundled model has torchtitan's {key[0]} {key[1]} architecture; give --model",
                     field="model")
