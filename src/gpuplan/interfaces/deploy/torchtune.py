"""torchtune: a LoRA / QLoRA TrainPlan as a recipe config YAML (lora_finetune_distributed, or
lora_finetune_single_device on one GPU), and such a YAML read back (options.TORCHTUNE, v0.6.1).

Plan -> keys (the model builders' arguments and the keys the recipes read):
  method, model          model._component_: torchtune.models.<family>.lora_<m> or qlora_<m> (QLoRA: the base
                         in torchao's NF4, whose block scales are themselves quantised: nf4 with double quant)
  targets                model.lora_attn_modules (q_proj, k_proj, v_proj, output_proj = o_proj);
                         model.apply_lora_to_mlp (gate_proj, up_proj and down_proj together: w1, w3, w2);
                         model.apply_lora_to_output (lm_head). A subset of the MLP is refused.
  rank, dropout          model.lora_rank, model.lora_dropout; model.lora_alpha = 2 x rank (the shipped
                         configs' "usually alpha=2*rank"; alpha scales the update and costs nothing)
  precision              dtype bf16: the recipes train in the model's dtype, with no fp32 master copy, so the
                         plan must have --master-weights none
  batch                  batch_size (per device), gradient_accumulation_steps = global / (batch x dp);
                         tokenizer.max_seq_len = the sequence and dataset.packed true (every sample that long)
  dp, sharding           one GPU: the single-device recipe; more: the distributed recipe, FSDP2 over dp:
                         zero3 (fsdp_reshard_after_forward true) or zero2 (false)
  recompute              enable_activation_checkpointing (every layer: full); selective is refused
  optimizer, offload     optimizer._component_ torch.optim.AdamW | bitsandbytes.optim.AdamW8bit |
                         bitsandbytes.optim.PagedAdamW8bit; fsdp_cpu_offload (offload params)
  steps                  epochs 1, max_steps_per_epoch

The paths (checkpoint, tokenizer, output) and the dataset, loss and schedule are the shipped config's
for that model (MODELS), for the user to change; they are listed in the option table and not modelled.
"""

from __future__ import annotations

import re

import yaml

from gpuplan.errors import InputError
from gpuplan.interfaces.deploy.finetune_common import (
    canonical,
    check_data_parallel,
    process_count,
)
from gpuplan.interfaces.deploy.launch import TrainingLaunch
from gpuplan.interfaces.deploy.options import TORCHTUNE
from gpuplan.specs import ModelSpec, Precision, Recompute, Sharding, TrainPlan
from gpuplan.specs.execution import Framework
from gpuplan.specs.finetune import (
    BaseDtype,
    FineTuneMethod,
    FineTuning,
    MasterWeights,
    Offload,
    Optimizer,
)

T = TORCHTUNE
#: bundled model -> (builder module, builder suffix, tokenizer path, checkpointer, checkpoint_dir, checkpoint_files):
#: recipes/configs/llama3/8B_lora.yaml, llama3/70B_lora.yaml, llama3_1/405B_qlora.yaml at v0.6.1
MODELS = {
    "llama-3-8b": ("llama3", "llama3_8b", "/tmp/Meta-Llama-3-8B-Instruct/original/tokenizer.model",
                   "torchtune.training.FullModelMetaCheckpointer", "/tmp/Meta-Llama-3-8B-Instruct/original/",
                   ["consolidated.00.pth"]),
    "llama-3-70b": ("llama3", "llama3_70b", "/tmp/Meta-Llama-3-70B-Instruct/original/tokenizer.model",
                    "torchtune.training.FullModelHFCheckpointer", "/tmp/Meta-Llama-3-70B-Instruct",
                    {"filename_format": "model-{}-of-{}.safetensors", "max_filename": "00030"}),
    "llama-3.1-405b": ("llama3_1", "llama3_1_405b", "/tmp/Meta-Llama-3.1-405B-Instruct/original/mp8/tokenizer.model",
                       "torchtune.training.FullModelHFCheckpointer", "/tmp/Meta-Llama-3.1-405B-Instruct/",
                       {"filename_format": "model-{}-of-{}.safetensors", "max_filename": "00191"}),
}
ATTN = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "o_proj": "output_proj"}
MLP = ("gate_proj", "up_proj", "down_proj")
OPTIMIZERS = {Optimizer.ADAMW: "torch.optim.AdamW", Optimizer.ADAMW_8BIT: "bitsandbytes.optim.AdamW8bit",
              Optimizer.PAGED_ADAMW_8BIT: "bitsandbytes.optim.PagedAdamW8bit"}
SHARDINGS = (Sharding.ZERO2, Sharding.ZERO3)


def _refuse(field: str, message: str, allowed: str | None = None) -> InputError:
    return InputError(f"{field}: torchtune {T.version} {message}", field=field, allowed=allowed)


def recipe(dp: int) -> str:
    return "lora_finetune_single_device" if dp == 1 else "lora_finetune_distributed"


def config(launch: TrainingLaunch) -> dict:
    """The recipe config of `launch` (module docstring), nested as the YAML is."""
    plan, model = launch.plan, launch.model
    check_data_parallel(plan, "torchtune")
    ft = plan.fine_tuning
    setup = MODELS.get(model.name)
    if setup is None:
        raise _refuse("model", f"has no LoRA builder gpuplan maps to {model.name}; models: {', '.join(MODELS)}",
                      ", ".join(MODELS))
    family, suffix, tok, ckpt, ckpt_dir, files = setup
    base = ft.base_storage("bf16")
    if ft.method is FineTuneMethod.QLORA and (base is not BaseDtype.NF4 or not ft.double_quant):
        raise _refuse("base_dtype", "QLoRA stores the base in torchao NF4 with quantised scales; allowed: nf4 with "
                      "--double-quant", "nf4")
    if ft.method is FineTuneMethod.LORA and base is not BaseDtype.BF16:
        raise _refuse("base_dtype", "LoRA keeps the base in the training dtype; allowed: bf16", "bf16")
    if Precision(plan.precision) is not Precision.BF16 or ft.master_weights is not MasterWeights.NONE:
        raise _refuse("master_weights", "trains in pure bf16 (dtype bf16, no fp32 master copy); give --master-weights "
                      "none", "none")
    if plan.recompute is Recompute.SELECTIVE:
        raise _refuse("recompute", "checkpoints whole layers; allowed: none, full", "none, full")
    if ft.optimizer not in OPTIMIZERS:
        allowed = ", ".join(o.value for o in OPTIMIZERS)
        raise _refuse("optimizer", f"configs name {allowed}", allowed)
    if ft.offload not in (Offload.NONE, Offload.PARAMS) or (ft.offload is Offload.PARAMS and plan.dp == 1):
        raise _refuse("offload", "offloads parameters with FSDP (fsdp_cpu_offload, more than one GPU); allowed: none, "
                      "params", "none, params")
    if plan.dp == 1 and plan.sharding is not Sharding.NONE:
        raise _refuse("sharding", "runs one GPU unsharded; allowed: none", "none")
    if plan.dp > 1 and plan.sharding not in SHARDINGS:
        raise _refuse("sharding", "shards with FSDP2 on more than one GPU; allowed: zero2, zero3", "zero2, zero3")
    targets = tuple(ft.targets)
    mlp = [t for t in targets if t in MLP]
    if mlp and len(mlp) != len(MLP):
        raise _refuse("lora_targets", "adapts the MLP's three projections together (apply_lora_to_mlp)")
    gb = plan.global_batch or plan.micro_batch * plan.dp
    out: dict = {"output_dir": f"/tmp/torchtune/{suffix}/gpuplan"}
    out["model"] = {"_component_": f"torchtune.models.{family}.{'qlora' if ft.method is FineTuneMethod.QLORA else 'lora'}_{suffix}",
                    "lora_attn_modules": [ATTN[t] for t in targets if t in ATTN],
                    "apply_lora_to_mlp": bool(mlp), "apply_lora_to_output": "lm_head" in targets,
                    "lora_rank": ft.rank, "lora_alpha": 2 * ft.rank, "lora_dropout": float(ft.lora_dropout)}
    out["tokenizer"] = {"_component_": "torchtune.models.llama3.llama3_tokenizer", "path": tok, "max_seq_len": plan.seq_len}
    out["checkpointer"] = {"_component_": ckpt, "checkpoint_dir": ckpt_dir, "checkpoint_files": files,
                           "recipe_checkpoint": None, "output_dir": "${output_dir}", "model_type": "LLAMA3"}
    out["resume_from_checkpoint"] = False
    out["dataset"] = {"_component_": "torchtune.datasets.alpaca_cleaned_dataset", "packed": True}
    out["seed"] = None
    out["shuffle"] = True
    out["batch_size"] = plan.micro_batch
    out["optimizer"] = {"_component_": OPTIMIZERS[ft.optimizer], "lr": 3e-4}
    out["lr_scheduler"] = {"_component_": "torchtune.training.lr_schedulers.get_cosine_schedule_with_warmup",
                           "num_warmup_steps": 100}
    out["loss"] = {"_component_": "torchtune.modules.loss.CEWithChunkedOutputLoss"}
    out["epochs"] = 1
    out["max_steps_per_epoch"] = launch.steps
    out["gradient_accumulation_steps"] = gb // (plan.micro_batch * plan.dp)
    out["metric_logger"] = {"_component_": "torchtune.training.metric_logging.DiskLogger", "log_dir": "${output_dir}/logs"}
    out["log_every_n_steps"] = 1
    out["log_peak_memory_stats"] = True
    out["device"] = "cuda"
    out["dtype"] = "bf16"
    out["enable_activation_checkpointing"] = plan.recompute is Recompute.FULL
    if plan.dp > 1:
        out["fsdp_cpu_offload"] = ft.offload is Offload.PARAMS
        out["fsdp_reshard_after_forward"] = plan.sharding is Sharding.ZERO3
    for dotted, value in _flat(out).items():
        T.key(dotted, value)  # every key recorded, every value in its choices
    return out


def _flat(cfg: dict) -> dict:
    out = {}
    for k, v in cfg.items():
        if isinstance(v, dict) and k != "checkpoint_files":
            out.update({f"{k}.{kk}": vv for kk, vv in v.items()})
        else:
            out[k] = v
    return out


def emit(launch: TrainingLaunch, header: str = "") -> str:
    """The recipe config YAML of `launch`, with the `tune run` command in its header."""
    cfg = config(launch)
    dp = launch.plan.dp
    run = (f"tune run --nproc_per_node {dp} {recipe(dp)} --config FILE" if dp > 1
           else f"tune run {recipe(dp)} --config FILE")
    return (f"# written for {T.written_for} ({T.source}){header}\n# run: {run}\n"
            "# the paths, dataset and schedule are the shipped config's: set them to yours\n"
            + yaml.safe_dump(cfg, sort_keys=False, default_flow_style=False, width=120))


# ---- read ------------------------------------------------------------------------------------------
_COMPONENT = re.compile(r"^torchtune\.models\.(\w+)\.(q?lora)_(\w+)$")


def read(text: str, model: ModelSpec | None = None, gpus: int | None = None) -> TrainingLaunch:
    """A torchtune LoRA / QLoRA recipe config as a TrainingLaunch; the GPU count: `gpus`, else the
    config's `tune run --nproc_per_node N` line, else one GPU."""
    from gpuplan.models import load_model

    try:
        cfg = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"from: not a YAML recipe config ({str(exc).splitlines()[0]})", field="from") from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("model"), dict):
        raise InputError("from: a torchtune recipe config has a model section", field="model")
    flat = _flat(cfg)
    unmodelled = [f"{k}: {v!r}" for k, v in flat.items() if k not in T.options]
    component = str(cfg["model"].get("_component_", ""))
    m = _COMPONENT.match(component)
    if m is None:
        raise InputError(f"model._component_: '{component}' is not a torchtune LoRA / QLoRA builder", field="model")
    name = next((n for n, s in MODELS.items() if s[0] == m.group(1) and s[1] == m.group(3)), None)
    if model is None:
        if name is None:
            raise InputError(f"model._component_: no bundled model for {component}; give MODEL", field="model")
        model = load_model(name)
    gpus = gpus or process_count(text, r"--nproc_per_node\s+(\d+)") or 1
    ints = {k: _int(flat, k, d) for k, d in (("batch_size", 1), ("gradient_accumulation_steps", 1),
                                              ("model.lora_rank", 8), ("tokenizer.max_seq_len", None))}
    if ints["tokenizer.max_seq_len"] is None:
        raise InputError("tokenizer.max_seq_len: the config must state the sequence length", field="max_seq_len")
    attn = cfg["model"].get("lora_attn_modules") or []
    inverse = {v: k for k, v in ATTN.items()}
    unknown = [a for a in attn if a not in inverse]
    if unknown:
        raise InputError(f"model.lora_attn_modules: {unknown[0]!r} is not one of {', '.join(inverse)}",
                         field="lora_attn_modules")
    targets = [inverse[a] for a in attn] + (list(MLP) if cfg["model"].get("apply_lora_to_mlp") else []) + (
        ["lm_head"] if cfg["model"].get("apply_lora_to_output") else [])
    optimizer = next((o for o, c in OPTIMIZERS.items() if c == flat.get("optimizer._component_")), None)
    if optimizer is None:
        raise InputError(f"optimizer._component_: {flat.get('optimizer._component_')!r} is not modelled; allowed: "
                         + ", ".join(OPTIMIZERS.values()), field="optimizer")
    qlora = m.group(2) == "qlora"
    try:
        ft = FineTuning(method=FineTuneMethod.QLORA if qlora else FineTuneMethod.LORA, lora_rank=ints["model.lora_rank"],
                        lora_targets=tuple(targets), lora_dropout=float(cfg["model"].get("lora_dropout", 0.0)),
                        base_dtype=BaseDtype.NF4 if qlora else BaseDtype.BF16, optimizer=optimizer,
                        offload=Offload.PARAMS if flat.get("fsdp_cpu_offload") else Offload.NONE,
                        master_weights=MasterWeights.NONE)
        sharding = Sharding.NONE if gpus == 1 else (
            Sharding.ZERO3 if flat.get("fsdp_reshard_after_forward", True) else Sharding.ZERO2)
        mb = ints["batch_size"]
        plan = TrainPlan(dp=gpus, micro_batch=mb, global_batch=mb * gpus * ints["gradient_accumulation_steps"],
                         seq_len=ints["tokenizer.max_seq_len"], sharding=sharding, precision=Precision.BF16,
                         recompute=Recompute.FULL if flat.get("enable_activation_checkpointing") else Recompute.NONE,
                         framework=Framework.FSDP, fine_tuning=canonical(ft))
    except ValueError as exc:
        raise InputError(f"config: {str(exc).splitlines()[-1].strip()}", field="from") from None
    if str(flat.get("dtype", "bf16")) != "bf16":
        unmodelled.append(f"dtype: {flat.get('dtype')!r} (modelled as bf16)")
    if not flat.get("dataset.packed", False):
        unmodelled.append("dataset.packed: false (modelled as every sample max_seq_len long)")
    steps = flat.get("max_steps_per_epoch")
    return TrainingLaunch("torchtune", model, plan, gpus, steps if isinstance(steps, int) else None, tuple(unmodelled))


def _int(flat: dict, key: str, default: int | None) -> int | None:
    v = flat.get(key, default)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise InputError(f"{key}: {v!r} is not an integer >= 1", field=key)
    return v
