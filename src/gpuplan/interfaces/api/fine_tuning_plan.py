"""`gpuplan plan --goal finetune --tokens N`: which method on which hardware fine-tunes a model on N
tokens, how long it takes and what it costs.

Candidates: each method (full fine-tuning with AdamW and fp32 master weights; LoRA over a bf16 base;
QLoRA over an NF4 base) on each hardware choice (`FINETUNE_HARDWARE`: one to four 24 GB RTX 4090s in
a PCIe box, one 48 GB L40S, one A100 / H100, and the 8-GPU DGX A100 / H100 / B200; or the given
`--system` with `--gpus`). Every GPU count above one shards with FSDP (full sharding: what Answer.AI's
fsdp_qlora and torchtune's distributed recipes do).

Memory is relieved step by step, the first step that fits being kept (`RELIEF_STEPS`): nothing; then
activation checkpointing (`--recompute full`: PEFT's `prepare_model_for_kbit_training` turns it on by
default, `use_gradient_checkpointing=True`); then the optimizer's states and step on the CPU
(`offload optimizer`: ZeRO-Offload, torchao CPUOffloadOptimizer); then parameters and gradients on the
host too (`offload params`: FSDP CPUOffload(offload_params=True), which needs sharding). At that step the
largest micro-batch of 1, 2, 4, 8 that fits and runs fastest is taken.

The global batch: `--global-batch` sequences, else api.fine_tuning.FINETUNE_GLOBAL_BATCH rounded up to a multiple of
micro-batch x dp (gradient accumulation makes up the rest; api.fine_tuning: qlora.py's 16). Each candidate is `api.train` of that one
plan: tokens/s, days, GPU-hours, energy and the rental cost where the catalog has a price for the GPU,
each with its 80% band (interfaces.validation.error_bands: fine-tuning rows' CV residuals).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from gpuplan.errors import GpuplanError, InputError
from gpuplan.interfaces.api._common import Result, count, default_seq_len, positive, resolve_model, resolve_system
from gpuplan.specs import ModelSpec

#: (system id, GPUs) from a 24 GB card to a DGX (catalog ids; a GPU id names a PCIe box of that GPU)
FINETUNE_HARDWARE: tuple[tuple[str, int], ...] = (
    ("rtx-4090", 1), ("rtx-4090", 2), ("rtx-4090", 4), ("l40s", 1), ("a100-sxm4-80gb", 1), ("h100-sxm5-80gb", 1),
    ("dgx-a100-80gb", 8), ("dgx-h100", 8), ("dgx-b200", 8),
)
METHODS = ("full", "lora", "qlora")
#: (recompute, offload) tried in order until the plan fits (module docstring)
RELIEF_STEPS: tuple[tuple[str, str], ...] = (("none", "none"), ("full", "none"), ("full", "optimizer"), ("full", "params"))
MICRO_BATCHES = (1, 2, 4, 8)
GIB = 2**30


@dataclass(frozen=True)
class FineTunePlanResult(Result):
    """`plan --goal finetune`: every candidate (fits or not, with why) and the fastest and cheapest."""

    model: str
    tokens: float
    seq_len: int
    lora: dict
    candidates: tuple[dict, ...]

    def _best(self, key: str) -> dict | None:
        ok = [c for c in self.candidates if c["fits"] and c.get(key) is not None]
        return min(ok, key=lambda c: c[key]) if ok else None

    def answer(self) -> str:
        fast, cheap = self._best("time_s"), self._best("cost_usd")
        if fast is None:
            return f"no candidate fits {self.model}: see each candidate's reason"
        text = (f"fastest: {fast['method']} on {fast['gpus']} x {fast['gpu']} ({fast['system']}), "
                f"{fast['time_s'] / 3600:,.3g} h for {self.tokens:,.0f} tokens")
        if cheap is not None:
            text += (f"; cheapest rented: {cheap['method']} on {cheap['gpus']} x {cheap['gpu']}, "
                     f"${cheap['cost_usd']:,.2f} ({cheap['time_s'] / 3600:,.3g} h)")
        return text

    def json_data(self) -> dict:
        fast, cheap = self._best("time_s"), self._best("cost_usd")
        return {
            "goal": "finetune", "model": self.model, "tokens": self.tokens, "seq_len": self.seq_len,
            "lora": self.lora, "answer": self.answer(),
            "fastest": None if fast is None else {k: fast[k] for k in ("system", "gpus", "method")},
            "cheapest": None if cheap is None else {k: cheap[k] for k in ("system", "gpus", "method")},
            "candidates": list(self.candidates),
        }


def _fine_tuning(method: str, offload: str, rank: int | None, targets: str | None) -> dict:
    ft: dict[str, Any] = {"finetune": method, "offload": offload}
    if method != "full":
        ft.update({"lora_rank": rank, "lora_targets": targets})
    return ft


def _global_batch(given: int | None, micro_batch: int, dp: int) -> int:
    """`given`, else api.fine_tuning.FINETUNE_GLOBAL_BATCH rounded up to a multiple of micro-batch x dp."""
    from gpuplan.interfaces.api.fine_tuning import fine_tuning_global_batch

    return given if given is not None else fine_tuning_global_batch(micro_batch, dp)


def _candidate(model: ModelSpec, system_id: str, gpus: int, method: str, tokens: float, seq_len: int,
               global_batch: int | None, rank: int | None, targets: str | None, usd: float | None) -> dict:
    """The first relief step that fits (module docstring) at its fastest micro-batch, as a record."""
    from gpuplan.interfaces.api._common import gpu_of
    from gpuplan.interfaces.api.fine_tuning import fine_tuning_spec
    from gpuplan.interfaces.api.training import _given_plan, train
    from gpuplan.specs import Precision
    from gpuplan.specs.execution import Framework
    from gpuplan.workloads.training.memory import training_memory

    system = resolve_system(system_id)
    gpu = gpu_of(system)
    # PyTorch FSDP across GPUs (fsdp_qlora, torchtune's distributed recipes); one GPU: plain PyTorch
    framework = Framework.FSDP if gpus > 1 else Framework.OTHER
    record: dict[str, Any] = {"system": system.id, "gpu": gpu.id, "gpus": gpus, "method": method,
                              "gpu_memory_gib": gpu.memory_bytes / GIB}
    smallest = None
    for recompute, offload in RELIEF_STEPS:
        sharding = "fsdp" if gpus > 1 or offload == "params" else "none"
        ft = fine_tuning_spec(_fine_tuning(method, offload, rank, targets))
        best = None
        for mb in MICRO_BATCHES:
            try:
                plan = _given_plan(gpus, seq_len, _global_batch(global_batch, mb, gpus), Precision.BF16, False,
                                   {"micro_batch": mb, "recompute": recompute, "sharding": sharding}, ft,
                                   framework=framework)
            except InputError:
                break  # a global batch this micro-batch cannot divide
            mem = training_memory(model, plan, gpu)
            gib = mem.per_gpu_bytes["total"] / GIB
            smallest = gib if smallest is None else min(smallest, gib)
            if not mem.fits:
                break
            try:
                res = train(model, system, gpus, tokens=tokens, plan=plan, framework=framework.value,
                            usd_per_gpu_hour=usd)
            except GpuplanError:
                break
            if best is None or res.estimate.step.tokens_per_s > best[0].estimate.step.tokens_per_s:
                best = (res, mem)
        if best is not None:
            return {**record, **_fitting(best[0], best[1], recompute, offload, sharding)}
    return {**record, "fits": False, "fine_tuning": fine_tuning_spec(_fine_tuning(method, "params", rank, targets)).label(),
            "memory_per_gpu_gib": smallest,
            "reason": (f"needs {smallest:,.1f} GiB per GPU even with activation checkpointing, parameters and optimizer "
                       f"offloaded and micro-batch 1; {gpu.id} has {gpu.memory_bytes / GIB:,.0f} GiB")}


def _fitting(res, mem, recompute: str, offload: str, sharding: str) -> dict:
    d = res.to_dict()
    band = d.get("band_80pct", {})
    p = d["best_plan"]
    return {
        "fits": True, "fine_tuning": res.estimate.plan.fine_tuning.label(), "recompute": recompute, "offload": offload,
        "sharding": sharding, "micro_batch": p["micro_batch"], "global_batch_sequences": p["global_batch"],
        "memory_per_gpu_gib": d["memory_per_gpu_gib"], "host_offload_gib": mem.host_bytes / GIB,
        "paged_optimizer_gib": mem.paged_optimizer_bytes / GIB,
        "trainable_params_per_gpu": mem.trainable_params,
        "tokens_per_s": d["tokens_per_s"], "step_time_s": d["step_time_s"], "time_s": d["time_s"], "days": d["days"],
        "gpu_hours": d["gpu_hours"], "usd_per_gpu_hour": d.get("usd_per_gpu_hour"), "cost_usd": d.get("cost_usd"),
        "energy_kwh": (d["energy_mwh"] * 1000.0) if d.get("energy_mwh") is not None else None,
        "band_80pct": {k: band.get(k) for k in ("tokens_per_s", "days", "gpu_hours", "cost_usd", "memory_per_gpu_gib",
                                                "regime", "memory_regime", "validated", "reason")},
    }


def plan_fine_tuning(model: str | ModelSpec, tokens: str | float, *, system: str | None = None, gpus: int | None = None,
                     seq_len: int | None = None, global_batch: int | None = None, lora_rank: int | None = None,
                     lora_targets: str | None = None, methods: tuple[str, ...] = METHODS,
                     usd_per_gpu_hour: float | None = None,
                     progress: Callable[[str, float], None] | None = None) -> FineTunePlanResult:
    """Compare fine-tuning methods and hardware for `tokens` (module docstring). `system` (with `gpus`,
    default its GPUs per node) replaces the hardware ladder; `lora_rank` / `lora_targets` apply to
    LoRA and QLoRA (defaults: PEFT's r 8 on q and v)."""
    positive(gpus, "gpus")
    positive(seq_len, "seq_len")
    positive(global_batch, "global_batch")
    n_tokens = count(tokens, "tokens")
    spec = resolve_model(model)
    for m in methods:
        if m not in METHODS:
            raise InputError(f"--methods: '{m}' is not one of {', '.join(METHODS)}", field="methods", allowed=", ".join(METHODS))
    if system is not None:
        sys_spec = resolve_system(system)
        hardware = ((sys_spec.id, gpus or sys_spec.gpus_per_node),)
    elif gpus is not None:
        hardware = tuple((s, g) for s, g in FINETUNE_HARDWARE if g == gpus) or (("h100-sxm5-80gb", gpus),)
    else:
        hardware = FINETUNE_HARDWARE
    seq = seq_len or default_seq_len(spec)
    # validate the LoRA options once, with the option names of the CLI
    from gpuplan.interfaces.api.fine_tuning import fine_tuning_spec

    fine_tuning_spec({"finetune": "lora", "lora_rank": lora_rank, "lora_targets": lora_targets})
    out = []
    total = len(hardware) * len(methods)
    for i, (sys_id, n) in enumerate(hardware):
        for j, method in enumerate(methods):
            if progress is not None:
                progress(f"{method} on {n} x {sys_id}", (i * len(methods) + j) / total)
            out.append(_candidate(spec, sys_id, n, method, n_tokens, seq, global_batch, lora_rank, lora_targets,
                                  usd_per_gpu_hour))
    ft = fine_tuning_spec({"finetune": "lora", "lora_rank": lora_rank, "lora_targets": lora_targets})
    return FineTunePlanResult(spec.name, n_tokens, seq, {"rank": ft.rank, "targets": list(ft.targets)}, tuple(out))


__all__ = ["FINETUNE_HARDWARE", "FineTunePlanResult", "METHODS", "RELIEF_STEPS", "plan_fine_tuning"]
