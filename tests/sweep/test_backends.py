"""The docs' first spec runs as written, on the local process pool and on a local Ray instance,
with identical rows; its rows are the API's answers."""

from __future__ import annotations

import pytest

from gpuplan import api
from gpuplan.interfaces.sweep import run_sweep
from gpuplan.interfaces.sweep.store import read_rows


@pytest.fixture(scope="module")
def local_rows(docs_spec_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "first.parquet"
    summary, rows = run_sweep(docs_spec_path, out, backend="local", workers=2)
    return summary, rows, out


def test_docs_spec_runs_on_the_local_pool(local_rows):
    summary, rows, out = local_rows
    # cartesian order (points.py): model x hardware x gpus x seq_len x tokens, last axis fastest;
    # hardware = the two catalog ids, then the variant: 1 x 3 x 2 x 1 x 1 = 6 points
    assert [(r["point"], r["hardware"], r["num_gpus"]) for r in rows] == [
        (0, "dgx-h100", 64), (1, "dgx-h100", 128), (2, "dgx-h200", 64), (3, "dgx-h200", 128),
        (4, "h100-hbm2x", 64), (5, "h100-hbm2x", 128)]
    assert summary.computed == 6 and summary.infeasible == summary.errors == 0
    assert all(r["status"] == "ok" for r in rows)
    for r in rows:  # every plan uses exactly the point's GPUs
        assert r["tp"] * r["pp"] * r["dp"] * r["cp"] == r["num_gpus"]
        # $/M tokens = cost / tokens x 1e6, tokens = 1T (the spec)
        assert r["usd_per_million_tokens"] == pytest.approx(r["cost_usd"] / 1e12 * 1e6, rel=1e-12)
    # the variant differs from its base only in HBM bandwidth (2x): never a slower step
    by = {(r["hardware"], r["num_gpus"]): r for r in rows}
    for n in (64, 128):
        assert by[("h100-hbm2x", n)]["step_time_s"] <= by[("dgx-h100", n)]["step_time_s"]
    # the output file holds the same rows
    assert read_rows(out) == rows


def test_rows_are_the_api_answers(local_rows):
    # point 2 = llama-3-8b on 64 x dgx-h200, seq 4096, 1T tokens, global batch 512 (the spec)
    _, rows, _ = local_rows
    d = api.train("llama-3-8b", "dgx-h200", 64, tokens="1T", seq_len=4096, global_batch=512, top=1).to_dict()
    r = rows[2]
    assert (r["tp"], r["pp"], r["dp"], r["cp"]) == tuple(d["best_plan"][k] for k in ("tp", "pp", "dp", "cp"))
    for key in ("step_time_s", "mfu_pct", "days", "gpu_hours", "energy_kwh", "cost_usd", "memory_per_gpu_gib"):
        assert r[key] == d[key], key


def test_ray_gives_identical_rows(local_rows, ray_local, docs_spec_path, tmp_path):
    _, rows, out = local_rows
    ray_out = tmp_path / "first.parquet"
    summary, ray_rows = run_sweep(docs_spec_path, ray_out, backend="ray", workers=2)
    assert summary.backend == "ray" and summary.computed == 6
    assert ray_rows == rows
    assert read_rows(ray_out) == read_rows(out)
    assert ray_local.is_initialized()  # the backend leaves a Ray instance it did not start running


def test_knob_overrides_reach_the_spawned_workers(docs_spec_path, tmp_path):
    # a calibration profile or `--memory-headroom` is a knob scope of the driver; spawned workers must
    # predict under it too. Under sustained_gemm_fraction 0.6 (default 0.85) every point's row equals
    # the API's answer under the same override, and the step is slower than without it.
    from gpuplan import knobs

    override = {"training.sustained_gemm_fraction": 0.6}
    with knobs.overridden(override):
        summary, rows = run_sweep(docs_spec_path, tmp_path / "slow.csv", backend="local", workers=2)
        d = api.train("llama-3-8b", "dgx-h200", 64, tokens="1T", seq_len=4096, global_batch=512, top=1).to_dict()
    assert summary.computed == 6
    assert rows[2]["step_time_s"] == d["step_time_s"]
    base = api.train("llama-3-8b", "dgx-h200", 64, tokens="1T", seq_len=4096, global_batch=512, top=1).to_dict()
    assert rows[2]["step_time_s"] > base["step_time_s"]
    # the parts remember the override: resuming without it is refused rather than mixing rows
    from gpuplan.errors import InputError

    with pytest.raises(InputError, match="knob overrides"):
        run_sweep(docs_spec_path, tmp_path / "slow.csv", backend="local", workers=2)


def test_pool_rows_equal_the_serial_path(local_rows, docs_spec_path):
    # the pool's workers (forked warm from the fork server, chunked) compute exactly what one process
    # evaluating every point in turn computes: same rows, same values, same order
    from gpuplan.interfaces.sweep.evaluate import evaluate_point
    from gpuplan.interfaces.sweep.runner import prepare

    _, rows, _ = local_rows
    prep = prepare(docs_spec_path, None)
    serial = [evaluate_point(prep.context, prep.points.point(i)) for i in range(len(prep.points))]
    assert rows == serial


def test_chunked_pool_rows_equal_one_point_chunks(docs_spec_path, local_rows):
    # chunking amortises a worker's start-up; it must not change a row: chunks of 4 points on 2
    # workers give the rows of the adaptive run
    _, rows, _ = local_rows
    _, chunked = run_sweep(docs_spec_path, None, backend="local", workers=2, chunk_points=4)
    assert chunked == rows
