"""Malformed requests to the HTTP API (FastAPI TestClient), the web part of benchmarks/fuzz_run.py.

Each request is a valid body of one endpoint (tests/fuzz/cli_cases.BASE, as JSON fields) with one
field replaced by a value its JSON type never takes (`true` where a number goes, a number written
as text, a Unicode digit, `1e400`, NaN, a control character, a text or list past its bound, an
object), or a malformed body (not JSON, an array, nested past the bound, larger than the bound, an
unknown field). The oracle: a 4xx whose JSON error names the field (the body for a body-level
fault), a printable X-Gpuplan-Command header, never a 2xx or a 5xx.
"""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fuzz"))


def _norm(name: str) -> str:
    return name.strip().lstrip("-").replace("-", "_").lower()


def base_bodies() -> dict[str, tuple[object, dict]]:
    """endpoint path -> (Endpoint, a valid body built from cli_cases.BASE)."""
    from cli_cases import BASE

    from gpuplan.web.endpoints import ENDPOINTS

    out = {}
    for ep in ENDPOINTS:
        args = BASE.get(ep.words)
        if args is None:
            continue
        fields = ep.fields()
        body: dict = {}
        positional = [a for a in args[: next((i for i, a in enumerate(args) if a.startswith("--")), len(args))]]
        if ep.positional:
            name = ep.positional[0]
            body[name] = positional if kind_of(fields[name][0]) == "list" else (positional[0] if positional else None)
        by_flag = {ep.flag(n): n for n in fields}
        rest = args[len(positional):]
        for flag, value in zip(rest[::2], rest[1::2]):
            name = by_flag.get(flag)
            if name is None:
                continue
            kind = str(fields[name][0])
            body[name] = (int(value) if "int" in kind and value.isdigit() else float(value)) \
                if kind_of(kind) == "number" else value
        out[ep.path] = (ep, {k: v for k, v in body.items() if v is not None})
    return out


NUMBER_BAD = [True, False, "8", "1e400", "\u00b2", "\uff18", "nan", [], {}, "x", [1], "0x10"]
TEXT_BAD = [True, "\x00", "a\nb", "h100\r\nX-Injected: 1", "x" * 10_001, {}, [[]], "\u2028"]
LIST_BAD = ["\x00", {}, [{}], ["\x00"], [True], [[1]], ["x" * 10_001]]
BOOL_BAD = [1, 0, "true", "yes", [], {}, None.__class__.__name__]
RAW_BAD = [b"{", b"[]", b"[1, 2]", b'"text"', b"null", b"{" * 100_000, b'{"no_such_field": 1}', b"\xff\xfe",
           b'{"a": NaN}', b"1e400"]


def kind_of(kind) -> str:
    """'list', 'text or list', 'bool', 'number', 'dict' or 'text': the JSON type a field takes."""
    text = str(kind)
    for word in ("StringConstraints(", "Field("):  # constraint reprs (their words hold 'int', 'list' ...)
        while word in text:
            start = text.index(word)
            depth, i = 0, start + len(word) - 1
            for i in range(start + len(word) - 1, len(text)):
                depth += text[i] == "("
                depth -= text[i] == ")"
                if depth == 0:
                    break
            text = text[:start] + text[i + 1:]
    if text.startswith("typing.Union") and "list[" in text:
        return "text or list"
    if "list[" in text:
        return "list"
    for name in ("bool", "dict"):
        if name in text:
            return name
    if "int" in text or "float" in text:
        return "number"
    return "text"


def _bad_values(kind) -> list:
    return {"list": LIST_BAD, "text or list": [v for v in LIST_BAD if v != "\x00"] + [True, 5], "bool": BOOL_BAD,
            "number": NUMBER_BAD, "dict": ["x", [], 1, True], "text": TEXT_BAD}[kind_of(kind)]


#: what a field needs beside the base body to be read at all (or must not have): (path, field) ->
#: (fields to add, fields to drop); e.g. --draft-model needs --spec-tokens, --gpu excludes --cc
NEEDS = {"spec_acceptance": ({"spec_tokens": 2}, ()), "draft_model": ({"spec_tokens": 2, "spec_acceptance": 0.7}, ()),
         "mtp": ({"spec_tokens": 2, "spec_acceptance": 0.7}, ()), ("/api/v1/kernel/occupancy", "gpu"): ({}, ("cc",)),
         ("/api/v1/kernel/occupancy", "cc"): ({}, ("gpu",))}


def _body_for(path: str, body: dict, name: str) -> dict:
    add, drop = NEEDS.get((path, name), NEEDS.get(name, ({}, ())))
    return {**{k: v for k, v in body.items() if k not in drop}, **add}


def names_the_field(ep, named: str, field: str) -> bool:
    """The error's field is the request's field, or the CLI option it stands for (`overrides` is --set)."""
    return _norm(named) in (_norm(field), _norm(ep.flag(field)))


def requests_to_send(n: int, rng: random.Random) -> list[tuple[str, bytes, str]]:
    """(endpoint, path, body bytes, field the error must name; '' = any) for n malformed requests."""
    reqs = []
    bodies = base_bodies()
    for path, (ep, base) in bodies.items():
        for name, (kind, _default) in ep.fields().items():
            body = _body_for(path, base, name)
            for value in _bad_values(str(kind)):
                if value is None or (str(kind).startswith("typing.Optional") and value is None):
                    continue
                reqs.append((path, json.dumps({**body, name: value}).encode(), name))
            if kind_of(kind) == "number":  # numbers JSON itself cannot hold
                for raw in ("NaN", "Infinity", "1e400", "-1e400"):
                    text = json.dumps({**body, name: 0}).replace(f'"{name}": 0', f'"{name}": {raw}')
                    reqs.append((path, text.encode(), name))
        for raw in RAW_BAD:
            reqs.append((path, raw, ""))
    eps = {path: ep for path, (ep, _) in bodies.items()}
    rng.shuffle(reqs)
    chosen = reqs[:n] if n < len(reqs) else reqs
    return [(eps[p], p, b, f) for p, b, f in chosen]


def run_web(n: int, rng: random.Random) -> dict:
    """Send the requests; counts per outcome and the distinct causes of every wrong answer."""
    from fastapi.testclient import TestClient

    from gpuplan.web.app import MAX_HEADER_CHARS, create_app

    client = TestClient(create_app("127.0.0.1", 8000), base_url="http://127.0.0.1:8000", raise_server_exceptions=False)
    counts = Counter()
    causes: Counter = Counter()
    for ep, path, body, field in requests_to_send(n, rng):
        counts["requests"] += 1
        try:
            r = client.post(path, content=body, headers={"content-type": "application/json"})
        except Exception as exc:  # noqa: BLE001 - no response at all
            counts["no_response"] += 1
            causes[f"{path} {field}: no response: {type(exc).__name__}"] += 1
            continue
        header = r.headers.get("x-gpuplan-command", "")
        if not all(" " <= c <= "~" for c in header) or len(header) > MAX_HEADER_CHARS:
            counts["bad_header"] += 1
            causes[f"{path} {field}: header {header[:60]!r}"] += 1
        if r.status_code >= 500:
            counts["server_error"] += 1
            causes[f"{path} {field}: {r.status_code} {r.text[:100]}"] += 1
            continue
        if r.status_code < 400:
            counts["accepted"] += 1
            causes[f"{path} {field}: {r.status_code} for {body[:80]!r}"] += 1
            continue
        try:
            err = r.json()["error"]
        except (ValueError, KeyError, TypeError):
            counts["no_error_object"] += 1
            causes[f"{path} {field}: {r.status_code} {r.text[:100]}"] += 1
            continue
        named = err.get("field") or ""
        if not named or field and not names_the_field(ep, named, field):
            counts["wrong_field"] += 1
            causes[f"{path} {field}: names {err.get('field')!r}: {err.get('message', '')[:80]}"] += 1
            continue
        if "\n" in err.get("message", "") or "Traceback" in err.get("message", ""):
            counts["not_one_line"] += 1
            causes[f"{path} {field}: message {err.get('message', '')[:80]!r}"] += 1
            continue
        counts["4xx_naming_the_field"] += 1
    return {**counts, "causes": causes}
