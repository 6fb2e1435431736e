"""PEFT / TRL: a LoRA / QLoRA TrainPlan as the arguments of an SFT script (a LoraConfig, a
BitsAndBytesConfig for a quantised base, TRL's SFTConfig = transformers' TrainingArguments plus
max_length / packing), and such a script read back (options.PEFT: peft 0.21.2, transformers 5.24.0,
trl 1.16.0). The script is Python; reading it parses it (ast) and takes only literal keyword arguments
of those three calls, never running it.

Plan -> arguments:
  targets, rank, dropout   LoraConfig(target_modules = the module names, r, lora_dropout; lora_alpha = 2 x r,
                           not modelled); task_type CAUSAL_LM
  base                     LoRA: model_init_kwargs dtype bfloat16 | float16 | float32, or int8 with
                           BitsAndBytesConfig(load_in_8bit); QLoRA: BitsAndBytesConfig(load_in_4bit,
                           bnb_4bit_quant_type nf4 | fp4, bnb_4bit_use_double_quant, bnb_4bit_compute_dtype)
  precision                bf16 | fp16 = True: autocast over fp32 trainable weights (the fp32 master copy)
  batch                    per_device_train_batch_size, gradient_accumulation_steps = global / (batch x dp);
                           max_length = the sequence, packing = True
  dp, sharding             none: DDP; zero3: fsdp "full_shard"; zero2: "shard_grad_op"; offload params:
                           "full_shard offload"
  recompute                gradient_checkpointing (every layer)
  optimizer                optim: adamw_torch | adamw_bnb_8bit | paged_adamw_8bit | adamw_torch_4bit |
                           adafactor | sgd | lion_32bit
  steps, GPUs              max_steps; `accelerate launch --num_processes N` in the header
"""

from __future__ import annotations

import ast

from gpuplan.errors import InputError
from gpuplan.interfaces.deploy.finetune_common import (
    canonical,
    check_data_parallel,
    process_count,
)
from gpuplan.interfaces.deploy.launch import TrainingLaunch, model_from_id, model_id
from gpuplan.interfaces.deploy.options import PEFT
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

T = PEFT
CALLS = ("LoraConfig", "BitsAndBytesConfig", "SFTConfig")
OPTIM = {Optimizer.ADAMW: "adamw_torch", Optimizer.ADAMW_8BIT: "adamw_bnb_8bit",
         Optimizer.PAGED_ADAMW_8BIT: "paged_adamw_8bit", Optimizer.ADAMW_4BIT: "adamw_torch_4bit",
         Optimizer.ADAFACTOR: "adafactor", Optimizer.SGD: "sgd", Optimizer.LION: "lion_32bit"}
TORCH_DTYPE = {BaseDtype.BF16: "bfloat16", BaseDtype.FP16: "float16", BaseDtype.FP32: "float32"}
FSDP = {Sharding.NONE: "", Sharding.ZERO3: "full_shard", Sharding.ZERO2: "shard_grad_op"}


def _refuse(field: str, message: str, allowed: str | None = None) -> InputError:
    return InputError(f"{field}: a PEFT / TRL script {message}", field=field, allowed=allowed)


def arguments(launch: TrainingLaunch) -> dict[str, dict[str, object]]:
    """{call: {keyword: value}} of `launch` (module docstring), every keyword checked against the table."""
    plan = launch.plan
    check_data_parallel(plan, "peft")
    ft = plan.fine_tuning
    p = Precision(plan.precision)
    if p not in (Precision.BF16, Precision.FP16) or ft.master_weights is not MasterWeights.FP32:
        raise _refuse("precision", "trains with bf16 / fp16 autocast over fp32 trainable weights; allowed: bf16, fp16 "
                      "with --master-weights fp32", "bf16, fp16")
    if plan.recompute is Recompute.SELECTIVE:
        raise _refuse("recompute", "checkpoints whole layers (gradient_checkpointing); allowed: none, full", "none, full")
    if plan.sharding not in FSDP or (plan.dp == 1 and plan.sharding is not Sharding.NONE):
        raise _refuse("sharding", "runs DDP or FSDP (full_shard, shard_grad_op); allowed: none, zero2, zero3",
                      "none, zero2, zero3")
    if ft.offload not in (Offload.NONE, Offload.PARAMS) or (ft.offload is Offload.PARAMS and plan.sharding is not Sharding.ZERO3):
        raise _refuse("offload", "offloads parameters with FSDP full_shard only; allowed: none, params with zero3",
                      "none, params")
    base = ft.base_storage(p.value)
    if ft.method is FineTuneMethod.QLORA and plan.sharding is not Sharding.NONE:
        raise _refuse("sharding", "with a 4-bit base under FSDP needs bnb_4bit_quant_storage (not modelled); allowed: none",
                      "none")
    gb = plan.global_batch or plan.micro_batch * plan.dp
    out: dict[str, dict[str, object]] = {
        "LoraConfig": {"r": ft.rank, "lora_alpha": 2 * ft.rank, "lora_dropout": float(ft.lora_dropout),
                       "target_modules": list(ft.targets), "task_type": "CAUSAL_LM"}}
    compute = "bfloat16" if p is Precision.BF16 else "float16"
    if base.four_bit:
        out["BitsAndBytesConfig"] = {"load_in_4bit": True, "bnb_4bit_quant_type": base.value,
                                     "bnb_4bit_use_double_quant": bool(ft.double_quant), "bnb_4bit_compute_dtype": compute}
    elif base is BaseDtype.INT8:
        out["BitsAndBytesConfig"] = {"load_in_8bit": True}
    sft: dict[str, object] = {"output_dir": f"gpuplan-{launch.model.name}-{ft.method.value}",
                              "per_device_train_batch_size": plan.micro_batch,
                              "gradient_accumulation_steps": gb // (plan.micro_batch * plan.dp),
                              "gradient_checkpointing": plan.recompute is Recompute.FULL,
                              "bf16": p is Precision.BF16, "fp16": p is Precision.FP16, "optim": OPTIM[ft.optimizer],
                              "fsdp": "full_shard offload" if ft.offload is Offload.PARAMS else FSDP[plan.sharding],
                              "max_length": plan.seq_len, "packing": True}
    if launch.steps is not None:
        sft["max_steps"] = launch.steps
    sft["model_init_kwargs"] = {"dtype": TORCH_DTYPE.get(base, compute)}
    out["SFTConfig"] = sft
    for call, kwargs in out.items():
        for k, v in kwargs.items():
            T.key(f"{call}.{k}", v)
    return out


def emit(launch: TrainingLaunch, header: str = "") -> str:
    """The SFT script of `launch`: its header names the launch command."""
    args = arguments(launch)
    n = launch.plan.dp
    run = f"accelerate launch --num_processes {n} sft.py" if n > 1 else "python sft.py"
    lines = [f"# written for {T.written_for} ({T.source}){header}", f"# run: {run}",
             "from peft import LoraConfig", "from transformers import BitsAndBytesConfig", "from trl import SFTConfig, SFTTrainer",
             "", f"MODEL_ID = {model_id(launch.model)!r}", ""]
    for call in CALLS:
        if call in args:
            body = ",\n".join(f"    {k}={v!r}" for k, v in args[call].items())
            lines.append(f"{call.lower()} = {call}(\n{body},\n)")
    if "BitsAndBytesConfig" in args:
        lines.append('sftconfig.model_init_kwargs["quantization_config"] = bitsandbytesconfig')
    lines += ["", ("# trainer = SFTTrainer(model=MODEL_ID, args=sftconfig, train_dataset=YOUR_DATASET, "
              "peft_config=loraconfig); trainer.train()")]
    return "\n".join(lines) + "\n"


# ---- read ------------------------------------------------------------------------------------------
def _calls(text: str) -> tuple[dict[str, dict], list[str], str | None]:
    """({call: literal keyword arguments}, unmodelled arguments, MODEL_ID) of a script."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise InputError(f"from: not a Python script (line {exc.lineno}: {exc.msg})", field="from") from None
    found: dict[str, dict] = {}
    unmodelled: list[str] = []
    model = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "MODEL_ID" for t in node.targets):
            model = node.value.value if isinstance(node.value, ast.Constant) else None
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if name == "TrainingArguments":
            name = "SFTConfig"
        if name not in CALLS:
            continue
        kwargs = found.setdefault(name, {})
        for kw in node.keywords:
            try:
                value = ast.literal_eval(kw.value)
            except ValueError:
                unmodelled.append(f"{name}({kw.arg}=<expression>)")
                continue
            if f"{name}.{kw.arg}" in T.options:
                kwargs[kw.arg] = value
            else:
                unmodelled.append(f"{name}({kw.arg}={value!r})")
    return found, unmodelled, model


def read(text: str, model: ModelSpec | None = None, gpus: int | None = None) -> TrainingLaunch:
    """An SFT script's arguments as a TrainingLaunch; GPUs: `gpus`, else its `accelerate launch
    --num_processes N` line, else one."""
    calls, unmodelled, model_name = _calls(text)
    if "LoraConfig" not in calls or "SFTConfig" not in calls:
        raise InputError("from: the script has no LoraConfig(...) and SFTConfig(...) / TrainingArguments(...)",
                         field="from")
    lora, bnb, sft = calls["LoraConfig"], calls.get("BitsAndBytesConfig", {}), calls["SFTConfig"]
    if model is None:
        model = model_from_id(model_name or "", "MODEL_ID")
    gpus = gpus or process_count(text, r"--num_processes\s+(\d+)") or 1
    p = Precision.FP16 if sft.get("fp16") else Precision.BF16
    dtype = (sft.get("model_init_kwargs") or {}).get("dtype", "bfloat16")
    if bnb.get("load_in_4bit"):
        method, base = FineTuneMethod.QLORA, BaseDtype(bnb.get("bnb_4bit_quant_type", "fp4"))
    else:
        method = FineTuneMethod.LORA
        base = BaseDtype.INT8 if bnb.get("load_in_8bit") else next(
            (b for b, n in TORCH_DTYPE.items() if n == dtype), BaseDtype.BF16)
    fsdp = str(sft.get("fsdp", "") or "")
    sharding = {"": Sharding.NONE, "full_shard": Sharding.ZERO3, "shard_grad_op": Sharding.ZERO2,
                "full_shard offload": Sharding.ZERO3}.get(fsdp)
    if sharding is None:
        raise InputError(f"SFTConfig.fsdp: {fsdp!r} is not modelled; allowed: '', full_shard, shard_grad_op, "
                         "full_shard offload", field="fsdp")
    optim = next((o for o, n in OPTIM.items() if n == sft.get("optim", "adamw_torch")), None)
    if optim is None:
        raise InputError(f"SFTConfig.optim: {sft.get('optim')!r} is not modelled; allowed: {', '.join(OPTIM.values())}",
                         field="optim", allowed=", ".join(OPTIM.values()))
    targets = lora.get("target_modules") or ["q_proj", "v_proj"]
    try:
        ft = FineTuning(method=method, lora_rank=int(lora.get("r", 8)), lora_targets=tuple(targets),
                        lora_dropout=float(lora.get("lora_dropout", 0.0)), base_dtype=base,
                        double_quant=bool(bnb.get("bnb_4bit_use_double_quant", False)) if base.four_bit else True,
                        optimizer=optim, offload=Offload.PARAMS if "offload" in fsdp else Offload.NONE)
        mb = int(sft.get("per_device_train_batch_size", 8))
        plan = TrainPlan(dp=gpus, micro_batch=mb, global_batch=mb * gpus * int(sft.get("gradient_accumulation_steps", 1)),
                         seq_len=int(sft.get("max_length", 1024)), sharding=sharding, precision=p,
                         recompute=Recompute.FULL if sft.get("gradient_checkpointing") else Recompute.NONE,
                         framework=Framework.FSDP, fine_tuning=canonical(ft, p.value))
    except (ValueError, TypeError) as exc:
        raise InputError(f"script arguments: {str(exc).splitlines()[-1].strip()}", field="from") from None
    if not sft.get("packing", False):
        unmodelled.append("SFTConfig(packing=False) (modelled as every sample max_length long)")
    steps = sft.get("max_steps")
    return TrainingLaunch("peft", model, plan, gpus, steps if isinstance(steps, int) and steps > 0 else None,
                          tuple(unmodelled))
