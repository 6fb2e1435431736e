"""CLI: `gpuplan comm` and `gpuplan validate` (JSON keys, summary layout, exit code 2 on bad input)."""

from __future__ import annotations

import json

import pytest

from gpuplan.cli.main import app


def test_comm_json(runner):
    res = runner.invoke(app, ["comm", "all_reduce", "--system", "dgx-h100", "--gpus", "8", "--size", "1GiB",
                              "--algorithm", "ring", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    for key in ("time_s", "algbw_gbps", "busbw_gbps", "algorithm"):
        assert key in data
    # hand derivation in tests/collectives/test_collectives.py: 353.06 GB/s
    assert data["busbw_gbps"] == pytest.approx(353.06, abs=0.01) and data["algorithm"] == "ring"


def test_comm_sweep_and_errors(runner):
    res = runner.invoke(app, ["comm", "all_gather", "--system", "dgx-h100", "--gpus", "16", "--sweep", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert len(rows) == 13 and rows[0]["size_bytes"] == 1024
    bad = runner.invoke(app, ["comm", "all_gather", "--system", "dgx-h100", "--gpus", "8", "--algorithm", "tree"])
    assert bad.exit_code == 2 and "algorithm" in bad.output
    bad = runner.invoke(app, ["comm", "all_reduce", "--system", "dgx-h100", "--gpus", "8", "--size", "lots"])
    assert bad.exit_code == 2 and "size" in bad.output


def test_validate_json_and_summary(runner, validation_dir):
    path = str(validation_dir / "collectives.csv")
    res = runner.invoke(app, ["validate", path, "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert {"id", "metric", "measured", "predicted", "error_pct"} <= set(data["rows"][0])
    assert data["summary"]["overall"]["mape_pct"] <= 15.0
    res = runner.invoke(app, ["validate", path, "--summary"])
    assert res.exit_code == 0
    assert res.stdout.strip().splitlines()[-1].startswith("overall")


def test_validate_malformed_exit_2(runner, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("id,metric,value\nr7,busbw_gbps,abc\n")
    res = runner.invoke(app, ["validate", str(path)])
    assert res.exit_code == 2
    assert "r7" in res.output and "value" in res.output
    path.write_text("id,metric\nr1,busbw_gbps\n")
    res = runner.invoke(app, ["validate", str(path)])
    assert res.exit_code == 2 and "value" in res.output
