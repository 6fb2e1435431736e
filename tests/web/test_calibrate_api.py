"""`POST /api/v1/calibrate/fit`: an uploaded CSV is fitted exactly as `gpuplan calibrate fit FILE
--json` fits it (same JSON, the sources naming the upload), plus the text of the profile `--out`
writes; bad uploads get a 4xx with the CLI's one-line error object; nothing is written on the server."""

from __future__ import annotations

import hashlib
import json
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplan.interfaces.calibration.profile import _toml_loads, load_profile

from .conftest import DATA, cli

SAMPLE = DATA / "sample_training.csv"  # 4 rows of meg21-t1 (validation/training.csv), 1-3 s a fit


def without_created(data: dict) -> dict:
    """`created` is the fit's UTC time stamp (to the second): the one key that differs run to run."""
    return {k: v for k, v in data.items() if k != "created"}


def toml_without_created(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.startswith("created = "))


def post_fit(client, name: str, data: bytes, **form):
    return client.post("/api/v1/calibrate/fit", files={"file": (name, data, "text/csv")}, data=form)


@pytest.mark.parametrize("form,cli_args", [
    ({}, []),
    ({"method": "flat", "knobs": "efficiency.hbm,collectives.nvlink_efficiency"},
     ["--knobs", "efficiency.hbm,collectives.nvlink_efficiency", "--method", "flat"]),
    ({"method": "hierarchical"}, ["--method", "hierarchical"]),
], ids=["auto", "flat-named-knobs", "hierarchical"])
def test_fit_upload_equals_cli_calibrate_fit(client, tmp_path, monkeypatch, form, cli_args):
    r = post_fit(client, "sample_training.csv", SAMPLE.read_bytes(), **form)
    assert r.status_code == 200, r.text
    line = " ".join(["gpuplan calibrate fit sample_training.csv", *cli_args, "--json"])
    assert r.headers["x-gpuplan-command"] == line
    got = r.json()
    profile_text = got.pop("profile_toml")
    # the CLI run beside the file, as the header's line says: the same JSON, the same source path
    monkeypatch.chdir(DATA)
    res = cli(["calibrate", "fit", "sample_training.csv", *cli_args, "--json"])
    assert res.exit_code == 0, res.output
    want = json.loads(res.stdout)
    assert without_created(got) == without_created(want)
    assert got["profile_path"] is None and got["plot_path"] is None  # nothing written
    assert [row["id"] for row in got["rows"]] == ["meg21-t1-1", "meg21-t1-2", "meg21-t1-3", "meg21-t1-4"]
    # the profile text is the file `--out` writes (but for its time stamp) and names the upload
    res = cli(["calibrate", "fit", "sample_training.csv", *cli_args, "--out", str(tmp_path / "profile.toml")])
    assert res.exit_code == 0, res.output
    assert toml_without_created(profile_text) == toml_without_created((tmp_path / "profile.toml").read_text())
    profile = _toml_loads(profile_text)
    assert profile["sources"] == [{"path": "sample_training.csv", "rows": 4,
                                   "sha256": hashlib.sha256(SAMPLE.read_bytes()).hexdigest()}]
    (tmp_path / "downloaded.toml").write_text(profile_text)
    assert load_profile(tmp_path / "downloaded.toml").values == got["values"]  # a valid profile of the fit


def test_nothing_is_written_on_the_server(client, tmp_path, monkeypatch):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the upload's temporary copy goes
    monkeypatch.chdir(tmp_path)
    r = post_fit(client, "sample_training.csv", SAMPLE.read_bytes())
    assert r.status_code == 200, r.text
    assert list(scratch.iterdir()) == []  # the temporary copy is gone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]  # no profile.toml, no plot


EMPTY = b"id,metric,value\n"
NO_KNOB = b"id,metric,value,system\nmine-1,step_time_s,1.5,no-such-system\nmine-2,step_time_s,2.5,no-such-system\n"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))


@pytest.mark.parametrize("name,data,form,field,message", [
    ("empty.csv", EMPTY, {}, "file", "empty.csv: no rows (a header and at least one measured row are needed)"),
    ("mine.csv", NO_KNOB, {}, "measurements",
     "measurements: the rows inform no knob (no row could be predicted; see `gpuplan validate`)"),
    ("sample_training.csv", SAMPLE.read_bytes(), {"knobs": "efficiency.hbm,no.such.knob"}, "knobs",
     "knobs: unknown knob(s) no.such.knob; see `gpuplan calibrate knobs`"),
    ("plot.png", PNG, {}, "file", "plot.png: not UTF-8 text (byte 0x89 at offset 0); save it as UTF-8"),
    ("notes.csv", b"this is not a table\njust words\n", {}, "id",
     "notes.csv: missing required column(s) id, metric, value; need id, metric, value (see SCHEMA.md)"),
    ("sample_training.csv", SAMPLE.read_bytes(), {"method": "bayes"}, "method",
     "method: 'bayes' is not one of auto, hierarchical, flat"),
], ids=["empty", "informs-no-knob", "unknown-knob", "not-a-csv", "text-not-a-table", "bad-method"])
def test_bad_upload_is_400_with_the_cli_error(client, tmp_path, monkeypatch, name, data, form, field, message):
    r = post_fit(client, name, data, **form)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["field"] == field and r.json()["error"]["message"] == message
    # the CLI prints the same error object for the same file (exit 2)
    (tmp_path / name).write_bytes(data)
    monkeypatch.chdir(tmp_path)
    res = cli(r.headers["x-gpuplan-command"].split()[1:])
    assert res.exit_code == 2 and json.loads(res.stdout) == r.json()


def test_no_file_is_400_naming_the_file(client):
    r = client.post("/api/v1/calibrate/fit", data={"method": "flat"})
    assert r.status_code == 400
    assert r.json() == {"error": {"field": "file", "allowed": None,
                                  "message": "file: choose a CSV file of measured rows to upload"}}


def test_upload_is_size_bounded_and_host_checked(client):
    from gpuplan.web.app import MAX_UPLOAD_BYTES

    big = EMPTY + b"x,step_time_s,1\n" * (MAX_UPLOAD_BYTES // 16 + 1)
    r = post_fit(client, "big.csv", big)
    assert r.status_code == 400 and r.json()["error"] == {"field": "file", "allowed": None,
                                                          "message": "file: larger than the 5 MiB upload limit"}
    r = client.post("/api/v1/calibrate/fit", files={"file": ("s.csv", SAMPLE.read_bytes())},
                    headers={"host": "evil.example:8000"})
    assert r.status_code == 403 and r.json()["error"]["field"] == "host"


csv_lines = st.lists(st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=8), min_size=1, max_size=5)
                     .map(",".join), max_size=4).map("\n".join)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=120) | csv_lines.map(lambda t: (EMPTY.decode() + t).encode()),
       method=st.sampled_from(["auto", "flat", "hierarchical", "x"]), knobs=st.sampled_from(["", "efficiency.hbm", ",", "a b"]))
def test_no_upload_gives_a_500_or_a_traceback(client, body, method, knobs):
    r = post_fit(client, "fuzz.csv", body, method=method, knobs=knobs)
    assert r.status_code in (200, 400, 422), r.text
    if r.status_code != 200:
        err = r.json()["error"]
        assert set(err) == {"field", "allowed", "message"} and err["field"] and "\n" not in err["message"]
        assert "Traceback" not in r.text
