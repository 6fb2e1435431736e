"""`key=value` override commands in and out: NeMo 2's `nemo llm pretrain --factory R key=value ...`
(NeMo-Run CLI: a dotted path into the recipe, the value a Python literal: `True`, `None`, `2`) and
MaxText's `python3 -m maxtext.trainers.pre_train.train base.yml key=value ...` (pyconfig: a base.yml
key, the value read as YAML: `true`, `2`, `full`).

`render` writes one override per line after the program's words, each key through the target's
OptionTable (`OptionTable.key`: a key that is not recorded, or a value outside its recorded
choices, is an AssertionError, never output). `parse` reads the overrides of a command back: the
recorded keys' values (typed by the literal rules below), every other `key=value` and every other
word kept as unmodelled, never dropped.
"""

from __future__ import annotations

import shlex

from gpuplan.errors import InputError
from gpuplan.interfaces.deploy.options import OptionTable

#: the literal spellings of the two dialects: (true, false, null)
PYTHON = ("True", "False", "None")
YAML = ("true", "false", "null")


def literal_text(value, dialect: tuple[str, str, str]) -> str:
    """A value as the dialect writes it on a command line (bool / None by `dialect`, numbers as repr)."""
    if value is True:
        return dialect[0]
    if value is False:
        return dialect[1]
    if value is None:
        return dialect[2]
    if isinstance(value, (int, float)):
        return repr(value)
    return str(value)


def parse_literal(text: str):
    """A command-line value as a Python value: bools and null in either dialect, int, float, else the
    string (quotes stripped)."""
    t = text.strip()
    if t in ("True", "true"):
        return True
    if t in ("False", "false"):
        return False
    if t in ("None", "null", "~"):
        return None
    try:
        return int(t.replace("_", "")) if t.lstrip("+-").replace("_", "").isdigit() else float(t)
    except ValueError:
        return t.strip("'\"")


def render(head: list[str], table: OptionTable, pairs: list[tuple[str, object]],
           dialect: tuple[str, str, str]) -> str:
    """`head` then one `key=value` per line (backslash continuations), each key checked against `table`."""
    lines = [" ".join(shlex.quote(w) for w in head)]
    for key, value in pairs:
        checked = table.key(key, value)
        lines.append("  " + shlex.quote(f"{key}={literal_text(checked, dialect)}"))
    return " \\\n".join(lines) + "\n"


def parse(words: list[str], table: OptionTable, field_name: str = "from") -> tuple[dict[str, object], list[str], list[str]]:
    """({recorded key: value}, unmodelled `key=value` overrides, the other words) of a command's
    words after the program (the last override of a key wins, as both CLIs apply them in order)."""
    values: dict[str, object] = {}
    unmodelled: list[str] = []
    others: list[str] = []
    for w in words:
        key, eq, raw = w.partition("=")
        if not eq or not key or key.startswith("-"):
            others.append(w)
            continue
        if key in table.options:
            value = parse_literal(raw)
            choices = table.options[key].choices
            if choices and value not in choices:
                allowed = ", ".join(str(c) for c in choices)
                raise InputError(f"{key}: {raw!r} is not one of {allowed}", field=key, allowed=allowed)
            values[key] = value
        else:
            unmodelled.append(w)
    return values, unmodelled, others


def integer(values: dict, key: str, default: int | None = None, minimum: int = 1) -> int | None:
    """An integer override (InputError naming the key unless an integer >= minimum)."""
    v = values.get(key, default)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise InputError(f"{key}: {v!r} is not an integer >= {minimum}", field=key)
    return v


def number(values: dict, key: str, default: float | None = None) -> float | None:
    """A positive number override (InputError naming the key otherwise)."""
    v = values.get(key, default)
    if v is None:
        return None
    if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
        raise InputError(f"{key}: {v!r} is not a positive number", field=key)
    return float(v)
