"""Hypothetical hardware: the variant is the catalog spec with exactly the named figures changed,
the catalog is untouched, and a better part never gives a worse answer."""

from __future__ import annotations

import pytest

from gpuplan.catalog import load_catalog
from gpuplan.interfaces.sweep.evaluate import Context, evaluate_point
from gpuplan.interfaces.sweep.hardware import build_variant, catalog_hardware
from gpuplan.interfaces.sweep.spec import Variant


def test_variant_changes_only_what_it_names():
    base = catalog_hardware("dgx-h100")
    v = build_variant(Variant(name="x", base="dgx-h100", hbm_bandwidth_scale=2.0, memory_scale=1.5,
                              dense_flops_scale={"bf16": 2.0}, nics_per_node=16, nic_gbit_s=800.0))
    # H100 SXM5: 3,350 GB/s HBM3 and 80 GB (NVIDIA H100 datasheet; catalog h100-sxm5-80gb)
    assert base.gpu.memory_bandwidth_gbps == 3350.0
    assert v.gpu.memory_bandwidth_gbps == 6700.0
    assert v.gpu.memory_bytes == round(1.5 * base.gpu.memory_bytes)
    # dense BF16 989 TFLOP/s (datasheet) doubled; FP8 not named, unchanged
    assert v.gpu.peak_tflops["bf16"].dense == pytest.approx(2 * 989.4, rel=1e-3)
    assert v.gpu.peak_tflops["fp8"] == base.gpu.peak_tflops["fp8"]
    assert (v.system.nics_per_node, v.system.nic_gbit_s) == (16, 800.0)
    assert v.system.scaleup_domain_gpus == base.system.scaleup_domain_gpus == 8
    # the catalog still holds the datasheet figures
    assert load_catalog().gpu("h100-sxm5-80gb").memory_bandwidth_gbps == 3350.0


def test_wider_nvlink_domain_is_a_wider_node():
    v = build_variant(Variant(name="nvl16", base="dgx-h100", nvlink_domain_gpus=16))
    # DGX H100: 8 GPUs, 8 x 400 Gb/s NICs (one per GPU); a 16-GPU domain keeps one NIC per GPU
    assert (v.system.scaleup_domain_gpus, v.system.gpus_per_node, v.system.nics_per_node) == (16, 16, 16)
    assert v.system.scaleout_gbps_per_gpu == catalog_hardware("dgx-h100").system.scaleout_gbps_per_gpu == 50.0


@pytest.mark.parametrize("rate", [40.0])
def test_twice_the_hbm_bandwidth_never_serves_worse(rate):
    # Decode is bound by HBM bandwidth (weights and KV read every step): 2x bandwidth can only lower
    # each step's time, so the cheapest layout meeting the same objectives needs no more GPUs and
    # costs no more per token (same $/GPU-hour: the variant keeps the base's price).
    from gpuplan.models import load_model

    base = catalog_hardware("h100-sxm5-80gb")
    fast = build_variant(Variant(name="h100-hbm2x", base="h100-sxm5-80gb", hbm_bandwidth_scale=2.0))
    model = load_model("llama-3-8b")
    rows = []
    for hw in (base, fast):
        ctx = Context("serve", {"llama-3-8b": model}, {hw.name: hw}, serve={"ttft_ms": 2000.0, "tpot_ms": 50.0})
        rows.append(evaluate_point(ctx, {"point": 0, "model": "llama-3-8b", "hardware": hw.name, "seq_len": 2048,
                                         "rate": rate, "output_len": 256}))
    slow_row, fast_row = rows
    assert slow_row["status"] == fast_row["status"] == "ok"
    assert fast_row["num_gpus"] <= slow_row["num_gpus"]
    assert fast_row["usd_per_million_tokens"] <= slow_row["usd_per_million_tokens"]
    assert fast_row["replica_output_tokens_per_s"] / fast_row["tp"] >= slow_row["replica_output_tokens_per_s"] / slow_row["tp"] \
        or fast_row["num_gpus"] < slow_row["num_gpus"]
