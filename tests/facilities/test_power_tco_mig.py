"""Power, TCO and MIG against hand derivations and the MIG User Guide's placement examples."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from gpuplan.errors import InputError
from gpuplan.facilities.assumptions import DEFAULT_ASSUMPTIONS
from gpuplan.facilities.mig import list_profiles, plan_mig
from gpuplan.catalog import load_catalog
from gpuplan.facilities.power import estimate_power
from gpuplan.interfaces.planning.plan import size_cluster


def _dgx_h100():
    cat = load_catalog()
    return cat.system("dgx-h100"), cat.gpu("h100-sxm5-80gb")


def test_seed_power_arithmetic_one_dgx_h100():
    # seed: 10.2 kW x 24 h x 365 d x $0.10/kWh "= $9,000/year"; exact: 10.2 * 8760 * 0.1 = $8,935.20
    a = DEFAULT_ASSUMPTIONS.with_overrides({"pue": 1.0, "electricity_usd_per_kwh": 0.10})
    p = estimate_power(*_dgx_h100(), 1, include_fabric=False, include_storage=False, assumptions=a)
    assert p.annual_energy_kwh == pytest.approx(89_352.0)
    assert p.annual_cost_usd == pytest.approx(8_935.20)


def test_power_breakdown_with_pue():
    # 4 DGX H100 + 1 switch: 40.8 + 1.72 + 4*0.25 = 43.52 kW IT; x1.3 = 56.576 kW; x8760 = 495,605.76 kWh
    p = estimate_power(*_dgx_h100(), 4, switches=1)
    assert p.it_power_kw == pytest.approx(43.52)
    assert p.facility_power_kw == pytest.approx(56.576)
    assert p.annual_energy_kwh == pytest.approx(495_605.76)
    assert p.annual_cost_usd == pytest.approx(49_560.576)
    assert p.annual_co2_tonnes == pytest.approx(495_605.76 * 0.39 / 1e3)
    assert p.it_power_kw == pytest.approx(p.nodes_power_kw + p.switch_power_kw + p.storage_power_kw)


def test_tco_hand_derivation_4_dgx_h100():
    t = size_cluster("dgx-h100", 4, years=4, utilization=0.7, cloud_usd_per_gpu_hour=4.0).tco
    # fabric: 4 nodes -> one switch, 32 cables, 32 transceivers (twin-port, 2 ends per cable)
    # capex: systems 4 * 270,000 = 1,080,000; network 36,000 + 32*1,000 + 32*200 = 74,400;
    #        storage 4 * 25,000 = 100,000; facility (40.8 + 1.72 + 1.0) kW * 10,000 = 435,200
    assert t.capex_breakdown_usd == pytest.approx({"systems": 1_080_000, "network": 74_400, "storage": 100_000, "facility": 435_200})
    assert t.capex_usd == pytest.approx(1_689_600)
    # power at the average draw (facilities.power): loaded IT = 4 nodes x 0.76 (measured fraction of
    # nameplate under training load, Newkirk et al. 2025) x 10.2 kW + 1.72 switch + 1.0 storage = 33.728 kW;
    # idle IT: per node 8 GPUs x 700 W x 0.10 = 560 W + overhead (10,200 - 5,600) W x 0.5 = 2,300 W
    # -> 2.86 kW; 4 x 2.86 + 1.72 + 1.0 = 14.16 kW.
    # 1.3 * 8760 h * (14.16 + (33.728 - 14.16) * 0.7) kW * $0.10 = 1,138.8 * 27.8576 = 31,724.23
    assert t.opex_breakdown_usd_per_year["power"] == pytest.approx(1138.8 * 27.8576)
    # maintenance 10% of (1,080,000 + 74,400 + 100,000) = 125,440
    assert t.opex_breakdown_usd_per_year["maintenance"] == pytest.approx(125_440)
    # residual: 10% of hardware 125,440 + facility 435,200 * (1 - 4/15) = 444,586.67
    assert t.residual_value_usd == pytest.approx(125_440 + 435_200 * 11 / 15)
    gpu_hours = 32 * 8760 * 4 * 0.7
    assert t.gpu_hours == pytest.approx(gpu_hours)
    on_prem = 1_689_600 - t.residual_value_usd + 4 * t.opex_usd_per_year
    assert t.on_prem_usd_per_gpu_hour == pytest.approx(on_prem / gpu_hours)
    # breakeven: capex / (cloud per month - opex per month); cloud per month = 4 * 32 * 730 * 0.7
    assert t.breakeven_months == pytest.approx(1_689_600 / (4 * 32 * 730 * 0.7 - t.opex_usd_per_year / 12))


@settings(max_examples=30, deadline=None)
@given(st.floats(min_value=2.0, max_value=15.0), st.floats(min_value=0.2, max_value=1.0))
def test_breakeven_utilisation_equalises_cost(cloud_rate, utilization):
    # at u*, the on-prem total over the period equals the cloud bill for the same GPU-hours
    t = size_cluster("dgx-h100", 8, cloud_usd_per_gpu_hour=cloud_rate, utilization=utilization).tco
    if t.breakeven_utilization is None:
        return
    t2 = size_cluster("dgx-h100", 8, cloud_usd_per_gpu_hour=cloud_rate, utilization=t.breakeven_utilization).tco
    assert t2.on_prem_total_usd == pytest.approx(t2.cloud_total_usd, rel=1e-9)
    assert sum(t.capex_breakdown_usd.values()) == pytest.approx(t.capex_usd)
    assert sum(t.opex_breakdown_usd_per_year.values()) == pytest.approx(t.opex_usd_per_year)


def test_bad_tco_and_assumption_input():
    with pytest.raises(InputError):
        size_cluster("dgx-h100", 4, utilization=1.5)
    with pytest.raises(InputError):
        DEFAULT_ASSUMPTIONS.with_overrides({"no_such_key": 1.0})


# ---- MIG -----------------------------------------------------------------------------------------

def _layout(plan):
    return [sorted((i.profile, i.start_slice, i.size_slices) for i in g.instances) for g in plan.placements]


def test_mig_guide_3_2_1_1_geometry_on_one_gpu():
    # MIG guide: 3-2-1-1 geometry = 1g@0:1, 1g@1:1, 2g@2:2, 3g@4:4 (A100-40GB names)
    p = plan_mig("a100-sxm4-40gb", ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"])
    assert p.feasible and p.gpus_used == 1
    assert _layout(p) == [sorted([("1g.5gb", 0, 1), ("1g.5gb", 1, 1), ("2g.10gb", 2, 2), ("3g.20gb", 4, 4)])]


def test_mig_two_3g_use_starts_0_and_4():
    # guide: `-cgi 9,9` (3g.20gb twice) -> GIs at 0:4 and 4:4
    p = plan_mig("a100-sxm4-40gb", ["3g.20gb", "3g.20gb"])
    assert _layout(p) == [[("3g.20gb", 0, 4), ("3g.20gb", 4, 4)]]


def test_mig_fewest_gpus_and_infeasible_with_limit():
    # 3 x 4g.40gb: 4g only starts at slice 0 -> one per GPU -> 3 GPUs (lower bound from slices would be 2)
    p = plan_mig("a100-sxm4-80gb", ["4g.40gb"] * 3)
    assert p.gpus_used == 3
    q = plan_mig("a100-sxm4-80gb", ["4g.40gb"] * 3, gpus=2)
    assert not q.feasible and "needs 3 GPUs" in q.reason
    # 8 x 1g.10gb: 1g starts 0..6 only (7 compute slices) -> 2 GPUs
    assert plan_mig("h100-sxm5-80gb", ["1g.10gb"] * 8).gpus_used == 2
    # 2 x 1g+me: one media-extension instance per GPU -> 2 GPUs
    assert plan_mig("h100-sxm5-80gb", ["1g.10gb+me"] * 2).gpus_used == 2


def test_mig_unknown_profile_and_non_mig_gpu():
    with pytest.raises(InputError, match="valid: 1g.10gb, 1g.10gb\\+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"):
        plan_mig("a100-sxm4-80gb", ["5g.40gb"])
    with pytest.raises(InputError, match="no MIG"):
        plan_mig("mi300x", ["1g.10gb"])


def test_mig_profiles_h200_and_b200_names():
    # hardware.md section 4: H200 1g.18gb ... 7g.141gb; B200 1g.23gb ... 7g.180gb
    fam, infos, geos = list_profiles("h200-sxm-141gb", 141 * 10**9)
    assert [i.profile for i in infos] == ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"]
    fam, infos, geos = list_profiles("b200", 180 * 10**9)
    assert infos[-1].profile == "7g.180gb" and infos[-1].lgip_id == 0
    assert "7g.180gb@0" in geos  # the whole GPU is a maximal geometry


# ---- CLI -----------------------------------------------------------------------------------------

def _run(cli_app, args):
    from typer.testing import CliRunner

    app, _ = cli_app
    return CliRunner().invoke(app, args)


def test_cli_keys(cli_app):
    r = _run(cli_app, ["dc", "fabric", "--system", "dgx-h100", "--scalable-units", "4", "--json"])
    d = json.loads(r.stdout)
    assert (d["nodes"], d["gpus"], d["leaf_switches"], d["spine_switches"], d["core_switches"]) == (128, 1024, 32, 16, 0)
    assert d["cables"] == 2048 and d["bisection_tbps"] == pytest.approx(25.6)
    r = _run(cli_app, ["dc", "power", "--system", "dgx-h100", "--nodes", "4", "--price-kwh", "0.10", "--json"])
    d = json.loads(r.stdout)
    assert {"it_power_kw", "facility_power_kw", "annual_energy_kwh", "annual_cost_usd"} <= set(d)
    r = _run(cli_app, ["dc", "tco", "--nodes", "4", "--years", "4", "--utilization", "0.7", "--cloud-usd-per-gpu-hour", "4", "--json"])
    d = json.loads(r.stdout)
    assert d["capex_usd"] == pytest.approx(1_689_600)  # test_tco_hand_derivation_4_dgx_h100
    assert {"opex_usd_per_year", "on_prem_usd_per_gpu_hour", "cloud_usd_per_gpu_hour", "breakeven_months", "breakeven_utilization"} <= set(d)
    r = _run(cli_app, ["mig", "plan", "--gpu", "a100-sxm4-80gb", "3g.40gb", "2g.20gb", "1g.10gb", "--json"])
    d = json.loads(r.stdout)
    assert d["feasible"] is True and d["gpus_used"] == 1
    assert {(i["profile"], i["start_slice"], i["size_slices"]) for i in d["placements"][0]["instances"]} == {
        ("3g.40gb", 4, 4), ("2g.20gb", 2, 2), ("1g.10gb", 0, 1)}


def test_cli_unknown_profile_exit_2(cli_app):
    r = _run(cli_app, ["mig", "plan", "5g.40gb"])
    assert r.exit_code == 2 and "valid:" in r.stderr


def test_plan_defaults_run(cli_app, tmp_path):
    html = tmp_path / "plan.html"
    r = _run(cli_app, ["plan", "--json", "--html", str(html)])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["model"] == "gpt3-175b" and d["system"] == "dgx-h100"
    assert d["gpus"] % 8 == 0 and d["days"] <= 30  # default target: 30 days
    assert "data:image/png;base64," in html.read_text()


def test_plan_serve_capacity_covers_the_demand(cli_app):
    """`plan --goal serve`: the replicas chosen must carry the offered load. Demand in output
    tokens/s = rate x output_len = 5 x 256 = 1,280; replicas x per-replica tokens/s must reach it,
    and the GPU count is replicas x tp (one model copy per tp group)."""
    r = _run(cli_app, ["plan", "--goal", "serve", "--model", "llama-3-70b", "--rate", "5", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    w = d["workload_details"]
    assert w["replicas"] * w["replica_output_tokens_per_s"] >= 5 * 256 * 0.999
    assert d["gpus"] >= w["replicas"] * w["tp"]
    assert w["ttft_p90_ms"] <= 2000 and w["tpot_p90_ms"] <= 50  # the default objectives


@pytest.mark.parametrize("capex, opex, cloud, residual, months", [
    (1.0e6, 10e3, 40e3, 0.0, 48),     # m_cash = 1e6 / 30e3 = 33.3 months inside the period
    (2.0e6, 10e3, 50e3, 3e5, 48),     # m_cash = 50 > 48; 48 x 40e3 - 2e6 + 3e5 = 220e3 >= 0: the resale closes it
    (2.0e6, 10e3, 50e3, 0.0, 48),     # m_cash = 50 > 48 and no resale: 50 months (keep the cluster longer)
    (1.0e6, 50e3, 40e3, 5e5, 48),     # cloud cheaper than opex: never
    (5.0e5, 0.0, 10e3, 1e6, 12),      # residual above capex: 50 months cash, but the resale pays at month 12
])
def test_breakeven_and_savings_come_from_one_cash_flow(capex, opex, cloud, residual, months):
    # the period's savings (cloud - on-prem, residual counted) are >= 0 exactly when breakeven <= the period
    from gpuplan.facilities.tco import cash_flow_breakeven_months

    m = cash_flow_breakeven_months(capex, opex, cloud, residual, months)
    savings = months * cloud - (capex + months * opex - residual)
    assert (savings >= 0) == (m is not None and m <= months)
    if m is not None and m < months:  # the cash crossing itself: capex + m opex = m cloud
        assert capex + m * opex == pytest.approx(m * cloud)


@pytest.mark.parametrize("system, nodes, years, utilization, cloud", [
    ("dgx-h100", 32, 4.0, 0.7, None),     # the seed question's cluster at the catalog's cheapest on-demand price
    ("dgx-h100", 4, 4.0, 0.7, 4.0),       # test_tco_hand_derivation_4_dgx_h100's cluster
    ("dgx-h100", 4, 3.0, 0.5, 2.0),       # a cheap cloud and a half-idle cluster: on-prem loses
    ("dgx-b200", 8, 5.0, 0.9, 6.69),      # Lambda's B200 on-demand price (catalog clouds.toml), busy cluster
    ("dgx-a100-80gb", 2, 2.0, 0.3, 1.0),  # cloud below opex per GPU-hour at 30%: never breaks even
])
def test_tco_breakeven_and_savings_agree(system, nodes, years, utilization, cloud):
    # `dc tco`'s two headline figures from one cash flow: the period's savings (cloud - on-prem,
    # residual counted) are >= 0 exactly when the breakeven month falls inside the period
    t = size_cluster(system, nodes, years=years, utilization=utilization, cloud_usd_per_gpu_hour=cloud).tco
    assert t.savings_usd == pytest.approx(t.cloud_total_usd - t.on_prem_total_usd)
    assert (t.savings_usd >= 0) == (t.breakeven_months is not None and t.breakeven_months <= 12 * years)
    if t.breakeven_months is not None and t.breakeven_months < 12 * years:
        # the crossing of the cumulative cash: capex + m x opex/month = m x cloud/month
        m = t.breakeven_months
        cloud_month = t.cloud_usd_per_gpu_hour * t.gpus * 730 * utilization
        assert t.capex_usd + m * t.opex_usd_per_year / 12 == pytest.approx(m * cloud_month)


def test_cloud_comparison_is_like_for_like():
    from gpuplan.facilities.cloud_comparison import compare_clouds, reserved_beside
    from gpuplan.specs import CloudPrice

    t = size_cluster("dgx-h100", 4, years=4, utilization=0.7, cloud_usd_per_gpu_hour=4.0).tco
    src = {"default": "test price"}
    prices = [CloudPrice(id="x-8", provider="x", instance="x8", gpu="h100-sxm5-80gb", gpus=8, usd_per_gpu_hour=4.0,
                         reserved_usd_per_gpu_hour=3.0, reserved_term="1-year", date="2026-01-01", sources=src),
              CloudPrice(id="y-8", provider="y", instance="y8", gpu="h100-sxm5-80gb", gpus=8, usd_per_gpu_hour=2.0,
                         date="2026-01-01", sources=src)]
    rows = compare_clouds(t, prices)
    # y's cheapest offer (2.0) is below x's (3.0): y first; x's reservation right under x's on-demand
    assert [(r.provider, r.term) for r in rows] == [("y", "on-demand"), ("x", "on-demand"), ("x", "1-year reserved")]
    gpu_hours = 32 * 8760 * 4 * 0.7  # test_tco_hand_derivation_4_dgx_h100
    for r in rows:
        assert r.cloud_total_usd == pytest.approx(r.usd_per_gpu_hour * gpu_hours)
        assert r.savings_usd == pytest.approx(r.cloud_total_usd - t.on_prem_total_usd)
        assert (r.savings_usd >= 0) == (r.breakeven_months is not None and r.breakeven_months <= 48)
    # x on-demand at 4.0 is the headline price: the same cash flow gives the same figures
    assert rows[1].savings_usd == pytest.approx(t.savings_usd) and rows[1].breakeven_months == pytest.approx(t.breakeven_months)
    assert reserved_beside(rows, "x") == (rows[2], True)   # x's own reservation: like for like
    assert reserved_beside(rows, "y") == (rows[2], False)  # y has none: x's, labelled as another provider's
    assert reserved_beside(rows[:2], "x") == (None, False)


def test_dc_tco_labels_the_reserved_price():
    # the catalog's H100 offers: the headline is the cheapest on-demand (RunPod, no reservation), so
    # the reservation beside it is another provider's and says so
    t = size_cluster("dgx-h100", 32).tco
    assert t.cloud_reserved_same_provider is False and t.cloud_reserved_label.startswith("lambda")
    terms = {(o.provider, o.term) for o in t.cloud_comparison}
    assert ("gcp", "1-year reserved") in terms and ("gcp", "on-demand") in terms  # clouds.toml: 10.98 / 7.69 1yr


def test_energy_from_the_stated_average_draw():
    # 4 DGX H100 + 1 switch (test_power_breakdown_with_pue): nameplate IT 43.52 kW (provisioning);
    # loaded 4 x 0.76 x 10.2 + 1.72 + 1.0 = 33.728 kW; idle 14.16 kW (test_tco_hand_derivation_4_dgx_h100);
    # at 50% utilisation: 14.16 + (33.728 - 14.16) x 0.5 = 23.944 kW IT, x 1.3 = 31.1272 kW facility
    p = estimate_power(*_dgx_h100(), 4, switches=1, utilization=0.5)
    assert p.it_power_kw == pytest.approx(43.52) and p.facility_power_kw == pytest.approx(56.576)  # nameplate kept
    assert p.loaded_it_power_kw == pytest.approx(33.728)
    assert p.average_it_power_kw == pytest.approx(23.944)
    assert p.average_facility_power_kw == pytest.approx(31.1272)
    assert p.average_annual_energy_kwh == pytest.approx(31.1272 * 8760)
    assert p.average_annual_cost_usd == pytest.approx(31.1272 * 8760 * 0.10)
    # nameplate as the option: L = 1 and utilisation 1 give the nameplate-24/7 figures
    a = DEFAULT_ASSUMPTIONS.with_overrides({"loaded_power_fraction_of_nameplate": 1.0})
    n = estimate_power(*_dgx_h100(), 4, switches=1, utilization=1.0, assumptions=a)
    assert n.average_annual_energy_kwh == pytest.approx(n.annual_energy_kwh)
    # the TCO's power bill is the same average draw (one model)
    t = size_cluster("dgx-h100", 4, utilization=0.5, cloud_usd_per_gpu_hour=4.0)
    assert t.tco.opex_breakdown_usd_per_year["power"] == pytest.approx(t.power.average_annual_cost_usd)


def test_every_power_assumption_is_listed():
    # `dc assumptions` lists the figures the average draw uses
    keys = {r["key"] for r in DEFAULT_ASSUMPTIONS.rows()}
    assert {"loaded_power_fraction_of_nameplate", "energy_utilization_fraction", "pue", "gpu_idle_power_fraction",
            "node_overhead_idle_fraction", "electricity_usd_per_kwh", "grid_kg_co2_per_kwh"} <= keys
