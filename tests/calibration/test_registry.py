"""The knob registry: scoped overrides, completeness of `knob_catalog.load_all`, overrides reaching
the operators (and the collective caches), and `gpuplan calibrate knobs`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpuplan import knobs
from gpuplan.cli.main import app
from gpuplan.interfaces.fitting.knob_catalog import KNOB_MODULES, load_all

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuplan"
REQUIRED_KEYS = {"name", "unit", "default", "value", "source", "low", "high", "scales", "fitted_on"}


def test_overridden_restores_values_after_an_exception():
    load_all()
    name = "efficiency.hbm"
    gen0 = knobs.generation()
    with pytest.raises(RuntimeError):
        with knobs.overridden({name: 0.6}):
            assert knobs.value(name) == 0.6
            with knobs.overridden({name: 0.7}):  # innermost wins
                assert knobs.value(name) == 0.7
                raise RuntimeError("boom")
    assert knobs.value(name) == 0.80 and knobs.active_overrides() == {}
    assert knobs.generation() != gen0  # caches keyed on the generation see that something changed
    assert knobs.overrides_key() == ()


def test_overrides_are_checked_against_the_physical_range():
    load_all()
    with pytest.raises(ValueError, match="efficiency.hbm"):
        with knobs.overridden({"efficiency.hbm": 1.5}):
            pass
    with pytest.raises(KeyError):
        with knobs.overridden({"efficiency.no_such_knob": 0.5}):
            pass


def test_load_all_imports_every_module_that_declares_knobs():
    declaring = set()
    for path in SRC.rglob("*.py"):
        if re.search(r"(=|:|return)\s*knobs\.register\(", path.read_text(encoding="utf-8")):  # code, not prose
            declaring.add(".".join(("gpuplan",) + path.relative_to(SRC).with_suffix("").parts))
    assert declaring == set(KNOB_MODULES)


def test_every_knob_is_documented_and_in_range():
    for k in load_all().values():
        assert re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_\-]+)+", k.name), k.name
        assert k.unit and k.source and k.scales, k.name
        assert k.low <= k.default <= k.high, k.name


def test_overrides_reach_the_operators():
    from gpuplan.catalog import load_catalog
    from gpuplan.primitives.collectives import collective_time
    from gpuplan.primitives.efficiency import matmul_ceiling
    from gpuplan.primitives.op_cost import memory_bandwidth_bytes_s

    cat = load_catalog()
    h100, dgx = cat.gpu("h100-sxm5-80gb"), cat.system("dgx-h100")
    # H100 SXM 3350 GB/s x 0.80 (aiconfigurator) = 2680 GB/s; x 0.9 under the override = 3015 GB/s
    assert memory_bandwidth_bytes_s(h100) == pytest.approx(3350e9 * 0.80)
    with knobs.overridden({"efficiency.hbm": 0.9}):
        assert memory_bandwidth_bytes_s(h100) == pytest.approx(3350e9 * 0.90)
    # mamf-finder H100 SXM bf16 794.5 / 989 = 0.8033; an fp6 GEMM (no measurement) = bf16 x fp8/bf16 ratio
    assert matmul_ceiling(h100, "bf16") == pytest.approx(794.5 / 989)
    with knobs.overridden({"efficiency.matmul_ceiling.h100-sxm5-80gb.bf16": 0.7,
                           "efficiency.fp8_over_bf16_ceiling": 0.5}):
        assert matmul_ceiling(h100, "bf16") == 0.7 and matmul_ceiling(h100, "fp6") == pytest.approx(0.35)
    # ring all_reduce of 1 GiB on 8 H100 (tests/collectives: (bus + fill) / (450 x 0.80 GB/s) + 56 us);
    # the memoised collective must see the NVLink efficiency override: bandwidth term doubles at 0.40
    fill = 2**19 * 32  # one 512 KiB NCCL step (NCCL_BUFFSIZE / NCCL_STEPS) x 32 channels
    base = collective_time("all_reduce", 2**30, dgx, 8, "ring").time_s
    assert base == pytest.approx((1_879_048_192 + fill) / 360e9 + 56e-6, rel=1e-9)
    with knobs.overridden({"collectives.nvlink_efficiency": 0.40}):
        slow = collective_time("all_reduce", 2**30, dgx, 8, "ring").time_s
    assert slow == pytest.approx((1_879_048_192 + fill) / 180e9 + 56e-6, rel=1e-9)
    assert collective_time("all_reduce", 2**30, dgx, 8, "ring").time_s == base


def test_calibrate_knobs_json_lists_every_knob(runner):
    res = runner.invoke(app, ["calibrate", "knobs", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    registry = load_all()
    assert data["count"] == len(registry) == len(data["knobs"])
    assert [k["name"] for k in data["knobs"]] == sorted(registry)
    for k in data["knobs"]:
        assert REQUIRED_KEYS <= set(k), k["name"]
    by_name = {k["name"]: k for k in data["knobs"]}
    hbm = by_name["efficiency.hbm"]
    assert hbm["default"] == 0.80 and "aiconfigurator" in hbm["source"] and hbm["fitted_on"] == []
    # mamf-finder A100 SXM bf16: 271.2 of 312 TFLOP/s
    assert by_name["efficiency.matmul_ceiling.a100-sxm4-80gb.bf16"]["default"] == pytest.approx(271.2 / 312)
    assert by_name["training.sustained_gemm_fraction"]["fitted_on"] == ["meg21-t1", "korth-t5", "korth-abs"]
    fitted = json.loads(runner.invoke(app, ["calibrate", "knobs", "--json", "--fitted"]).stdout)
    assert fitted["count"] == data["fitted_count"] == sum(1 for k in data["knobs"] if k["fitted_on"])
    assert {"training.sustained_gemm_fraction", "collectives.nvlink_efficiency"} <= {k["name"] for k in fitted["knobs"]}


def test_calibrate_knobs_text(runner):
    res = runner.invoke(app, ["calibrate", "knobs", "--fitted"])
    assert res.exit_code == 0, res.output
    assert "training.sustained_gemm_fraction = 0.85 fraction" in res.output
    assert "fitted on: meg21-t1, korth-t5, korth-abs" in res.output
