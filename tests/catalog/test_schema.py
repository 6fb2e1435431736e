"""Every built-in catalog entry: sourced, dense <= sparse, units plausible, references resolve."""

from __future__ import annotations

import re
import tomllib
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from gpuplan.catalog import DATA_DIR
from gpuplan.specs import DTYPES, PeakTflops
from gpuplan.units import GIB


def _figures(spec) -> list[str]:
    """Names of the non-null numeric fields of an entry (the figures that need a source)."""
    return [
        name for name, value in spec
        if name not in {"id", "name", "vendor", "notes", "sources", "kind"}
        and value is not None and not isinstance(value, (str, bool))
    ]


def _all_entries(catalog):
    return [*catalog.gpus.values(), *catalog.systems.values(), *catalog.interconnects.values(), *catalog.clouds.values()]


def test_catalog_is_not_trivially_small(catalog):
    # issue #2: every part of reference/gpus-research.csv (26 rows) plus H800, H100 96GB, RTX PRO 6000
    assert len(catalog.gpus) >= 29
    assert len(catalog.interconnects) >= 25
    assert len(catalog.clouds) >= 10


def test_every_figure_has_a_source(catalog):
    for spec in _all_entries(catalog):
        missing = [f for f in _figures(spec) if f not in spec.sources and "default" not in spec.sources]
        assert not missing, f"{spec.id}: {missing}"
        assert all(isinstance(v, str) and len(v) > 10 for v in spec.sources.values()), spec.id


def test_every_cited_source_key_is_registered():
    registry = tomllib.loads((DATA_DIR / "sources.toml").read_text())["sources"]
    text = "".join(p.read_text() for p in DATA_DIR.glob("*.toml") if p.name != "sources.toml")
    cited = set(re.findall(r"\bS_[A-Z0-9_]+", text))
    assert cited - set(registry) == set()
    assert all("title" in v for v in registry.values())


def test_ids_are_lowercase_with_dashes(catalog):
    for spec in _all_entries(catalog):
        assert re.fullmatch(r"[a-z0-9][a-z0-9.\-]*", spec.id), spec.id


def test_dense_never_exceeds_sparse_and_dtypes_known(catalog):
    for gpu in catalog.gpus.values():
        assert set(gpu.peak_tflops) <= set(DTYPES)
        for dtype, peak in gpu.peak_tflops.items():
            assert peak.dense > 0
            if peak.sparse is None:
                continue
            if "blackwell ultra" in gpu.architecture.lower() and dtype == "fp4":
                # Blackwell Ultra raised dense NVFP4 only: NVIDIA's HGX page prints HGX B300 FP4
                # 144 sparse | 108 dense PF (1.33x), GB300 NVL72 1,440 | 1,080 PF (1.33x)
                assert abs(peak.sparse / peak.dense - 144 / 108) < 0.01, (gpu.id, dtype)
                continue
            # 2:4 sparsity doubles the tensor rate; L40S FP16/BF16 is printed 362.05 | 733 (2.02x)
            assert 1.99 <= peak.sparse / peak.dense <= 2.03, (gpu.id, dtype)


def test_gpu_units_are_plausible(catalog):
    for gpu in catalog.gpus.values():
        assert 4 * GIB <= gpu.memory_bytes <= 300 * GIB, gpu.id
        assert 50 <= gpu.memory_bandwidth_gbps <= 20_000, gpu.id
        if gpu.tdp_w is not None:
            assert 5 <= gpu.tdp_w <= 1_500, gpu.id
        if gpu.scaleup_bandwidth_gbps is not None:
            assert 10 <= gpu.scaleup_bandwidth_gbps <= 2_000, gpu.id
        if gpu.l2_bytes is not None:
            assert 1 * 2**20 <= gpu.l2_bytes <= 256 * 2**20, gpu.id
        if gpu.smem_per_sm_bytes is not None:
            assert 32 * 1024 <= gpu.smem_per_sm_bytes <= 256 * 1024, gpu.id
        # no accelerator in the catalog exceeds 25 dense PFLOP/s in any dtype
        assert all(p.dense < 25_000 for p in gpu.peak_tflops.values()), gpu.id
        if gpu.scaleup_link is not None:
            assert gpu.scaleup_link in catalog.interconnects, gpu.id


def test_only_tpus_lack_a_tdp(catalog):
    # Google publishes no chip power; TPU7x has one from its pod's ~10 MW (Hot Chips 2025, SECONDARY)
    assert sorted(g.id for g in catalog.gpus.values() if g.tdp_w is None) == ["tpu-v5e", "tpu-v5p", "tpu-v6e"]


def test_interconnects_full_duplex(catalog):
    for link in catalog.interconnects.values():
        # every link in the catalog is full-duplex: bidirectional = 2 x per direction
        assert link.bidirectional_gbps == pytest.approx(2 * link.per_direction_gbps), link.id
        if link.line_rate_gbit_s is not None and link.kind in {"infiniband", "ethernet", "efa", "omnipath"}:
            assert link.per_direction_gbps == pytest.approx(link.line_rate_gbit_s / 8), link.id


def test_systems_are_consistent_with_their_gpus(catalog):
    for system in catalog.systems.values():
        gpu = catalog.gpu(system.gpu)
        assert system.scaleup_domain_gpus >= system.gpus_per_node or system.scaleup_domain_gpus == 1, system.id
        if system.scaleup_bandwidth_gbps is not None and gpu.scaleup_bandwidth_gbps is not None:
            # a system may wire less than the chip can drive, never more
            assert system.scaleup_bandwidth_gbps <= gpu.scaleup_bandwidth_gbps, system.id
        if system.nics_per_node:
            assert system.nic_gbit_s is not None and system.nic_kind != "none", system.id
            assert 1 <= system.scaleout_gbps_per_gpu <= 200, system.id
        if system.host_memory_bytes is not None:
            assert 256 * GIB <= system.host_memory_bytes <= 20 * 10**12, system.id


def test_cloud_prices_are_dated_and_plausible(catalog):
    for price in catalog.clouds.values():
        read_on = date.fromisoformat(price.date)
        assert date(2023, 1, 1) <= read_on <= date(2027, 1, 1), price.id
        assert 0.1 <= price.usd_per_gpu_hour <= 30, price.id
        assert price.gpu in catalog.gpus


@given(dense=st.floats(0.1, 1e5), factor=st.floats(0.01, 0.999))
def test_sparse_below_dense_is_rejected(dense, factor):
    with pytest.raises(ValidationError, match="below dense"):
        PeakTflops(dense=dense, sparse=dense * factor)


@given(dense=st.floats(0.1, 1e5), factor=st.floats(1.0, 4.0))
def test_sparse_at_or_above_dense_is_accepted(dense, factor):
    assert PeakTflops(dense=dense, sparse=dense * factor).sparse >= dense
