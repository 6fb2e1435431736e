"""The public validation data ships with the package (catalog/data/validation) and stays a byte copy of
../shared/validation; `gpuplan validate --builtin NAME` and `api.validate(builtin=NAME)` read it."""

from __future__ import annotations

import csv
import fnmatch
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan import api
from gpuplan.catalog.validation_sets import VALIDATION_FILES, VALIDATION_SETS, validation_dir, validation_set_path
from gpuplan.cli.main import app
from gpuplan.errors import InputError
from gpuplan.models import bundled_model_names, load_model

REPO = Path(__file__).resolve().parents[2]
SHARED_VALIDATION = REPO.parent / "shared" / "validation"

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


@pytest.mark.skipif(not SHARED_VALIDATION.is_dir(),
                    reason="../shared/validation is not beside the repository (a fresh clone): nothing to compare")
def test_packaged_copy_equals_shared_validation():
    # every file of ../shared/validation is shipped, byte for byte (a new or changed file there fails
    # here until it is copied into src/gpuplan/catalog/data/validation)
    shared = sorted(p.name for p in SHARED_VALIDATION.iterdir() if p.is_file())
    assert shared == sorted(VALIDATION_FILES)
    for name in VALIDATION_FILES:
        assert (validation_dir() / name).read_bytes() == (SHARED_VALIDATION / name).read_bytes(), name


def test_every_shipped_file_is_package_data():
    # an installed (non-editable) package carries only the files pyproject.toml's package-data names
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    globs = data["tool"]["setuptools"]["package-data"]["gpuplan"]
    root = REPO / "src" / "gpuplan"
    for name in VALIDATION_FILES:
        rel = (validation_dir() / name).relative_to(root).as_posix()
        assert any(fnmatch.fnmatch(rel, g) for g in globs), rel


def test_every_hf_config_a_row_names_is_bundled():
    # SCHEMA.md: `hf_config` names a config.json of ../shared/models by file name without .json; the
    # package bundles each one (catalog/data/models), so no row needs ../shared to be predicted
    named = set()
    for name in VALIDATION_SETS:
        with open(validation_set_path(name), encoding="utf-8", newline="") as fh:
            named |= {r["hf_config"] for r in csv.DictReader(fh) if r.get("hf_config")}
    assert len(named) >= 10  # 12 distinct configs on 2026-11-28 (Llama, Mixtral, Qwen3, DeepSeek, gpt-oss)
    for stem in sorted(named):
        model = load_model(stem)  # a name of ../shared/models resolves to the bundled config, offline
        assert model.name in bundled_model_names() and model.layers > 0, stem


def test_builtin_equals_the_file_it_names():
    # the same rows, the same predictions: --builtin is only a way to name the shipped file
    by_name = api.validate(builtin="collectives").to_dict()
    by_path = api.validate(validation_set_path("collectives")).to_dict()
    assert by_name == by_path
    # collectives.csv (2026-11-28): 26 rows, 23 of family mleng and 3 of sbook
    assert len(by_name["rows"]) == 26
    assert {f: b["count"] for f, b in by_name["summary"]["families"].items()} == {"mleng": 23, "sbook": 3}


def test_cli_builtin_json_summary_and_csv(runner):
    out = runner.invoke(app, ["validate", "--builtin", "collectives", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == api.validate(builtin="collectives").to_dict()
    summary = runner.invoke(app, ["validate", "--builtin", "collectives", "--summary"])
    assert summary.exit_code == 0 and summary.stdout.splitlines()[-1].startswith("overall")
    assert "sbook-1" not in summary.stdout  # --summary: no per-row table
    rows = list(csv.reader(runner.invoke(app, ["validate", "--builtin", "collectives", "--summary", "--format",
                                                "csv"]).stdout.splitlines()))
    assert rows[0][:3] == ["family", "n", "skipped"] and [r[:2] for r in rows[1:]][-1] == ["overall", "26"]


def test_cli_builtin_cv_family(runner):
    out = runner.invoke(app, ["validate", "--builtin", "collectives", "--cv", "family", "--json"])
    assert out.exit_code == 0, out.output
    cv = json.loads(out.stdout)["cv"]
    # collectives.csv: 26 rows; mleng-44 and mleng-46 are of confidence low (predicted, not scored): 24 scored
    assert cv["overall"]["n"] == 24 and cv["overall"]["low_confidence_rows"] == 2
    assert set(cv["families"]) == {"mleng", "sbook"}


@pytest.mark.parametrize("args,message", [
    (["validate"], "error: file: give a CSV FILE of SCHEMA.md rows, or --builtin training|inference|collectives"),
    (["validate", "rows.csv", "--builtin", "training"],
     "error: --builtin: give a FILE or --builtin training|inference|collectives, not both"),
    (["validate", "--builtin", "nope"], "error: --builtin: must be one of training, inference, collectives, got 'nope'"),
    (["validate", "--builtin", "nope", "--cv", "family"],
     "error: --builtin: must be one of training, inference, collectives, got 'nope'"),
])
def test_bad_builtin_is_one_line_exit_2(runner, args, message):
    out = runner.invoke(app, args)
    assert out.exit_code == 2 and out.output.strip() == message


@given(name=st.text(max_size=12))
def test_only_the_shipped_names_are_accepted(name):
    if name.strip().lower() in VALIDATION_SETS:
        assert validation_set_path(name).is_file()
    else:  # a blank name is no name: then neither FILE nor --builtin was given
        with pytest.raises(InputError) as exc:
            api.validate(builtin=name)
        assert exc.value.field == ("builtin" if name.strip() else "file")
