"""MaxText: a TrainPlan as a `python3 -m maxtext.trainers.pre_train.train base.yml key=value ...`
command (options.MAXTEXT: src/maxtext/configs/base.yml and types.py at commit e591f30c), and such a
command read back.

MaxText is JAX / XLA: gpuplan has no model of XLA's own scheduling, so a MaxText plan is predicted as
Framework.OTHER (treated as Megatron's overlap), and the emitted keys state the plan's layout, batch,
recomputation and precision exactly.

Plan -> keys:
  GPUs                 one slice: on GPUs MaxText finds no TPU slice index and runs num_slices = 1
                       (max_utils.get_num_slices), so every degree is an ici_* axis and every dcn_* is 1
  tp, cp, pp           ici_tensor_parallelism, ici_context_parallelism, ici_pipeline_parallelism; tp without
                       sequence parallelism (MaxText's `tensor` axis; its `tensor_sequence` axis is not modelled)
  dp and sharding      none: ici_data_parallelism = dp; zero1: the same with shard_optimizer_over_data true;
                       zero3 / fsdp: ici_fsdp_parallelism = dp (parameters, gradients and optimizer state
                       sharded). ZeRO-2 has no MaxText setting: refused.
  vpp                  num_pipeline_repeats (circular pipeline: layers = pp x repeats x layers per stage)
  batch                types.py calculate_global_batch_sizes: a step trains devices x per_device_batch_size
                       x gradient_accumulation_steps sequences. Without pp: per_device_batch_size =
                       micro-batch x dp / devices, gradient_accumulation_steps = global / (micro-batch x dp).
                       With pp: the whole global batch is one forward (per_device_batch_size = global / devices)
                       split into num_pipeline_microbatches = global / (micro-batch x dp)
  recompute            remat_policy: full (save nothing) | minimal (save every projection's output, recompute
                       the attention context: selective) | minimal_with_context (save every named tensor: none)
                       (src/maxtext/layers/decoders.py get_remat_policy, minimal_policy)
  precision            dtype bfloat16 activations over weight_dtype float32 (bf16 mixed precision), fp8:
                       quantization fp8 (fp8 GEMMs on NVIDIA GPUs); grad_dtype float32
  attention            attention cudnn_flash_te (fused) | dot_product (unfused)
  model                model_name (src/maxtext/configs/models/<name>.yml; MODELS below)
"""

from __future__ import annotations

from gpuplan.errors import InputError
from gpuplan.interfaces.deploy import overrides
from gpuplan.interfaces.deploy.commandline import find_command
from gpuplan.interfaces.deploy.launch import TrainingLaunch
from gpuplan.interfaces.deploy.options import MAXTEXT
from gpuplan.specs import ModelSpec, Precision, Recompute, Sharding, TrainPlan
from gpuplan.specs.execution import AttentionKernel, Framework

T = MAXTEXT
MODULE = "maxtext.trainers.pre_train.train"
BASE_YML = "src/maxtext/configs/base.yml"
SEARCH_LIMITS = {"sequence_parallel": [False], "ep": [1], "sharding": [Sharding.NONE, Sharding.ZERO1, Sharding.ZERO3]}
#: model_name -> (bundled model, (base_num_decoder_layers, base_emb_dim, base_mlp_dim, base_num_query_heads,
#: base_num_kv_heads, vocab_size)) from src/maxtext/configs/models/<name>.yml at e591f30c
MODELS = {
    "llama3-8b": ("llama-3-8b", (32, 4096, 14336, 32, 8, 128256)),
    "llama3-70b": ("llama-3-70b", (80, 8192, 28672, 64, 8, 128256)),
    "llama3.1-405b": ("llama-3.1-405b", (126, 16384, 53248, 128, 8, 128256)),
    "mixtral-8x7b": ("mixtral-8x7b", (32, 4096, 14336, 32, 8, 32000)),
}
REMAT = {Recompute.FULL: "full", Recompute.SELECTIVE: "minimal", Recompute.NONE: "minimal_with_context"}
AXES = ("data", "fsdp", "tensor", "pipeline", "context", "expert")


def model_name_of(model: ModelSpec) -> str:
    for name, (bundled, arch) in MODELS.items():
        if model.name == bundled and (model.layers, model.hidden, model.ffn, model.heads, model.kv_heads,
                                      model.vocab) == arch:
            return name
    names = ", ".join(f"{n} ({m})" for n, (m, _) in MODELS.items())
    raise InputError(f"model: MaxText has no model config gpuplan maps to {model.name}; model_name: {names}",
                     field="model", allowed=names)


def _check_plan(plan: TrainPlan, model: ModelSpec) -> Precision:
    if plan.sequence_parallel:
        raise InputError("sequence_parallel: MaxText's tensor axis is modelled without sequence parallelism; give "
                         "--no-sequence-parallel", field="sequence_parallel")
    if plan.ep != 1:
        raise InputError("ep: MaxText's expert axis is not modelled; allowed: 1", field="ep", allowed="1")
    if plan.sharding is Sharding.ZERO2:
        raise InputError("sharding: MaxText has no ZeRO-2 setting; allowed: none, zero1, zero3, fsdp", field="sharding",
                         allowed="none, zero1, zero3, fsdp")
    if plan.dp == 1 and plan.sharding is not Sharding.NONE:
        raise InputError("sharding: with dp 1 MaxText's fsdp and data axes shard nothing; allowed: none", field="sharding",
                         allowed="none")
    if plan.pp > 1 and model.layers % (plan.pp * plan.vpp):
        raise InputError(f"vpp: MaxText splits {model.layers} layers evenly over pp {plan.pp} x repeats {plan.vpp}",
                         field="vpp")
    p = Precision(plan.precision)
    if p not in (Precision.BF16, Precision.FP8):
        raise InputError(f"precision: gpuplan writes MaxText runs in bf16 or fp8, not {p.value}", field="precision",
                         allowed="bf16, fp8")
    if Precision(plan.grad_precision) is not Precision.FP32:
        raise InputError("grad_precision: MaxText's grad_dtype is float32 here; allowed: fp32", field="grad_precision",
                         allowed="fp32")
    if plan.attention_kernel in (AttentionKernel.FLASH_V1, AttentionKernel.FLASH2):
        raise InputError(f"attention_kernel: MaxText runs no flash-attn library kernel ({plan.attention_kernel.value}); "
                         "allowed: flash, unfused",
                         field="attention_kernel", allowed="flash, unfused")
    return p


def _per_device(sequences: int, devices: int):
    """per_device_batch_size giving `sequences` per forward on `devices` as MaxText computes it
    (types.py calculate_global_batch_sizes: int(devices x per_device_batch_size)); an int when whole."""
    value = sequences / devices
    if int(devices * value) != sequences:
        raise InputError(f"per_device_batch_size: {sequences} sequences over {devices} devices is not a float MaxText "
                         "multiplies back exactly", field="per_device_batch_size")
    return int(value) if value.is_integer() else value


def pairs(launch: TrainingLaunch) -> list[tuple[str, object]]:
    plan, model = launch.plan, launch.model
    p = _check_plan(plan, model)
    gb = plan.global_batch or plan.micro_batch * plan.dp
    accumulation = gb // (plan.micro_batch * plan.dp)
    shard = plan.sharding in (Sharding.ZERO3, Sharding.FSDP)
    degrees = {"data": 1 if shard else plan.dp, "fsdp": plan.dp if shard else 1, "tensor": plan.tp,
               "pipeline": plan.pp, "context": plan.cp, "expert": 1}
    out: list[tuple[str, object]] = [("model_name", model_name_of(model)), ("run_name", f"gpuplan-{model.name}"),
                                     ("hardware", "gpu"), ("dataset_type", "synthetic")]
    if launch.steps is not None:
        out.append(("steps", launch.steps))
    out.append(("max_target_length", plan.seq_len))
    if plan.pp > 1:
        out += [("per_device_batch_size", _per_device(gb, launch.gpus)), ("gradient_accumulation_steps", 1),
                ("num_pipeline_microbatches", accumulation), ("num_pipeline_repeats", plan.vpp), ("scan_layers", False)]
    else:
        out += [("per_device_batch_size", _per_device(plan.micro_batch * plan.dp, launch.gpus)),
                ("gradient_accumulation_steps", accumulation)]
    out += [("num_slices", 1)]
    out += [(f"ici_{axis}_parallelism", degrees[axis]) for axis in AXES]
    out += [(f"dcn_{axis}_parallelism", 1) for axis in AXES]
    out += [("shard_optimizer_over_data", plan.sharding is Sharding.ZERO1), ("remat_policy", REMAT[plan.recompute]),
            ("dtype", "bfloat16"), ("weight_dtype", "float32"), ("grad_dtype", "float32"),
            ("quantization", "fp8" if p is Precision.FP8 else ""),
            ("attention", "dot_product" if plan.attention_kernel is AttentionKernel.UNFUSED else "cudnn_flash_te")]
    return out


def emit(launch: TrainingLaunch, header: str = "") -> str:
    """The MaxText training command of `launch` (module docstring)."""
    return (f"# written for {T.written_for} ({T.source}){header}\n"
            + overrides.render(["python3", "-m", MODULE, BASE_YML], T, pairs(launch), overrides.YAML))


# ---- read ------------------------------------------------------------------------------------------
def _is_program(word: str, next_word: str) -> bool:
    return word.endswith(("pre_train.train", "MaxText.train", "maxtext/train.py", "MaxText/train.py"))


def read(text: str, model: ModelSpec | None = None, gpus: int | None = None) -> TrainingLaunch:
    """A MaxText training command as a TrainingLaunch (`model` replaces model_name's; `gpus` fills an
    ici axis of -1, MaxText's "the rest of the devices")."""
    from gpuplan.models import load_model

    _, words = find_command(text, _is_program, expected="MaxText train")
    values, unmodelled, others = overrides.parse(words, T)
    unmodelled += [w for w in others if not w.endswith(".yml")]
    if model is None:
        name = values.get("model_name")
        if name not in MODELS:
            names = ", ".join(MODELS)
            raise InputError(f"model_name: '{name}' is not a model gpuplan maps ({names}); give MODEL", field="model_name",
                             allowed=names)
        model = load_model(MODELS[name][0])
    if overrides.integer(values, "num_slices", 1, minimum=-1) not in (1, -1):
        unmodelled.append(f"num_slices={values['num_slices']} (modelled as one slice: dcn axes multiply the ici ones)")
    degree = {axis: overrides.integer(values, f"ici_{axis}_parallelism", -1 if axis == "fsdp" else 1, minimum=-1)
              * max(1, overrides.integer(values, f"dcn_{axis}_parallelism", 1, minimum=-1)) for axis in AXES}
    unknown = [a for a, d in degree.items() if d < 1]
    if unknown:
        known = 1
        for d in degree.values():
            known *= max(d, 1)
        if gpus is None or len(unknown) > 1 or gpus % known:
            raise InputError(f"ici_{unknown[0]}_parallelism: -1 (the rest of the devices) needs --gpus", field="gpus")
        degree[unknown[0]] = gpus // known
    if degree["expert"] != 1:
        unmodelled.append(f"ici_expert_parallelism={degree['expert']} (modelled as data parallelism)")
    total = 1
    for d in degree.values():
        total *= d
    tp, pp, cp = degree["tensor"], degree["pipeline"], degree["context"]
    dp = total // (tp * pp * cp)
    seq = overrides.integer(values, "max_target_length", 2048)  # base.yml:880
    per_device = overrides.number(values, "per_device_batch_size", 12.0)  # base.yml:731
    accumulation = overrides.integer(values, "gradient_accumulation_steps", 1)
    forward_batch = int(total * per_device)  # types.py calculate_global_batch_sizes
    gb = forward_batch * accumulation
    if pp > 1:
        micro = overrides.integer(values, "num_pipeline_microbatches", pp)
        if forward_batch % (micro * dp):
            raise InputError(f"num_pipeline_microbatches: {forward_batch} sequences per forward are not {micro} "
                             f"micro-batches over dp {dp}", field="num_pipeline_microbatches")
        mb = forward_batch // (micro * dp)
    else:
        if forward_batch % dp:
            raise InputError(f"per_device_batch_size: {per_device:g} x {total} devices is not a whole batch per "
                             f"data-parallel rank ({dp})", field="per_device_batch_size")
        mb = forward_batch // dp
    sharding = Sharding.ZERO3 if degree["fsdp"] > 1 else (
        Sharding.ZERO1 if values.get("shard_optimizer_over_data") else Sharding.NONE)
    if degree["fsdp"] > 1 and degree["data"] > 1:
        unmodelled.append(f"ici_data_parallelism={degree['data']} with fsdp {degree['fsdp']} (modelled as zero3 over both)")
    remat = values.get("remat_policy", "full")
    recompute = next((r for r, name in REMAT.items() if name == remat), Recompute.FULL)
    try:
        plan = TrainPlan(tp=tp, pp=pp, cp=cp, dp=dp, vpp=overrides.integer(values, "num_pipeline_repeats", 1) if pp > 1 else 1,
                         micro_batch=mb, global_batch=gb, seq_len=seq, recompute=recompute, sharding=sharding,
                         precision=Precision.FP8 if values.get("quantization") == "fp8" else Precision.BF16,
                         framework=Framework.OTHER,
                         attention_kernel=AttentionKernel.UNFUSED if values.get("attention") == "dot_product"
                         else AttentionKernel.FLASH)
    except ValueError as exc:
        raise InputError(f"plan: {str(exc).splitlines()[-1].strip()}", field="plan") from None
    return TrainingLaunch("maxtext", model, plan, total, overrides.integer(values, "steps"), tuple(unmodelled))
