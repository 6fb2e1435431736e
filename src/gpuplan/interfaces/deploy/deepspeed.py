"""DeepSpeed: a data-parallel TrainPlan as a DeepSpeed config JSON, and such a JSON read back
(options.DEEPSPEED: deepspeed/runtime/constants.py, zero/config.py, activation_checkpointing/config.py
at 0.19.8).

A DeepSpeed config states the batch (train_batch_size = train_micro_batch_size_per_gpu x
gradient_accumulation_steps x data-parallel size, DeepSpeed's batch assertion), the ZeRO stage and
the precision; it states no model, no sequence length and no tensor / pipeline layout (those live in
the training script: Megatron-DeepSpeed's flags, or Hugging Face's model). So the plans gpuplan emits
for DeepSpeed are pure ZeRO data parallelism (tp = pp = cp = ep = 1, dp = the GPUs), and reading a
JSON back takes the model, the GPU count and the sequence length from the caller.

Recomputation is the script's too (it calls `deepspeed.checkpointing.checkpoint` per layer, or
Hugging Face's `gradient_checkpointing_enable()`); the `activation_checkpointing` section configures
that checkpointing. gpuplan writes the section for full recomputation and reads its presence as
full recomputation of every layer; selective recomputation has no DeepSpeed setting and is refused.
"""

from __future__ import annotations

import json

from gpuplan.errors import InputError
from gpuplan.interfaces.deploy.launch import TrainingLaunch
from gpuplan.interfaces.deploy.options import DEEPSPEED
from gpuplan.specs import ModelSpec, Precision, Recompute, Sharding, TrainPlan
from gpuplan.specs.execution import Framework

T = DEEPSPEED
STAGES = {Sharding.NONE: 0, Sharding.ZERO1: 1, Sharding.ZERO2: 2, Sharding.ZERO3: 3, Sharding.FSDP: 3}
#: the search axes a DeepSpeed config can state (interfaces.api.deploy limits the plan search to them)
SEARCH_LIMITS = {"tp": [1], "pp": [1], "cp": [1], "ep": [1], "vpp": [1], "sequence_parallel": [False],
                 "recompute": [Recompute.NONE, Recompute.FULL],
                 "sharding": [Sharding.NONE, Sharding.ZERO1, Sharding.ZERO2, Sharding.ZERO3]}


def config(launch: TrainingLaunch) -> dict:
    """The DeepSpeed config of `launch` (module docstring)."""
    plan = launch.plan
    if (plan.tp, plan.pp, plan.cp, plan.ep) != (1, 1, 1, 1):
        raise InputError(f"plan: a DeepSpeed config states data parallelism only; this plan has tp {plan.tp} pp "
                         f"{plan.pp} cp {plan.cp} ep {plan.ep} (emit it for Megatron-LM instead)", field="plan")
    if plan.recompute is Recompute.SELECTIVE:
        raise InputError("recompute: DeepSpeed has no selective recomputation; allowed: none, full", field="recompute",
                         allowed="none, full")
    p = Precision(plan.precision)
    if p not in (Precision.BF16, Precision.FP16, Precision.FP32):
        raise InputError(f"precision: a DeepSpeed config trains in bf16, fp16 or fp32, not {p.value}", field="precision",
                         allowed="bf16, fp16, fp32")
    gb = plan.global_batch or plan.micro_batch * plan.dp
    cfg: dict = {
        "train_batch_size": T.key("train_batch_size", gb),
        "train_micro_batch_size_per_gpu": T.key("train_micro_batch_size_per_gpu", plan.micro_batch),
        "gradient_accumulation_steps": T.key("gradient_accumulation_steps", gb // (plan.micro_batch * plan.dp)),
        "bf16": {"enabled": T.key("bf16.enabled", p is Precision.BF16)},
        "fp16": {"enabled": T.key("fp16.enabled", p is Precision.FP16)},
        "zero_optimization": {"stage": T.key("zero_optimization.stage", STAGES[plan.sharding])},
    }
    if plan.recompute is Recompute.FULL:
        cfg["activation_checkpointing"] = {"partition_activations": T.key("activation_checkpointing.partition_activations",
                                                                          False)}
    return cfg


def emit(launch: TrainingLaunch) -> str:
    """The config as JSON (DeepSpeed and Hugging Face's Trainer read plain JSON: no comment header;
    the version it was written for is the option table's, printed by the CLI on stderr)."""
    return json.dumps(config(launch), indent=2) + "\n"


def _int(cfg: dict, key: str) -> int | None:
    v = cfg.get(key)
    if v is None or v == "auto":
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise InputError(f"{key}: {v!r} is not a positive integer", field=key)
    return v


def read(text: str, model: ModelSpec, gpus: int, seq_len: int) -> TrainingLaunch:
    """A DeepSpeed config JSON as a TrainingLaunch of `model` on `gpus` GPUs at `seq_len` tokens."""
    try:
        cfg = json.loads(text)
    except ValueError as exc:
        raise InputError(f"from: not a DeepSpeed JSON config ({exc})", field="from") from None
    if not isinstance(cfg, dict):
        raise InputError("from: a DeepSpeed config is a JSON object", field="from")
    mb, gb, accum = (_int(cfg, k) for k in ("train_micro_batch_size_per_gpu", "train_batch_size",
                                             "gradient_accumulation_steps"))
    if mb is None:
        if gb is None:
            raise InputError("train_micro_batch_size_per_gpu: give it or train_batch_size", field="train_micro_batch_size_per_gpu")
        mb = gb // (gpus * (accum or 1))
    gb = gb if gb is not None else mb * gpus * (accum or 1)
    if accum is not None and gb != mb * accum * gpus:
        raise InputError(f"train_batch_size: {gb} != micro-batch {mb} x accumulation {accum} x {gpus} GPUs "
                         "(DeepSpeed's batch rule)", field="train_batch_size")
    zero = cfg.get("zero_optimization") or {}
    stage = zero.get("stage", 0) if isinstance(zero, dict) else 0
    if stage not in (0, 1, 2, 3):
        raise InputError(f"zero_optimization.stage: {stage!r}; allowed: 0, 1, 2, 3", field="zero_optimization.stage",
                         allowed="0, 1, 2, 3")
    precision = Precision.FP32
    if (cfg.get("bf16") or {}).get("enabled") is True:
        precision = Precision.BF16
    elif (cfg.get("fp16") or {}).get("enabled") is True:
        precision = Precision.FP16
    recompute = Recompute.FULL if "activation_checkpointing" in cfg else Recompute.NONE
    known = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "bf16", "fp16",
             "zero_optimization", "activation_checkpointing"}
    unmodelled = [f"{k} = {json.dumps(v)}" for k, v in cfg.items() if k not in known]
    unmodelled += [f"zero_optimization.{k} = {json.dumps(v)}" for k, v in (zero.items() if isinstance(zero, dict) else [])
                   if k != "stage"]
    act = cfg.get("activation_checkpointing") if isinstance(cfg.get("activation_checkpointing"), dict) else {}
    unmodelled += [f"activation_checkpointing.{k} = {json.dumps(v)}" for k, v in act.items()
                   if not (k == "partition_activations" and v is False)]
    sharding = {0: Sharding.NONE, 1: Sharding.ZERO1, 2: Sharding.ZERO2, 3: Sharding.ZERO3}[stage]
    try:
        plan = TrainPlan(tp=1, pp=1, dp=gpus, cp=1, micro_batch=mb, global_batch=gb, seq_len=seq_len,
                         recompute=recompute, precision=precision, sharding=sharding, framework=Framework.DEEPSPEED)
    except ValueError as exc:
        raise InputError(f"plan: {str(exc).splitlines()[-1].strip()}", field="plan") from None
    return TrainingLaunch("deepspeed", model, plan, gpus, None, tuple(unmodelled))
