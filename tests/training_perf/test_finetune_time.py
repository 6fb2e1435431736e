"""Fine-tuning step time: frozen-base backward, dequantisation, optimizer bytes, CPU optimizer and
offload traffic. Expected values derived by hand (or from the GEMM primitive for one shape)."""

from __future__ import annotations

import pytest

from gpuplan import knobs
from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.primitives.op_cost import gemm_time_array, memory_bandwidth_bytes_s
from gpuplan.specs import Recompute, Sharding, TrainPlan
from gpuplan.specs.finetune import FineTuning, Optimizer
from gpuplan.workloads.training.finetune_time import dequantize_seconds
from gpuplan.workloads.training.offload import pcie_bytes_s
from gpuplan.workloads.training.optimizer_states import step_bytes_per_element
from gpuplan.workloads.training.step_time import PlanAxes, StepContext, estimate_step_time, sustained_gemm_fraction


@pytest.fixture(scope="module")
def a100():
    c = load_catalog()
    system = c.system("a100-sxm4-80gb")
    return system, c.gpu(system.gpu)


def test_optimizer_step_bytes():
    # AdamW, fp32 master beside bf16 weights, fp32 grads: grad 4 + master read/write 8 + bf16 copy 2 + m, v 16 = 30
    # (step_time.ADAM_BYTES_PER_PARAM of ordinary training)
    assert step_bytes_per_element(Optimizer.ADAMW, 2.0, 4.0, 4.0, True) == 30.0
    # pure bf16 AdamW: grad 2 + weight read/write 4 + bf16 m, v read/write 8 = 14
    assert step_bytes_per_element(Optimizer.ADAMW, 2.0, 2.0, 2.0, False) == 14.0
    # 8-bit: the codes read and written 4 x 1 B instead of 16
    assert step_bytes_per_element(Optimizer.ADAMW_8BIT, 2.0, 4.0, 4.0, True) == 18.0


def test_pcie_gen4_rate():
    # 16 lanes x 16 GT/s x 128/130 / 8 = 31.51 GB/s per direction x (25 / 31.5)
    gpu = load_catalog().gpu("a100-sxm4-80gb")
    assert pcie_bytes_s(gpu) == pytest.approx(16 * 16 * 128 / 130 / 8 * 1e9 * 25 / 31.5)


def test_nf4_dequantisation_of_a_llama2_7b_layer(a100):
    system, gpu = a100
    m = load_model("llama-2-7b")
    ctx = StepContext.build(m, system, gpu, 2048, fine_tuning=FineTuning(method="qlora"))
    g = PlanAxes.build(ctx, 1, 1, 1, 1, 1, 1, 1, 1, 0, False, 0)
    # stored NF4-dq bytes of the layer 104,399,132 (tests/training_memory) + bf16 written 2 x 202,375,168 elements
    assert dequantize_seconds(ctx, g) == pytest.approx((104_399_132 + 2 * 202_375_168) / memory_bandwidth_bytes_s(gpu))
    bf16 = StepContext.build(m, system, gpu, 2048, fine_tuning=FineTuning(method="lora"))
    assert dequantize_seconds(bf16, g) == 0.0


def test_frozen_base_drops_the_weight_gradient_gemms(a100):
    system, gpu = a100
    m = load_model("llama-2-7b")
    plan = TrainPlan(micro_batch=1, global_batch=1, seq_len=2048)
    full = estimate_step_time(m, system, plan, gpu).breakdown_s
    # rank 1 on the o_proj alone, bf16 base (no dequantisation)
    tiny = FineTuning(method="lora", lora_rank=1, lora_targets="o_proj")
    lora = estimate_step_time(m, system, plan.model_copy(update={"fine_tuning": tiny}), gpu).breakdown_s
    t, h, f, V = 2048, 4096, 11008, 32000
    gemm = lambda m_, n, k: float(gemm_time_array(gpu, m_, n, k, "bf16")) / sustained_gemm_fraction(gpu)  # noqa: E731
    # per layer the weight gradients of qkv (h -> 3h), out (h -> h), fc1 (h -> 2f), fc2 (f -> h); plus the head's (h -> V)
    saved = 32 * (gemm(t, 3 * h, h) + gemm(t, h, h) + gemm(t, 2 * f, h) + gemm(t, h, f)) + gemm(t, V, h)
    # the adapter per layer: x A^T (t x 1 x h) and (x A^T) B^T (t x h x 1) forward, twice that backward; elementwise
    # forward scale + add 5 x 2 B per output, backward the scale 2 x 2 B per output and the input-gradient sum 3 x 2 B
    adapter = 3 * (gemm(t, 1, h) + gemm(t, h, 1)) + t * (10 * h + 4 * h + 6 * h) / memory_bandwidth_bytes_s(gpu)
    assert full["compute_s"] - lora["compute_s"] == pytest.approx(saved - 32 * adapter, rel=1e-9)
    assert lora["optimizer_s"] < full["optimizer_s"] / 1000  # 131,072 trainable elements vs 6.7e9


def test_cpu_optimizer_and_pcie_of_zero_offload(a100):
    system, gpu = a100
    m = load_model("llama-2-7b")
    plan = TrainPlan(micro_batch=1, global_batch=1, seq_len=2048, sharding=Sharding.ZERO2,
                     fine_tuning=FineTuning(offload="optimizer"))
    with knobs.overridden({"training.offload.host_memory_bytes_s": 100e9, "training.offload.pcie_efficiency": 1.0}):
        st = estimate_step_time(m, system, plan, gpu)
    n = 6_738_415_616
    # CPU AdamW with fp32 states and master, fp32 grads: 30 B per element over 100 GB/s (one GPU on the host)
    cpu = n * 30 / 100e9
    # bf16 weights back over PCIe Gen4 x16 (31.51 GB/s); fp32 grads out overlap the backward
    weights_in = n * 2 / (16 * 16 * 128 / 130 / 8 * 1e9)
    grads_out = n * 4 / (16 * 16 * 128 / 130 / 8 * 1e9)
    backward = st.breakdown_s["compute_s"] * 2 / 3  # at least the GEMM share of the backward hides the grads
    assert cpu + weights_in <= st.breakdown_s["optimizer_s"] <= cpu + weights_in + max(0.0, grads_out - 0.5 * backward)


def test_offloaded_parameters_are_copied_in_twice_per_micro_batch(a100):
    system, gpu = a100
    m = load_model("llama-2-7b")
    ft = FineTuning(method="qlora", lora_targets="qv", offload="params")
    plan = TrainPlan(micro_batch=1, global_batch=1, seq_len=128, sharding=Sharding.FSDP, fine_tuning=ft,
                     recompute=Recompute.FULL)
    with knobs.overridden({"training.offload.pcie_efficiency": 0.3}):
        st = estimate_step_time(m, system, plan, gpu)
    b = st.breakdown_s
    rate = 16 * 16 * 128 / 130 / 8 * 1e9 * 0.3
    # the NF4 base (3,340,772,224 B) + bf16 norms, embedding and head (524,820,480 B) + bf16 q, v adapters
    # (2 x 4,194,304 B), in before the forward and before the backward; fp32 adapter grads out
    copies = (2 * (3_340_772_224 + 524_820_480 + 2 * 4_194_304) + 4 * 4_194_304) / rate
    assert b["offload_s"] == pytest.approx(copies - (b["compute_s"] + b["recompute_s"]), rel=2e-3)
