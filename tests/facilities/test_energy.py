"""The one power model (facilities.power), the run cost (facilities.run_cost) and the one set of
PUE / grid / $/kWh assumptions, against hand derivations. Catalog figures used below:
DGX H100 system_power_w 10,200 with 8 x H100 SXM at tdp_w 700 (NVIDIA DGX H100 user guide);
DGX A100 6,500 with 8 x A100 SXM at 400 W. Default assumptions: gpu_idle_power_fraction 0.10,
node_overhead_idle_fraction 0.50, storage 0.25 kW per node, switch 1,720 W, PUE 1.3,
0.39 kg CO2/kWh, $0.10/kWh."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from gpuplan.catalog import load_catalog
from gpuplan.errors import InputError
from gpuplan.facilities.assumptions import DEFAULT_ASSUMPTIONS
from gpuplan.facilities.power import energy, estimate_power, node_power_w, power_draw
from gpuplan.facilities.pricing import gpu_hour_price
from gpuplan.facilities.run_cost import (
    kwh_per_million_output_tokens, run_switches, serving_day_cost, training_run_cost,
)
from gpuplan.workloads.training.totals import TrainingEstimate


def _spec(system_id):
    cat = load_catalog()
    s = cat.system(system_id)
    return s, cat.gpu(s.gpu)


# ---- the model, by hand ----------------------------------------------------------------------------

def test_one_dgx_h100_for_10_hours_busy():
    # a = 1: GPU 700 x (0.1 + 0.9) = 700 W, x 8 = 5,600 W; overhead 10,200 - 5,600 = 4,600 W;
    # storage 250 W -> IT 10,450 W; x PUE 1.3 = 13,585 W; 10 h -> 135.85 kWh;
    # CO2 135.85 x 0.39 = 52.9815 kg; electricity 135.85 x 0.10 = $13.585
    p = power_draw(*_spec("dgx-h100"), 8, 1.0)
    assert (p.gpu_power_w, p.node_overhead_w, p.storage_power_w) == pytest.approx((700, 4600, 250))
    assert p.it_power_w == pytest.approx(10_450) and p.facility_power_w == pytest.approx(13_585)
    e = energy(p.facility_power_w, 10.0)
    assert (e.energy_kwh, e.co2_kg, e.electricity_usd) == pytest.approx((135.85, 52.9815, 13.585))


def test_one_dgx_h100_half_active():
    # a = 0.5: GPU 700 x (0.1 + 0.9 x 0.5) = 385 W, x 8 = 3,080 W; overhead 4,600 x (0.5 + 0.5 x 0.5) = 3,450 W;
    # + 250 W storage = 6,780 W IT; x 1.3 = 8,814 W; 10 h -> 88.14 kWh; x 0.39 = 34.3746 kg CO2
    p = power_draw(*_spec("dgx-h100"), 8, 0.5)
    assert p.it_power_w == pytest.approx(6_780) and p.facility_power_w == pytest.approx(8_814)
    assert energy(p.facility_power_w, 10.0).co2_kg == pytest.approx(34.3746)


def test_node_overhead_per_system_and_fallback():
    # nameplate (a = 1) is the catalog maximum: DGX A100 8 x 400 + (6,500 - 3,200) = 6,500 W
    assert node_power_w(*_spec("dgx-a100-80gb"), 1.0) == pytest.approx(6_500)
    assert node_power_w(*_spec("dgx-h100"), 1.0) == pytest.approx(10_200)
    # hgx-h100-roce has no catalog maximum: overhead = 8 x 700 x 0.82 = 4,592 W -> 10,192 W
    assert node_power_w(*_spec("hgx-h100-roce"), 1.0) == pytest.approx(10_192)
    # idle DGX H100: 8 x 70 + 4,600 x 0.5 = 2,860 W
    assert node_power_w(*_spec("dgx-h100"), 0.0) == pytest.approx(2_860)


def test_part_of_a_node_pays_its_share_of_the_node():
    # 4 GPUs of one DGX H100 at a = 1: 4 x 700 + 4/8 x 4,600 overhead + 4/8 x 250 storage = 5,225 W
    p = power_draw(*_spec("dgx-h100"), 4, 1.0)
    assert p.nodes == 1 and p.it_power_w == pytest.approx(5_225)


def _estimate(num_gpus, time_s, compute_s, step_s):
    step = SimpleNamespace(breakdown_s={"compute_s": compute_s, "recompute_s": 0.0}, step_time_s=step_s)
    return TrainingEstimate(model="m", system="dgx-h100", num_gpus=num_gpus, tokens=1.0, plan=None, step=step,
                            memory_per_gpu_gib=0.0, steps=1, time_s=time_s, days=time_s / 86400,
                            gpu_hours=num_gpus * time_s / 3600)


def test_training_run_cost_two_nodes_ten_hours():
    # 16 GPUs (2 DGX H100) for 10 h at activity 0.75 with one switch, $2/GPU-hour. Full activity draws
    # the measured loaded power, 0.76 x 10,200 = 7,752 W per node (facilities.power; Newkirk et al. 2025),
    # idle 2,860 W (test_node_overhead_per_system_and_fallback): a node at 0.75 draws
    # 2,860 + (7,752 - 2,860) x 0.75 = 6,529 W; x 2 = 13,058 W + storage 2 x 250 = 500 W + switch 1,720 W
    # -> IT 15,278 W; x 1.3 = 19,861.4 W; x 10 h = 198.614 kWh; CO2 x 0.39 = 77.45946 kg; electricity
    # $19.8614; rental 16 x 10 h x $2 = $320
    est = _estimate(16, 36_000.0, 0.75, 1.0)
    run = training_run_cost(est, *_spec("dgx-h100"), switches=1, usd_per_gpu_hour=2.0)
    assert run.power.activity_fraction == pytest.approx(0.75)
    assert run.power.it_power_w == pytest.approx(15_278)
    assert run.energy.energy_kwh == pytest.approx(198.614)
    assert run.energy.co2_kg == pytest.approx(77.45946)
    assert run.energy.electricity_usd == pytest.approx(19.8614)
    assert run.cost_usd == pytest.approx(320.0) and run.price.value == 2.0


def test_a_day_of_serving_on_one_gpu():
    # 1 H100 of a DGX H100 at busy activity 1.0, i.e. the measured loaded draw: 1/8 of 0.76 x 10,200 W
    # = 969 W + 1/8 x 250 W storage = 1,000.25 W IT; x 1.3 = 1,300.325 W; x 24 h = 31.2078 kWh;
    # x 0.39 = 12.171042 kg CO2; rental 24 x $3 = $72.
    # At 1,000 output tokens/s: 1.300325 kW / 3.6e6 tokens per hour x 1e6 = 0.36120 kWh per million tokens
    day = serving_day_cost(*_spec("dgx-h100"), 1, usd_per_gpu_hour=3.0)
    assert day.power.it_power_w == pytest.approx(1_000.25)
    assert (day.energy.energy_kwh, day.energy.co2_kg, day.cost_usd) == pytest.approx((31.2078, 12.171042, 72.0))
    assert kwh_per_million_output_tokens(day, 1000.0) == pytest.approx(1.300325 / 3.6)


def test_training_run_switches_default_to_the_fabric_of_its_nodes():
    # one node: no fabric; 128 DGX H100 (4 SUs): 32 leaf + 16 spine = 48 switches (H100 RA Table 4)
    s, g = _spec("dgx-h100")
    assert run_switches(s, g, 8) == 0
    assert run_switches(s, g, 1024) == 48


def test_pue_scales_every_energy_figure():
    # facility power = IT x PUE: PUE 1.5 vs 1.3 is x 1.5/1.3 for the cluster and for the run
    s, g = _spec("dgx-h100")
    a15 = DEFAULT_ASSUMPTIONS.with_overrides({"pue": 1.5})
    est = _estimate(16, 36_000.0, 0.75, 1.0)
    r13 = training_run_cost(est, s, g, switches=1, usd_per_gpu_hour=2.0)
    r15 = training_run_cost(est, s, g, switches=1, usd_per_gpu_hour=2.0, assumptions=a15)
    assert r15.energy.energy_kwh == pytest.approx(198.614 * 1.5 / 1.3)  # test_training_run_cost_two_nodes_ten_hours
    assert estimate_power(s, g, 4, 1, assumptions=a15).facility_power_kw == pytest.approx(43.52 * 1.5)
    assert r15.cost_usd == r13.cost_usd  # renting is priced per GPU-hour, not per kWh


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["dgx-h100", "dgx-a100-80gb", "dgx-b200", "hgx-h100-roce", "gb200-nvl72"]),
       st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.integers(1, 300))
def test_power_is_monotone_in_activity_and_bounded_by_nameplate(system_id, a1, a2, gpus):
    s, g = _spec(system_id)
    lo, hi = sorted((a1, a2))
    p_lo = power_draw(s, g, gpus, lo, include_storage=False)
    p_hi = power_draw(s, g, gpus, hi, include_storage=False)
    assert p_lo.it_power_w <= p_hi.it_power_w * (1 + 1e-12)
    nodes = math.ceil(gpus / s.gpus_per_node)
    assert p_hi.it_power_w <= nodes * node_power_w(s, g, 1.0) * (1 + 1e-12)
    assert p_hi.facility_power_w == pytest.approx(p_hi.it_power_w * DEFAULT_ASSUMPTIONS.pue)


@pytest.mark.parametrize("bad", [-0.1, 1.1, float("nan"), float("inf")])
def test_activity_out_of_range_is_input_error(bad):
    with pytest.raises(InputError, match="activity"):
        power_draw(*_spec("dgx-h100"), 8, bad)


# ---- assumptions ---------------------------------------------------------------------------------

@pytest.mark.parametrize("key,value", [("pue", -1.0), ("pue", 0.9), ("pue", float("nan")), ("pue", float("inf")),
                                       ("grid_kg_co2_per_kwh", -0.1), ("gpu_idle_power_fraction", 1.5),
                                       ("electricity_usd_per_kwh", float("nan"))])
def test_bad_assumption_values_name_the_key(key, value):
    with pytest.raises(InputError, match=key) as info:
        DEFAULT_ASSUMPTIONS.with_overrides({key: value})
    assert info.value.field == key and "\n" not in str(info.value)


def test_renamed_and_retired_assumption_keys():
    assert DEFAULT_ASSUMPTIONS.with_overrides({"busy_power_fraction": 0.5}).busy_activity_fraction == 0.5
    with pytest.raises(InputError, match="no longer an assumption"):
        DEFAULT_ASSUMPTIONS.with_overrides({"idle_power_fraction": 0.3})


# ---- pricing ---------------------------------------------------------------------------------------

def test_gpu_hour_price_order():
    cat = load_catalog()
    h100 = cat.gpu("h100-sxm5-80gb")
    assert gpu_hour_price(h100, 1.5).value == 1.5  # given wins
    cheapest = cat.cloud_prices("h100-sxm5-80gb")[0].usd_per_gpu_hour  # catalog: sorted cheapest first
    assert gpu_hour_price(h100).value == cheapest
    with pytest.raises(InputError, match="cloud-usd-per-gpu-hour"):
        gpu_hour_price(h100, -1.0)


# ---- the commands ----------------------------------------------------------------------------------

def _invoke(args):
    from gpuplan.cli.main import app

    return CliRunner().invoke(app, args)


def _keys(obj, path=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield f"{path}.{k}" if path else k
            yield from _keys(v, f"{path}.{k}" if path else k)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _keys(v, f"{path}[{i}]")


_PLAN = ["plan", "--gpus", "256", "--json"]


@pytest.fixture(scope="module")
def plan_default():
    r = _invoke(_PLAN)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_plan_json_has_one_pue_and_one_grid(plan_default):
    d = plan_default
    for name in ("pue", "grid_kg_co2_per_kwh", "electricity_usd_per_kwh"):
        assert [k for k in _keys(d) if k.rsplit(".", 1)[-1] == name] == [f"assumptions.{name}"]
    assert d["assumptions"]["pue"] == 1.3 and d["assumptions"]["grid_kg_co2_per_kwh"] == 0.39


def test_plan_training_energy_is_power_times_time_times_pue(plan_default):
    d = plan_default
    a, run, p = d["assumptions"], d["training_run"], d["power"]
    act = run["activity_fraction"]
    # 32 DGX H100 at activity a: each node idle 2,860 W + (0.76 x 10,200 - 2,860) W x a (full activity draws the
    # measured loaded power, facilities.power); storage 32 x 250 W; switches: the cluster's own (same count in
    # `fabric` and in the run)
    it_w = 32 * (2860 + (0.76 * 10200 - 2860) * act) + 32 * 250 + d["fabric"]["switches"] * 1720
    assert run["fabric_switches"] == d["fabric"]["switches"] == p["switches"]
    assert run["it_power_w"] == pytest.approx(it_w)
    hours = d["days"] * 24
    assert run["energy_kwh"] == pytest.approx(it_w * a["pue"] * hours / 1e3)
    assert run["co2_kg"] == pytest.approx(run["energy_kwh"] * a["grid_kg_co2_per_kwh"])
    assert d["workload_details"]["energy_mwh"] == pytest.approx(run["energy_kwh"] / 1e3)
    # the cluster, at nameplate: 32 x 10.2 kW + switches x 1.72 kW + 32 x 0.25 kW, x the same PUE
    it_kw = 32 * 10.2 + d["fabric"]["switches"] * 1.72 + 32 * 0.25
    assert p["it_power_kw"] == pytest.approx(it_kw)
    assert p["facility_power_kw"] == pytest.approx(it_kw * a["pue"])
    # the run's average draw cannot exceed the cluster's nameplate
    assert run["facility_power_w"] <= p["facility_power_kw"] * 1e3


def test_plan_set_pue_changes_run_and_cluster_alike(plan_default):
    r = _invoke(_PLAN + ["--set", "pue=1.5"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["assumptions"]["pue"] == 1.5
    assert d["training_run"]["energy_kwh"] == pytest.approx(plan_default["training_run"]["energy_kwh"] * 1.5 / 1.3)
    assert d["power"]["facility_power_kw"] == pytest.approx(plan_default["power"]["facility_power_kw"] * 1.5 / 1.3)
    assert d["training_run"]["co2_kg"] == pytest.approx(plan_default["training_run"]["co2_kg"] * 1.5 / 1.3)
    # the --pue option is the same override
    r2 = _invoke(_PLAN + ["--pue", "1.5"])
    assert json.loads(r2.stdout)["training_run"]["energy_kwh"] == pytest.approx(d["training_run"]["energy_kwh"])


_TRAIN = ["train", "--tp", "8", "--pp", "8", "--json"]


def test_train_uses_the_same_assumptions_and_keeps_old_keys():
    r = _invoke(_TRAIN + ["--set", "pue=1.5"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["pue"] == 1.5 and d["grid_kg_co2_per_kwh"] == 0.39 and d["grid_kg_per_kwh"] == 0.39
    assert d["energy_mwh"] == pytest.approx(d["facility_power_w"] * d["time_s"] / 3600 / 1e6)
    assert d["facility_power_w"] == pytest.approx(d["it_power_w"] * 1.5)
    assert d["co2_tonnes"] == pytest.approx(d["energy_mwh"] * 0.39)
    assert d["cost_usd"] == pytest.approx(d["gpu_hours"] * d["usd_per_gpu_hour"])


def test_hidden_old_spellings_work_and_are_not_shown():
    new = json.loads(_invoke(_TRAIN + ["--grid-kg-co2-per-kwh", "0.2"]).stdout)
    old = _invoke(_TRAIN + ["--grid-kg-per-kwh", "0.2"])
    assert old.exit_code == 0, old.output
    old = json.loads(old.stdout)
    assert old["grid_kg_co2_per_kwh"] == new["grid_kg_co2_per_kwh"] == 0.2
    assert old["co2_tonnes"] == pytest.approx(old["energy_mwh"] * 0.2)
    for cmd in (["train"], ["plan"], ["dc", "power"]):
        help_text = _invoke(cmd + ["--help"]).stdout
        assert "--grid-kg-co2-per-kwh" in help_text and "--grid-kg-per-kwh" not in help_text
    r = _invoke(["dc", "power", "--nodes", "4", "--price-kwh", "0.2", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["electricity_usd_per_kwh"] == 0.2
    assert "--price-kwh" not in _invoke(["dc", "power", "--help"]).stdout


@pytest.mark.parametrize("args", [
    ["plan", "--set", "pue=-1"], ["plan", "--set", "pue=nan"], ["train", "--pue", "nan"], ["train", "--pue", "0.5"],
    ["dc", "power", "--pue", "-2"], ["dc", "tco", "--set", "pue=inf"],
])
def test_bad_pue_exits_2_with_one_line_naming_it(args):
    r = _invoke(args)
    assert r.exit_code == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "pue" in lines[0] and "Traceback" not in r.output


def test_conflicting_spellings_exit_2():
    r = _invoke(["dc", "power", "--grid-kg-co2-per-kwh", "0.3", "--grid-kg-per-kwh", "0.4"])
    assert r.exit_code == 2 and "grid-kg-co2-per-kwh" in r.stderr


def test_serve_plan_reports_energy_from_the_same_assumptions():
    args = ["serve", "plan", "llama-3-8b", "--rate", "5", "--ttft-ms", "2000", "--tpot-ms", "50", "--output-len", "256"]
    base = json.loads(_invoke(args + ["--json"]).stdout)
    hi = _invoke(args + ["--set", "pue=1.5", "--json"])
    assert hi.exit_code == 0, hi.output
    hi = json.loads(hi.stdout)
    assert base["assumptions"]["pue"] == 1.3 and hi["assumptions"]["pue"] == 1.5
    day = base["best_serving_day"]
    # kWh per million output tokens = facility kW / (5 req/s x 256 tokens x 3600 s) x 1e6
    assert base["best_kwh_per_million_output_tokens"] == pytest.approx(day["facility_power_w"] / 1e3 / (5 * 256 * 3600) * 1e6)
    assert hi["best_serving_day"]["energy_kwh"] == pytest.approx(day["energy_kwh"] * 1.5 / 1.3)


def test_gpu_without_tdp_gets_cost_but_no_energy():
    # the catalog has no tdp_w for TPUs: the run is still priced, its energy is None with a note
    s, g = _spec("dgx-h100")
    no_tdp = g.model_copy(update={"tdp_w": None})
    run = training_run_cost(_estimate(8, 3600.0, 0.5, 1.0), s, no_tdp, usd_per_gpu_hour=2.0)
    assert run.power is None and run.energy is None and "tdp_w" in run.note
    assert run.cost_usd == pytest.approx(8 * 1.0 * 2.0)  # 8 GPUs x 1 h x $2
