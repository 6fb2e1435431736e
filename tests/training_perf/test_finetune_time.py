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
from gpuplan.workloads.training.offload import host_link_bytes_s, host_memory_bytes_s
from gpuplan.workloads.training.optimizer_states import step_bytes_per_element
from gpuplan.workloads.training.step.assembly import estimate_step_time
from gpuplan.workloads.training.step.compute import sustained_gemm_fraction
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext


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


def test_host_link_rates():
    # a GPU id as a system: the card's own PCIe 4.0 x16 slot, 32 GB/s per direction (catalog pcie4-x16,
    # A100 page 'PCIe Gen4: 64 GB/s' bidirectional) x 25/32 = SYSTEMS.md's 'about 25 GB/s per direction'
    c = load_catalog()
    assert host_link_bytes_s(c.system("a100-sxm4-80gb")) == pytest.approx(25e9)
    # DGX H100: PCIe 5.0 x16, 64 GB/s per direction (H100 page 'PCIe Gen5: 128 GB/s') x 25/32 = 50 GB/s
    assert host_link_bytes_s(c.system("dgx-h100")) == pytest.approx(50e9)
    # GB200 NVL72: NVLink-C2C 900 GB/s bidirectional per Grace = 450 per direction, shared by 2 GPUs
    # = 225 GB/s per GPU per direction, x 25/32 = 175.78 GB/s: 3.5x the DGX H100's PCIe
    assert host_link_bytes_s(c.system("gb200-nvl72")) == pytest.approx(225e9 * 25 / 32)
    # host memory of the CPU optimizer: DGX H100 = 2 x Xeon 8480C x 8 channels x 4800 MT/s x 8 B = 614.4
    # GB/s x 0.8 (STREAM-class); a PCIe box names no CPU: the workstation knob (51.2 GB/s x 0.8 = 40 GB/s)
    assert host_memory_bytes_s(c.system("dgx-h100")) == pytest.approx(614.4e9 * 0.8)
    assert host_memory_bytes_s(c.system("a100-sxm4-80gb")) == pytest.approx(40e9)


def test_offload_runs_over_the_systems_host_link():
    # the same ZeRO-Offload step on one GPU of a DGX H100 (PCIe 5.0, 64 GB/s per direction) and of a GB200
    # NVL72 (NVLink-C2C, 225 GB/s per GPU per direction): the bf16 weights back to the GPU take 64/225 as
    # long; the CPU step: 30 B per element over 2 x 307.2 GB/s x 0.8 (DGX) vs 36 x 512 GB/s x 0.8 (rack)
    c = load_catalog()
    m = load_model("llama-2-7b")
    plan = TrainPlan(micro_batch=1, global_batch=1, seq_len=2048, sharding=Sharding.ZERO2,
                     fine_tuning=FineTuning(offload="optimizer"))
    n = 6_738_415_616
    steps = {}
    for sid in ("dgx-h100", "gb200-nvl72"):
        system = c.system(sid)
        steps[sid] = estimate_step_time(m, system, plan, c.gpu(system.gpu)).breakdown_s["optimizer_s"]
    h100 = n * 30 / (614.4e9 * 0.8) + n * 2 / (64e9 * 25 / 32)
    gb200 = n * 30 / (36 * 512e9 * 0.8) + n * 2 / (225e9 * 25 / 32)
    assert steps["dgx-h100"] >= h100 and steps["gb200-nvl72"] >= gb200
    # the fp32 grads out (n x 4 B) are the rest, hidden at most fully behind the backward
    assert steps["dgx-h100"] <= h100 + n * 4 / (64e9 * 25 / 32) + 1e-9
    assert steps["gb200-nvl72"] <= gb200 + n * 4 / (225e9 * 25 / 32) + 1e-9


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
    # bf16 weights back over PCIe Gen4 x16 (32 GB/s per direction); fp32 grads out overlap the backward
    weights_in = n * 2 / 32e9
    grads_out = n * 4 / 32e9
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
    rate = 32e9 * 0.3  # PCIe Gen4 x16, 32 GB/s per direction
    # the NF4 base (3,340,772,224 B) + bf16 norms, embedding and head (524,820,480 B) + bf16 q, v adapters
    # (2 x 4,194,304 B), in before the forward and before the backward; fp32 adapter grads out
    copies = (2 * (3_340_772_224 + 524_820_480 + 2 * 4_194_304) + 4 * 4_194_304) / rate
    assert b["offload_s"] == pytest.approx(copies - (b["compute_s"] + b["recompute_s"]), rel=2e-3)


def test_fsdp_gathers_on_a_geforce_pair_move_at_the_staged_card_to_card_rate():
    # two RTX 3090 without P2P: NCCL stages every byte through the host bridge, 3.0225 GB/s per rank and
    # direction (level1techs t/185531: mean bidirectional 6.045 GB/s, half each way), below PCIe 4.0's 25.6
    # and the workstation's 40 / (2 x 2) = 10 GB/s host-memory bound
    c = load_catalog()
    system = c.system("rtx-3090")
    gpu = c.gpu(system.gpu)
    m = load_model("llama-2-7b")
    ft = FineTuning(method="lora", lora_rank=64, lora_targets="q_proj+k_proj+v_proj+gate_proj+up_proj+down_proj")
    plan = TrainPlan(dp=2, micro_batch=1, global_batch=2, seq_len=512, sharding=Sharding.FSDP, fine_tuning=ft,
                     recompute=Recompute.FULL)
    st = estimate_step_time(m, system, plan, gpu)
    b = st.breakdown_s
    # FULL_SHARD gathers the whole bf16 base twice per micro-batch (forward, backward): 6,738,415,616 x 2 B,
    # of which each rank receives half, at 3.0225e9 B/s: 2 x 6.738e9 / 3.0225e9 = 4.459 s; hidden at most
    # behind the micro-batch's compute (forward, recompute, backward)
    gathers = 2 * 6_738_415_616 * 2 / 2 / 3.0225e9
    compute = b["compute_s"] + b["recompute_s"]
    assert compute < gathers  # a 512-token micro-batch: the step waits on the bridge
    assert b["dp_comm_s"] >= gathers - compute
    assert st.step_time_s >= gathers
    # with a bridge as fast as the host-memory bound (10 GB/s), the same gathers take 1.348 s: a slower step
    with knobs.overridden({"collectives.staged_card_to_card_bytes_s": 10e9}):
        fast = estimate_step_time(m, system, plan, gpu)
    assert fast.breakdown_s["dp_comm_s"] < b["dp_comm_s"] - (gathers - 2 * 6_738_415_616 / 10e9) * 0.9
