"""Speed of the memory model: single evaluations and the inverse searches. Prints `name: value unit` last."""

import time

from gpuplan.catalog import get_gpu
from gpuplan.models import load_model
from gpuplan.layers import parameter_counts
from gpuplan.specs.plan import Sharding, TrainPlan
from gpuplan.workloads.training.fit import max_micro_batch, min_gpus
from gpuplan.workloads.training.memory import training_memory


def rate(fn, seconds=2.0):
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - start)


def main() -> None:
    gpu = get_gpu("h100-sxm5-80gb")
    llama70 = load_model("llama-3-70b")
    ds = load_model("deepseek-v3")
    plan = TrainPlan(tp=8, pp=4, dp=4, vpp=5, seq_len=4096, global_batch=64, sharding=Sharding.ZERO1)
    mem_rate = rate(lambda: training_memory(llama70, plan, gpu))
    ds_rate = rate(lambda: training_memory(ds, TrainPlan(tp=8, pp=8, dp=16, ep=16, seq_len=4096, sharding=Sharding.ZERO1), gpu))
    param_rate = rate(lambda: parameter_counts(ds))
    start = time.perf_counter()
    max_micro_batch(llama70, plan, gpu)
    batch_s = time.perf_counter() - start
    start = time.perf_counter()
    answer = min_gpus(llama70, TrainPlan(seq_len=4096, sharding=Sharding.ZERO1), gpu)
    min_gpus_s = time.perf_counter() - start
    print(f"min-gpus llama-3-70b: {answer.num_gpus} GPUs, {answer.layouts_tried} layouts")
    print(f"training_memory_llama70b_per_s: {mem_rate:.0f} evals/s")
    print(f"training_memory_deepseek_v3_per_s: {ds_rate:.0f} evals/s")
    print(f"parameter_counts_deepseek_v3_per_s: {param_rate:.0f} evals/s")
    print(f"max_micro_batch_llama70b: {batch_s * 1e3:.1f} ms")
    print(f"min_gpus_llama70b: {min_gpus_s * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
