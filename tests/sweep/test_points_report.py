"""Points (cartesian order, seeded sampling, Latin-hypercube strata) and Pareto fronts."""

from __future__ import annotations

from gpuplan.interfaces.sweep import parse_spec, pareto_front
from gpuplan.interfaces.sweep.points import make_points

BASE = {"goal": "train", "axes": {"models": ["llama-3-8b", "gpt3-1.3b"], "hardware": ["dgx-h100", "dgx-h200", "dgx-b200"],
                                  "gpus": [8, 16, 32, 64, 128, 256]}}


def _spec(**sampling):
    return parse_spec({**BASE, "sampling": sampling} if sampling else BASE)


def test_cartesian_points_last_axis_fastest():
    pts = make_points(_spec())
    assert len(pts) == 2 * 3 * 6  # models x hardware x gpus (seq_len, tokens: one default each)
    assert pts.point(0) == {"point": 0, "model": "llama-3-8b", "hardware": "dgx-h100", "gpus": 8, "seq_len": None,
                            "tokens": None}
    assert pts.point(7)["hardware"] == "dgx-h200" and pts.point(7)["gpus"] == 16  # 7 = 0*18 + 1*6 + 1
    assert pts.point(35) == {"point": 35, "model": "gpt3-1.3b", "hardware": "dgx-b200", "gpus": 256, "seq_len": None,
                             "tokens": None}


def test_sampling_is_seeded():
    a = make_points(_spec(method="random", points=10, seed=1))
    b = make_points(_spec(method="random", points=10, seed=1))
    c = make_points(_spec(method="random", points=10, seed=2))
    assert (a.index == b.index).all() and not (a.index == c.index).all()


def test_latin_hypercube_hits_every_stratum_once():
    # 6 points on the 6-value gpus axis: one coordinate in each sixth of [0, 1), so every GPU count
    # appears exactly once (McKay et al. 1979); the 3-value hardware axis gets each value twice.
    pts = make_points(_spec(method="latin-hypercube", points=6, seed=5))
    rows = [pts.point(i) for i in range(6)]
    assert sorted(r["gpus"] for r in rows) == [8, 16, 32, 64, 128, 256]
    assert sorted(r["hardware"] for r in rows) == ["dgx-b200"] * 2 + ["dgx-h100"] * 2 + ["dgx-h200"] * 2


def test_pareto_front_by_hand():
    rows = [{"point": i, "days": d, "cost_usd": c} for i, (d, c) in enumerate(
        [(10, 100), (5, 150), (5, 120), (20, 90), (12, 100), (30, 95)])]
    # (5,120) dominates (5,150); (12,100) is dominated by (10,100); (30,95) by (20,90)
    assert [r["point"] for r in pareto_front(rows, "days", "cost_usd")] == [2, 0, 3]


def test_report_cli_writes_plots(runner, tmp_path):
    import csv

    from gpuplan.cli.main import app
    from gpuplan.interfaces.sweep.evaluate import TRAIN_COLUMNS

    path = tmp_path / "r.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=TRAIN_COLUMNS)
        w.writeheader()
        for i, (d, c, n) in enumerate([(10, 100, 64), (5, 120, 128), (20, 90, 32)]):
            w.writerow({"point": i, "model": "m", "hardware": "h", "status": "ok", "meets_constraints": True,
                        "days": d, "cost_usd": c, "num_gpus": n})
    result = runner.invoke(app, ["sweep", "report", str(path), "--out", str(tmp_path / "rep"), "--json"])
    assert result.exit_code == 0, result.output
    import json

    data = json.loads(result.output)
    assert [r["point"] for r in data["fronts"]["cost_vs_time"]] == [1, 0, 2]
    assert [r["point"] for r in data["fronts"]["cost_vs_gpus"]] == [2]  # fewest GPUs is also cheapest
    for png in data["plots"].values():
        assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
