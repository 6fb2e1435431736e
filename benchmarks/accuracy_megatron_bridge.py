"""Out-of-sample accuracy check: NVIDIA Megatron-Bridge pre-training tables.

Source: NVIDIA-NeMo/Megatron-Bridge `docs/performance-summary.md`, sections "25.09 NeMo Container"
and "25.11 NeMo Container" (tokens/s/GPU, as published). These rows are not in
../shared/validation and no constant of the model was set from them; this script only reports
how far the model is from them. Each run is modelled as the recipe lists it: FP8 (current
scaling), sequence parallelism and TP communication overlap where tp > 1, no recompute, the
distributed optimizer (ZeRO-1) or FSDP (ZeRO-3) as the FSDP column says.

Prints one line per row and, last, `dense_mape_pct` and `moe_mape_pct`.
"""

from __future__ import annotations

import numpy as np

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.specs import Precision, Recompute, Sharding, TrainPlan
from gpuplan.workloads.training.step.assembly import estimate_step_time

# (row, model, system, gpus, global batch, micro batch, seq, fsdp, tp, pp, cp, vpp, ep, measured tok/s/GPU)
ROWS = [
    ("25.11 H100 Llama3 8B", "llama-3-8b", "dgx-h100", 8, 128, 1, 8192, 1, 1, 1, 1, 1, 1, 14451),
    ("25.11 H100 Llama3 70B", "llama-3-70b", "dgx-h100", 64, 128, 1, 8192, 0, 4, 8, 1, 5, 1, 1602),
    ("25.11 H100 Llama3.1 405B", "llama-3.1-405b", "dgx-h100", 1024, 512, 1, 8192, 0, 8, 8, 2, 8, 1, 292),
    ("25.09 H100 Llama3 8B", "llama-3-8b", "dgx-h100", 8, 128, 1, 8192, 1, 1, 1, 1, 1, 1, 14079),
    ("25.09 H100 Llama3 70B", "llama-3-70b", "dgx-h100", 64, 128, 1, 8192, 0, 4, 8, 1, 5, 1, 1619),
    ("25.09 H100 Llama3.1 405B", "llama-3.1-405b", "dgx-h100", 1024, 512, 1, 8192, 0, 8, 8, 2, 8, 1, 302),
    ("25.11 B200 Llama3 8B", "llama-3-8b", "dgx-b200", 8, 128, 2, 8192, 0, 1, 1, 1, 1, 1, 30624),
    ("25.11 B200 Llama3.1 405B", "llama-3.1-405b", "dgx-b200", 128, 64, 1, 8192, 0, 4, 8, 2, 8, 1, 661),
    ("25.11 GB200 Llama3 8B", "llama-3-8b", "gb200-nvl72", 8, 128, 2, 8192, 0, 1, 1, 1, 1, 1, 31508),
    ("25.11 GB200 Llama3 70B", "llama-3-70b", "gb200-nvl72", 64, 128, 2, 8192, 1, 1, 1, 1, 1, 1, 4312),
    ("25.11 GB200 Llama3.1 405B", "llama-3.1-405b", "gb200-nvl72", 128, 64, 1, 8192, 1, 2, 1, 1, 1, 1, 706),
    ("25.09 H100 DeepSeek-V3", "deepseek-v3", "dgx-h100", 1024, 8192, 1, 4096, 0, 2, 8, 1, 4, 64, 1297),
    ("25.09 H100 Qwen3 30B-A3B", "qwen3-30b-a3b", "dgx-h100", 16, 512, 2, 4096, 0, 1, 2, 1, 24, 8, 10494),
    ("25.09 H100 Qwen3 235B-A22B", "qwen3-235b-a22b", "dgx-h100", 256, 2048, 1, 4096, 0, 2, 8, 1, 4, 32, 1204),
    ("25.11 B200 DeepSeek-V3", "deepseek-v3", "dgx-b200", 256, 2048, 1, 4096, 0, 1, 16, 1, 1, 8, 2139),
    ("25.11 B200 Qwen3 30B-A3B", "qwen3-30b-a3b", "dgx-b200", 8, 512, 1, 4096, 0, 1, 1, 1, 1, 8, 9299),
    ("25.11 B200 Qwen3 235B-A22B", "qwen3-235b-a22b", "dgx-b200", 64, 1024, 1, 4096, 0, 1, 8, 1, 2, 8, 3269),
    ("25.11 GB200 DeepSeek-V3", "deepseek-v3", "gb200-nvl72", 256, 2048, 1, 4096, 0, 1, 4, 1, 4, 64, 3653),
    ("25.11 GB200 Qwen3 30B-A3B", "qwen3-30b-a3b", "gb200-nvl72", 8, 512, 4, 4096, 0, 1, 1, 1, 1, 8, 23766),
    ("25.11 GB200 Qwen3 235B-A22B", "qwen3-235b-a22b", "gb200-nvl72", 64, 1024, 1, 4096, 0, 2, 1, 1, 1, 64, 4366),
]


def main() -> None:
    catalog = load_catalog()
    errors: dict[bool, list[float]] = {False: [], True: []}
    for name, model_id, system_id, gpus, gbs, mbs, seq, fsdp, tp, pp, cp, vpp, ep, measured in ROWS:
        model = load_model(model_id)
        system = catalog.system(system_id)
        plan = TrainPlan(
            tp=tp, pp=pp, dp=gpus // (tp * pp * cp), cp=cp, ep=ep, vpp=vpp, micro_batch=mbs, global_batch=gbs,
            seq_len=seq, recompute=Recompute.NONE, sequence_parallel=tp > 1, tp_comm_overlap=tp > 1,
            precision=Precision.FP8, sharding=Sharding.ZERO3 if fsdp else Sharding.ZERO1,
        )
        st = estimate_step_time(model, system, plan, catalog.gpu(system.gpu))
        err = 100.0 * (st.tokens_per_s_per_gpu - measured) / measured
        errors[model.moe is not None].append(abs(err))
        print(f"{name:30s} measured {measured:7d}  predicted {st.tokens_per_s_per_gpu:9.0f} tokens/s/GPU  error {err:+6.1f}%")
    print(f"dense_mape_pct: {np.mean(errors[False]):.1f} % ({len(errors[False])} rows)")
    print(f"moe_mape_pct: {np.mean(errors[True]):.1f} % ({len(errors[True])} rows)")


if __name__ == "__main__":
    main()
