"""Tables for people and for scripts (cli/render.py, cli/table_layout.py): `--format csv` writes ONE
table (the main one, or `--table NAME`), tables fit 100 columns unless `--wide`, and a closed pipe
(`gpuplan ... | head`) exits 0 quietly."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuplan.cli.main import app
from gpuplan.cli.render import fmt
from gpuplan.cli.table_layout import MAX_TABLE_WIDTH, column_widths

runner = CliRunner()
BOX = "┏┃┡│└┌├╭┗╰"  # the first characters of a rich table's lines


def run(*args: str):
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r


def one_csv_table(text: str) -> list[list[str]]:
    """The rows of `text`, checked to be one CSV table: no blank line, every row as wide as the header."""
    assert "\n\n" not in text and text.endswith("\n")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows and all(len(r) == len(rows[0]) for r in rows)
    return rows


def table_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln[:1] in BOX]


# -- --format csv: one table -------------------------------------------------------------------
def test_train_csv_is_the_estimate_alone():
    r = run("train", "--format", "csv")
    rows = one_csv_table(r.stdout)
    # the main table of `train` is the estimate (quantity, value); the ranking of plans is another table
    assert rows[0] == ["quantity", "value"]
    assert [r[0] for r in rows[1:3]] == ["plan", "global batch sequences"]
    assert "# estimate: training estimate (other tables: plans; --table NAME)" in r.stderr


def test_train_table_plans_picks_the_ranking():
    rows = one_csv_table(run("train", "--format", "csv", "--table", "plans").stdout)
    assert rows[0] == ["#", "plan", "batch seqs", "step s", "MFU %", "GiB/GPU"]
    assert [r[0] for r in rows[1:]] == [str(i) for i in range(1, len(rows))]  # ranks 1, 2, ... in order


def test_plan_csv_is_one_table():
    rows = one_csv_table(run("plan", "--format", "csv").stdout)
    assert rows[0] == ["item", "value"] and rows[1][0] == "estimator"


@pytest.mark.parametrize("args,header", [
    (("validate", "--builtin", "collectives"), ["id", "metric", "measured", "predicted", "error_pct", "notes"]),
    (("validate", "--builtin", "collectives", "--table", "summary"),
     ["family", "n", "skipped", "MAPE %", "median abs error %", "max abs error %", "spearman"]),
    (("hw", "show", "h100-sxm5-80gb"), ["field", "value"]),
    (("hw", "show", "h100-sxm5-80gb", "--table", "peaks"), ["dtype", "dense", "sparse (2:4)"]),
    (("model", "show", "llama-3-8b", "--table", "per-token"), ["quantity", "value"]),
    (("formats", "table"), ["format", "bits", "E", "M", "bias", "emax", "max normal", "min normal", "min subnormal",
                            "Inf", "NaN", "bits/elem", "block", "scale"]),
    (("dc", "tco", "--nodes", "4", "--table", "assumptions"), ["key", "value", "source", "date"]),
    (("kernel", "roofline", "--gpu", "h100-sxm5-80gb", "--gemm", "4096x4096x4096"),
     ["workload", "FLOP/B", "attainable TFLOP/s", "bound", "from ridge", "min time ms", "achieved TFLOP/s"]),
])
def test_commands_with_several_tables_write_one(args, header):
    assert one_csv_table(run(*args, "--format", "csv").stdout)[0] == header


def test_validate_csv_has_every_row():
    rows = one_csv_table(run("validate", "--builtin", "collectives", "--format", "csv").stdout)
    # collectives.csv (2026-11-28): 26 rows, sbook-1 first
    assert len(rows) == 1 + 26 and rows[1][0] == "sbook-1"


def test_unknown_table_lists_the_names():
    r = runner.invoke(app, ["train", "--format", "csv", "--table", "nope"])
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines()[-1] == \
        "error: --table: must name a table of this command (plans, estimate), got 'nope'"
    assert r.stdout == ""  # nothing half-written
    # in the table format too, and on a command with one table
    r = runner.invoke(app, ["hw", "list", "--table", "nope"])
    assert r.exit_code == 2 and "error: --table: must name a table of this command (main), got 'nope'" in r.output


def test_table_with_json_is_refused():
    r = runner.invoke(app, ["train", "--json", "--table", "plans"])
    assert r.exit_code == 2
    assert json.loads(r.stdout)["error"]["field"] == "--table"


def test_table_in_the_table_format_prints_only_that_table():
    out = run("train", "--table", "plans").stdout
    assert "best plans" in out and "training estimate" not in out


# -- widths ------------------------------------------------------------------------------------
WIDE_COMMANDS = [
    ("hw", "interconnects"), ("hw", "prices"), ("hw", "compare", "a100-sxm4-80gb", "h100-sxm5-80gb", "h200-sxm-141gb",
                                                "b200"),
    ("systems", "list"), ("dc", "assumptions"), ("formats", "table"), ("plan",), ("train",),
    ("validate", "--builtin", "collectives"),
    ("serve", "plan", "llama-3-8b", "--rate", "10", "--gpu", "h100-sxm5-80gb,a100-sxm4-80gb"),
]


@pytest.mark.parametrize("args", WIDE_COMMANDS)
def test_default_tables_fit_100_columns(args):
    out = run(*args).stdout
    lines = table_lines(out)
    assert lines and max(len(ln) for ln in lines) <= MAX_TABLE_WIDTH, max(lines, key=len)


@pytest.mark.parametrize("args", [("hw", "interconnects"), ("dc", "assumptions"), ("systems", "list")])
def test_wrapped_tables_break_no_word(args):
    # every word of every cell (the CSV's text, as the table formats it) is on some line whole
    out = run(*args).stdout
    words = {w for row in one_csv_table(run(*args, "--format", "csv").stdout)[1:] for cell in row
             for w in cell.split() if not _number(w) and w not in ("true", "false")}  # shown as 1,234 / yes / no
    assert words and all(w in out for w in words)


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def test_wide_shows_every_column_one_line_per_row():
    rows = one_csv_table(run("hw", "interconnects", "--format", "csv").stdout)
    lines = table_lines(run("hw", "interconnects", "--wide").stdout)
    # header, rule, rows and the two borders: one line each, wider than the default limit
    assert len(lines) == len(rows) + 3 and max(len(ln) for ln in lines) > MAX_TABLE_WIDTH
    assert "GB/s bidirectional" in lines[1] and "latency us" in lines[1]


def test_left_out_columns_are_named():
    out = run("validate", "--builtin", "collectives").stdout
    header = next(ln for ln in table_lines(out) if "metric" in ln)
    assert "notes" not in header
    assert "(not shown: notes; --wide shows every column)" in out
    assert "notes" in table_lines(run("validate", "--builtin", "collectives", "--wide").stdout)[1]


@given(texts=st.lists(st.lists(st.text(alphabet="ab ", max_size=30), min_size=1, max_size=5), min_size=1, max_size=6),
       room=st.integers(0, 200), data=st.data())
def test_column_widths_laws(texts, room, data):
    whole = data.draw(st.lists(st.booleans(), min_size=len(texts), max_size=len(texts)))
    widths = column_widths(texts, whole, room)
    longest = [max(len(t) for t in col) for col in texts]
    word = [lg if keep else max((len(w) for t in col for w in t.split()), default=0)
            for col, lg, keep in zip(texts, longest, whole)]
    # no column below its longest word (nothing broken) nor above its longest line (no waste)
    assert all(w <= x <= lg for w, x, lg in zip(word, widths, longest))
    # the room is used when the words fit and the lines do not
    if sum(word) <= room <= sum(longest):
        assert sum(widths) == room
    if room >= sum(longest):
        assert widths == longest


def test_fmt_of_huge_numbers_is_an_exponent():
    # float32's largest finite value, 3.4028234663852886e38 (IEEE 754 binary32: (2 - 2^-23) x 2^127)
    assert fmt(3.4028234663852886e38) == "3.403e+38"
    assert fmt(123456789.0) == "123,456,789"  # below 1e15: digits with thousands separators, as before


# -- a closed pipe ----------------------------------------------------------------------------
@pytest.mark.parametrize("args", [["hw", "list"], ["hw", "list", "--format", "csv"], ["hw", "list", "--format", "md"],
                                  ["hw", "list", "--json"], ["train", "--table", "plans"]])
def test_closed_pipe_exits_0_quietly(args):
    # the reading end is closed before gpuplan writes: its first write fails with EPIPE (`| head` that
    # already exited). Python ignores SIGPIPE, so the write raises BrokenPipeError: exit 0, no message.
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    try:
        proc = subprocess.run([sys.executable, "-m", "gpuplan.cli.main", *args], stdout=write_fd,
                              stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                              timeout=300)
    finally:
        os.close(write_fd)
    # nothing on stderr but the CSV table's name line ("# main: GPUs ...")
    assert proc.returncode == 0 and all(ln.startswith("# ") for ln in proc.stderr.decode().splitlines())
