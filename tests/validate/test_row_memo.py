"""`validate` predicts a row that repeats an earlier one (all cells but the id) once per knob values
(interfaces.validation.row_memo), and builds each row's model once per distinct architecture
(models.arch_row.model_from_arch_row). The output is the same as predicting every row on its own:
the row-by-row path here is `validate_rows([row])`, one fresh call per row."""

from __future__ import annotations

import ast
import inspect

from gpuplan import knobs
import gpuplan.primitives.collectives  # noqa: F401 - registers collectives.nvlink_efficiency
from gpuplan.catalog.validation_sets import validation_set_path
from gpuplan.interfaces.row_types import Prediction, SkipRow
from gpuplan.interfaces.validation.row_memo import memoised
from gpuplan.interfaces.validation.validate import read_rows, report_json, summarize, validate_rows
from gpuplan.models import arch_row


def _sample() -> list[dict[str, str]]:
    """Rows of every kind from the shipped sets (a spread of each file, skipped rows included), then
    the same rows again under other ids."""
    rows = []
    for name, step in (("training", 9), ("inference", 7), ("collectives", 3)):
        rows += read_rows(validation_set_path(name))[::step]
    return rows + [{**r, "id": r["id"] + "-copy"} for r in rows]


def test_memoised_validation_equals_the_row_by_row_path():
    rows = _sample()
    together = validate_rows(rows)
    alone = [validate_rows([r]).rows[0] for r in rows]
    assert together.rows == alone
    assert report_json(together) == report_json(type(together)(rows=alone, summary=summarize(alone)))
    # the copies are predicted exactly like their originals (the memo's point), ids kept
    half = len(rows) // 2
    for original, copy in zip(together.rows[:half], together.rows[half:]):
        assert copy.id == original.id + "-copy" and copy.predicted == original.predicted


def test_one_call_per_distinct_row_and_knob_values():
    calls = []

    def predict(row):
        calls.append(row["id"])
        if row["x"] == "skip":
            raise SkipRow("cannot")
        return Prediction(float(row["x"]) * knobs.value("collectives.nvlink_efficiency"))

    once = memoised(predict)
    assert once({"id": "a", "x": "2"}) == once({"id": "b", "x": "2"})
    assert calls == ["a"]
    for rid in ("c", "d"):  # a skip is remembered, and raised again for the copy
        try:
            once({"id": rid, "x": "skip"})
        except SkipRow as exc:
            assert exc.reason == "cannot"
    assert calls == ["a", "c"]
    with knobs.overridden({"collectives.nvlink_efficiency": 0.5}):  # other knob values: predicted again
        assert once({"id": "e", "x": "2"}).value == 1.0  # 2 x 0.5
    assert calls == ["a", "c", "e"]


def test_the_model_memo_keys_on_every_column_the_builder_reads():
    # every column name the builder reads (row.get("...") and _int(row, "...")) is in its key
    source = inspect.getsource(arch_row._build_model)
    read = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            column = node.args[1] if name == "_int" and len(node.args) > 1 else node.args[0] if name == "get" else None
            if isinstance(column, ast.Constant) and isinstance(column.value, str):
                read.add(column.value)
    assert read and read <= set(arch_row.ARCH_COLUMNS), read - set(arch_row.ARCH_COLUMNS)


def test_the_memoised_model_is_the_one_built_afresh():
    for row in read_rows(validation_set_path("training"))[::5]:
        try:
            built = arch_row._build_model(row)
        except Exception:
            continue
        assert arch_row.model_from_arch_row(row) == built
