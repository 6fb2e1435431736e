"""Plans on the hardware of issue 29: AMD platforms across nodes, PCIe boxes with tensor parallelism,
Blackwell Ultra systems and TPU pods (each through gpuplan.api.train, the path the CLI runs)."""

from __future__ import annotations

import pytest

from gpuplan import api


def _plan(result):
    d = result.to_dict()
    p = d["best_plan"]
    return d, p


def test_mi355x_platform_multi_node():
    # 64 GPUs = 8 nodes of 8 (mi355x-platform): a plan exists only with the 8 x 400G NICs per node
    d, p = _plan(api.train("llama-3-70b", "mi355x-platform", 64))
    assert d["num_gpus"] == 64 and p["tp"] * p["pp"] * p["dp"] * p["cp"] == 64
    assert d["step_time_s"] > 0 and d["step_breakdown_s"]["compute_s"] > 0


def test_tensor_parallel_across_pcie_cards():
    # two RTX 4090s: TP over PCIe 4.0 (no NVLink) is allowed and costs time
    d, p = _plan(api.train("gpt3-1.3b", "rtx-4090", 2, tp=2))
    assert (p["tp"], p["dp"]) == (2, 1)
    assert d["step_breakdown_s"]["tp_comm_s"] > 0
    # the same plan on an H100 PCIe box (Gen5 x16: 64 GB/s per direction, twice Gen4's 32) communicates faster
    d5, _ = _plan(api.train("gpt3-1.3b", "h100-pcie-80gb", 2, tp=2))
    assert d5["step_breakdown_s"]["tp_comm_s"] < d["step_breakdown_s"]["tp_comm_s"]


def test_torchtitan_without_cp_needs_no_nics():
    # a CP-free torchtitan plan on a box without NICs: the context-parallel term must not lay out a
    # stand-in 2-rank group one rank per node (before: "2 GPUs span 2 scale-up domains ... has no NICs")
    d, p = _plan(api.train("gpt3-125m", "rtx-a6000", 2, framework="torchtitan"))
    assert p["cp"] == 1 and d["step_breakdown_s"]["cp_comm_s"] == 0.0


@pytest.mark.parametrize("system, gpus", [("gb300-nvl72", 144), ("dgx-b300", 64), ("tpu-v6e-pod", 256),
                                          ("tpu-v5p-pod", 128)])
def test_blackwell_ultra_and_tpu_pods(system, gpus):
    d, p = _plan(api.train("llama-3-70b", system, gpus))
    assert d["num_gpus"] == gpus and p["tp"] * p["pp"] * p["dp"] * p["cp"] == gpus
    assert 0 < d["mfu_pct"] < 100
