"""The prediction memo of `validate` and `--cv` (interfaces.validation.row_memo) reuses a prediction
only while every knob the prediction read keeps its value: compared here with the row-by-row path
(each kind's `predict_row` called afresh, no memo) on rows of the public files, under the knob
changes a cross-validation makes (one knob moved at a time, as the fitter's Jacobian does), for rows
that differ in one column, and for `--cv family` as a whole."""

from __future__ import annotations

import importlib
from functools import lru_cache

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan import knobs
import gpuplan.primitives.collectives  # noqa: F401 - registers collectives.nvlink_efficiency
from gpuplan.catalog.validation_sets import validation_set_path
from gpuplan.interfaces.fitting.knob_catalog import load_all
from gpuplan.interfaces.row_types import Prediction, SkipRow
from gpuplan.interfaces.validation.cross_validation import _PREDICTOR_MODULES, cross_validate, knobs_to_refit
from gpuplan.interfaces.validation.row_memo import memoised
from gpuplan.interfaces.validation.validate import read_rows, row_kind


def _row_by_row(row: dict) -> Prediction:
    """The row's own predictor, called afresh (no memo)."""
    kind = row_kind(row)
    if kind not in _PREDICTOR_MODULES:
        raise SkipRow("unknown kind")
    return importlib.import_module(_PREDICTOR_MODULES[kind]).predict_row(row)


def _outcome(predict, row: dict) -> tuple:
    try:
        p = predict(row)
    except SkipRow as exc:
        return ("skip", exc.reason)
    return (p.value, p.notes)


def _moved(name: str) -> dict[str, float]:
    """The knob moved 10% toward the inside of its range (as a forward-difference step would)."""
    k = knobs.REGISTRY[name]
    v = knobs.value(name)
    up = v * 1.1 if v > 0 else (k.low + k.high) / 2
    return {name: up if up <= k.high else v * 0.9}


def _sample() -> list[dict[str, str]]:
    rows = []
    for name, step in (("training", 23), ("inference", 19), ("collectives", 5)):
        rows += read_rows(validation_set_path(name))[::step]
    return rows


def test_memo_equals_the_row_by_row_path_under_one_knob_moved_at_a_time():
    load_all()
    rows = _sample()
    names = knobs_to_refit(rows)
    assert len(names) >= 8  # the fitted knobs of training, serving and collectives families
    fast = memoised(_row_by_row)
    settings_ = [{}] + [_moved(n) for n in names] + [{}]  # back to the defaults: memo hits
    for values in settings_:
        with knobs.overridden(values):
            for row in rows:
                assert _outcome(fast, row) == _outcome(_row_by_row, row), (row["id"], values)


def test_rows_differing_in_one_column_are_predicted_apart():
    # a row and its copies with one cell changed to a value another row of the file has: the memo
    # gives what the row-by-row path gives, and the changed column changes the answer where the
    # model says so (a memo keyed on fewer columns would return the first row's value)
    rows = read_rows(validation_set_path("training"))
    base = next(r for r in rows if r["id"] == "meg21-t1-3")
    fast = memoised(_row_by_row)
    original = _outcome(fast, base)
    differing = 0
    for column in ("layers", "hidden", "seq_len", "global_batch", "tp", "pp", "system", "metric", "precision",
                   "micro_batch", "recompute", "framework", "vocab"):
        other = next(r[column] for r in rows if r.get(column) and r[column] != base.get(column))
        variant = {**base, "id": f"{base['id']}-{column}", column: other}
        got = _outcome(fast, variant)
        assert got == _outcome(_row_by_row, variant), column
        differing += got != original
    assert differing >= 10  # each of these columns enters the prediction of a Megatron GPT row
    # a column no reader knows yet is part of the key too (robust to new columns); the value is the same
    assert _outcome(fast, {**base, "new_column": "x"}) == original


def test_cross_validation_equals_the_row_by_row_path():
    rows = read_rows(validation_set_path("collectives"))
    rows += [r for r in read_rows(validation_set_path("training"))
             if r["id"].startswith(("mbr-moe-", "meg24-", "ttmem-", "meg21-t1-"))][:40]
    fast = cross_validate(rows).to_dict()
    slow = cross_validate(rows, predictor=_row_by_row).to_dict()
    fast["cv"].pop("run_time_s"), slow["cv"].pop("run_time_s")
    assert fast == slow


def test_a_cache_keyed_on_overrides_key_counts_as_reading_its_prefix():
    calls = []

    @lru_cache(maxsize=None)
    def bandwidth(key: tuple) -> float:  # reads its knob only when its key is new
        calls.append(key)
        return knobs.value("collectives.nvlink_efficiency")

    fast = memoised(lambda row: Prediction(float(row["x"]) * bandwidth(knobs.overrides_key("collectives."))))
    assert fast({"id": "a", "x": "2"}).value == 2 * knobs.value("collectives.nvlink_efficiency")
    with knobs.overridden({"collectives.nvlink_efficiency": 0.5}):
        assert fast({"id": "b", "x": "2"}).value == 1.0  # 2 x 0.5: predicted again
        with knobs.recording_reads(prefix_marks=True) as reads:  # a hit replays its reads
            fast({"id": "c", "x": "2"})
        assert "collectives." + knobs.PREFIX_READ in reads
        with knobs.recording_reads() as names:  # a plain recorder (calibrate's screen) gets knob names only
            fast({"id": "e", "x": "2"})
        assert names == {"collectives.nvlink_efficiency"}
    with knobs.overridden({"training.sustained_gemm_fraction": 0.7}):  # not read: the first prediction
        fast({"id": "d", "x": "2"})
    assert len(calls) == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.3, 1.0), st.floats(0.5, 1.0), st.sampled_from(["1", "2", "skip"])),
                min_size=1, max_size=12))
def test_memo_is_exact_for_any_sequence_of_knob_values(steps):
    # a prediction whose reads depend on a knob's value (B read only when A > 0.6) and that may skip:
    # after any sequence of overrides the memo answers as a fresh call
    def predict(row):
        a = knobs.value("collectives.nvlink_efficiency")
        if row["x"] == "skip" and a < 0.5:
            raise SkipRow("too slow")
        b = knobs.value("training.sustained_gemm_fraction") if a > 0.6 else 1.0
        return Prediction(a * b * (2.0 if row["x"] == "skip" else float(row["x"])))

    fast = memoised(predict)
    for a, b, x in steps:
        with knobs.overridden({"collectives.nvlink_efficiency": a, "training.sustained_gemm_fraction": b}):
            assert _outcome(fast, {"id": "r", "x": x}) == _outcome(predict, {"id": "r", "x": x})
