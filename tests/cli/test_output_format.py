"""`--format table|md|csv|json` (cli/render.py, cli/output_options.py): one rendering function for
every table command; csv/md print every column whole; tables never cut ids or numbers."""

from __future__ import annotations

import csv
import io
import json

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from gpuplan.catalog.validation_sets import validation_set_path
from gpuplan.cli.main import app

runner = CliRunner()


def run(*args: str, env: dict | None = None):
    r = runner.invoke(app, list(args), env=env)
    assert r.exit_code == 0, r.output
    return r


def test_every_command_with_json_has_format():
    # the option is added to the click tree once (output_options.add_shared_options), so a new
    # command with --json gets it without code of its own
    root = get_command(app)
    stack, missing, seen = [((), root)], [], 0
    while stack:
        path, cmd = stack.pop()
        if getattr(cmd, "commands", None):
            stack.extend(((*path, n), c) for n, c in cmd.commands.items())
            continue
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        if "--json" in opts:
            seen += 1
            if "--output-format" not in opts:
                missing.append(" ".join(path))
    assert seen >= 30 and missing == []


def test_csv_prints_raw_values_of_every_column():
    out = run("hw", "list", "--format", "csv").stdout
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["id", "vendor", "memory GiB", "memory GB/s", "BF16 TFLOP/s", "FP8 TFLOP/s", "TDP W"]
    h100 = next(r for r in rows if r[0] == "h100-sxm5-80gb")
    # catalog (NVIDIA H100 SXM datasheet): 80 GB HBM3, 3,350 GB/s, 989.4 dense BF16 TFLOP/s (1,979 with
    # sparsity / 2), 1,978.9 dense FP8, 700 W -- at full precision, where the table shows "989.4" / "1,979"
    assert [float(x) for x in h100[2:]] == [80.0, 3350.0, 989.4, 1978.9, 700.0]
    # the title goes to stderr: stdout is only CSV
    assert not out.startswith("#") and all(len(r) == 7 for r in rows)


def test_md_is_a_pipe_table_with_every_column():
    out = run("hw", "list", "--format", "md").stdout
    lines = [ln for ln in out.splitlines() if ln.startswith("|")]
    assert lines[0] == "| id | vendor | memory GiB | memory GB/s | BF16 TFLOP/s | FP8 TFLOP/s | TDP W |"
    assert lines[1] == "|:---|---:|---:|---:|---:|---:|---:|"
    assert any(ln.startswith("| h100-sxm5-80gb | nvidia | 80 | 3,350 |") for ln in lines)


def test_format_json_is_json():
    a = json.loads(run("hw", "show", "h100-sxm5-80gb", "--format", "json").stdout)
    b = json.loads(run("hw", "show", "h100-sxm5-80gb", "--json").stdout)
    assert a == b and a["memory_bytes"] == 80 * 2**30


@pytest.mark.parametrize("args", [("hw", "list"), ("hw", "prices"), ("systems", "list"), ("model", "list")])
def test_narrow_or_piped_tables_cut_no_id(args):
    # COLUMNS=40 and not a terminal (CliRunner): rows are printed whole at the table's natural width
    out = run(*args, env={"COLUMNS": "40"}).stdout
    ids = [r[0] for r in csv.reader(io.StringIO(run(*args, "--format", "csv").stdout))][1:]
    assert ids and all(i in out for i in ids)
    assert "…" not in out


def test_formats_encode_keeps_its_own_format_option():
    # `--format` is the element format there; `--output-format` picks the rendering
    out = run("formats", "encode", "1.5", "--format", "e4m3", "--output-format", "csv").stdout
    # 1.5 in OCP FP8 E4M3: sign 0, exponent 7 (bias 7 -> 2^0), mantissa 100b -> 0x3C
    assert out.splitlines() == ["input,code,value", "1.5,0x3C,1.5"]


def test_unknown_format_exits_2_naming_the_choices():
    r = runner.invoke(app, ["hw", "list", "--format", "xml"])
    assert r.exit_code == 2 and "--format: must be one of table, md, csv, json" in r.output


def test_error_under_format_json_is_the_json_error_object():
    r = runner.invoke(app, ["hw", "show", "no-such-gpu", "--format", "json"])
    assert r.exit_code == 2 and set(json.loads(r.stdout)["error"]) == {"field", "allowed", "message"}


def test_validate_summary_as_csv(tmp_path):
    # the first three rows of the packaged training file (family meg21-t1): the summary as a CSV table
    lines = validation_set_path("training").read_text(encoding="utf-8").splitlines(keepends=True)
    f = tmp_path / "rows.csv"
    f.write_text("".join(lines[:4]))
    rows = list(csv.reader(io.StringIO(run("validate", str(f), "--summary", "--format", "csv").stdout)))
    assert rows[0] == ["family", "n", "skipped", "MAPE %", "median abs error %", "max abs error %", "spearman"]
    assert [r[:3] for r in rows[1:]] == [["meg21-t1", "3", "0"], ["overall", "3", "0"]]
