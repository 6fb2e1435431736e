"""The one progress bar helper (cli/progress.py) and the progress hooks it is given."""

from __future__ import annotations

from gpuplan import api
from gpuplan.cli import progress as progress_mod
from gpuplan.cli.progress import ProgressBar, progress_bar
from gpuplan.catalog.validation_sets import validation_set_path
from gpuplan.cli.render import set_output_format

TRAINING_CSV = validation_set_path("training")  # the packaged copy of ../shared/validation/training.csv


def test_no_bar_when_stderr_is_not_a_terminal():
    with progress_bar("x") as bar:  # pytest captures stderr: not a TTY
        assert bar is None


def test_no_bar_under_json(monkeypatch):
    monkeypatch.setattr(progress_mod.sys.stderr, "isatty", lambda: True, raising=False)
    set_output_format("json")
    try:
        with progress_bar("x") as bar:
            assert bar is None
    finally:
        set_output_format("table")


def test_callback_shapes():
    # (stage, fraction) from the plan search, (done, total) from validate / sweep, (stage, done, total) from bench
    assert ProgressBar._parse(("step time", 0.5)) == ("step time", 0.5)
    assert ProgressBar._parse((3, 12)) == ("3 of 12", 0.25)
    assert ProgressBar._parse(("gemm bf16", 1, 4)) == ("gemm bf16", 0.25)
    assert ProgressBar._parse((0, 0)) == ("0 of 0", 0.0)


def test_nothing_drawn_before_the_delay():
    bar = ProgressBar("x", delay_s=3600)
    bar("stage", 0.5)
    assert bar._bar is None
    bar.close()


def test_validate_reports_every_row(tmp_path):
    lines = TRAINING_CSV.read_text().splitlines(keepends=True)
    seen = []
    tmp = tmp_path / "rows.csv"
    tmp.write_text("".join(lines[:6]))
    api.validate(tmp, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i, 5) for i in range(5)]  # before each of the 5 rows


def test_plan_reports_each_gpu_count():
    seen = []
    api.plan("gpt3-125m", tokens="300B", days=0.1, global_batch=1536, progress=lambda s, f: seen.append((s, f)))
    # the counts tried (64, 128, 96, 80, 88 GPUs: see test_plan_whole_nodes), fractions rising
    assert [s for s, _ in seen][:3] == ["64 GPUs", "128 GPUs", "96 GPUs"]
    assert all(a[1] < b[1] for a, b in zip(seen, seen[1:]))
