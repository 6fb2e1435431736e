"""The HTTP API at its edges (issue 28, web): raw input never reaches a response header, no field
reads a path on the server, fields and bodies are bounded, JSON numbers follow the CLI's rules
(`true` is not 1, `1e400` is a 422 naming the field), and every malformed request gets a 4xx naming
the field (never a 500, never a dropped connection)."""

from __future__ import annotations

import json

import pytest

from gpuplan.web.app import MAX_BODY_BYTES, MAX_HEADER_CHARS, header_value
from gpuplan.web.endpoints import ENDPOINTS, MAX_LIST_ITEMS, MAX_TEXT_CHARS


def _error(r, status: int, field: str) -> dict:
    assert r.status_code == status, (r.status_code, r.text)
    err = r.json()["error"]
    assert err["field"] == field and "\n" not in err["message"], err
    return err


def _printable_header(r) -> None:
    line = r.headers.get("x-gpuplan-command", "")
    assert all(" " <= c <= "~" for c in line) and len(line) <= MAX_HEADER_CHARS, line[:200]


@pytest.mark.parametrize("text", ["h100\nX-Injected: 1", "h100\r\n", "h100\x00", "h100\u2028", "caf\u00e9"])
def test_control_characters_never_reach_the_header(client, text):
    # a raw newline or NUL in X-Gpuplan-Command made the server drop the connection (no response)
    r = client.post("/api/v1/hw/show", json={"gpu": text})
    if text.strip() != "h100":  # 'h100\r\n' is h100 once stripped: an answer, with a clean header
        _error(r, 400, "GPU")
    _printable_header(r)
    assert "x-injected" not in r.headers and r.headers["x-gpuplan-command"].startswith("gpuplan hw show ")


def test_header_value_escapes_and_bounds():
    assert header_value("a\nb\x00c\u00e9") == "a\\nb\\x00c\\xe9"
    long = header_value("x" * 10_000)
    assert len(long) == MAX_HEADER_CHARS and long.endswith("...")


def test_a_long_field_makes_no_long_header(client):
    r = client.post("/api/v1/hw/show", json={"gpu": "x" * 9000})  # under the field bound, over the header bound
    _error(r, 400, "GPU")
    _printable_header(r)


def test_fields_and_bodies_are_bounded(client):
    _error(client.post("/api/v1/hw/show", json={"gpu": "x" * (MAX_TEXT_CHARS + 1)}), 422, "gpu")
    _error(client.post("/api/v1/mig/plan", json={"profiles": ["1g.10gb"] * (MAX_LIST_ITEMS + 1)}), 422, "profiles")
    big = b'{"nodes": ' + b"9" * MAX_BODY_BYTES + b"}"
    _error(client.post("/api/v1/dc/power", content=big, headers={"content-type": "application/json"}), 413, "body")
    deep = b"[" * 100_000
    _error(client.post("/api/v1/dc/power", content=deep, headers={"content-type": "application/json"}), 422, "body")


@pytest.mark.parametrize("body,field", [
    ('{"nodes": true}', "nodes"),  # true is not 1
    ('{"pue": true}', "pue"),
    ('{"pue": 1e400}', "pue"),  # an OverflowError text before
    ('{"cloud_usd_per_gpu_hour": 1e400}', "cloud_usd_per_gpu_hour"),
    ('{"nodes": "8"}', "nodes"),  # a string is not a number
    ('{"nodes": 8.5}', "nodes"),
    ('{"fabric": 1}', "fabric"),  # 1 is not true
])
def test_json_numbers_follow_the_cli_rules(client, body, field):
    path = "/api/v1/dc/tco" if "cloud" in body else "/api/v1/dc/power"
    _error(client.post(path, content=body.encode(), headers={"content-type": "application/json"}), 422, field)


def test_big_integers_get_the_cli_message(client):
    err = _error(client.post("/api/v1/dc/power", json={"nodes": 10**30}), 400, "nodes")
    assert "within int64" in err["message"]


@pytest.mark.parametrize("path,body,field", [
    ("model/show", {"model": "/etc/passwd"}, "model"),
    ("model/show", {"model": "~/config.json"}, "model"),
    ("model/show", {"model": "../../etc/hostname"}, "model"),
    ("serve/run", {"model": "gpt3-125m", "lengths": "/etc/passwd"}, "lengths"),
    ("serve/run", {"model": "gpt3-125m", "spec_tokens": 2, "spec_acceptance": 0.5, "draft_model": "/tmp"}, "draft_model"),
])
def test_no_server_paths_from_a_request(client, path, body, field):
    err = _error(client.post(f"/api/v1/{path}", json=body), 400, field)
    assert "bundled names only" in err["message"]


def test_an_existing_relative_path_is_refused(client, tmp_path, monkeypatch):
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    _error(client.post("/api/v1/model/show", json={"model": "config.json"}), 400, "model")


def test_bundled_names_and_hub_ids_still_work(client):
    for name in ("llama-3-8b", "meta-llama/Llama-2-7b-hf"):
        r = client.post("/api/v1/model/show", json={"model": name})
        assert r.status_code == 200, r.text


def test_set_values_follow_the_cli_rules(client):
    err = _error(client.post("/api/v1/dc/power", json={"overrides": ["rack_usable_units=0"]}), 400, "rack_usable_units")
    assert ">= 1 and <= 60" in err["message"]
    _error(client.post("/api/v1/dc/power", json={"overrides": ["pue=\u00b2"]}), 400, "set")


# ---- a fixed sample of malformed requests over every endpoint and field (the fuzz suite's web part) ----------

MALFORMED = [True, None, -1, 0, 1e308, "", " ", "\n", "\x00", "\u00b2", "1e400", "nan", "x" * 300, [], ["\n"], {"a": 1}]


def _cases():
    out = []
    for ep in ENDPOINTS:
        for name in ep.fields():
            for i, value in enumerate(MALFORMED):
                if (len(out) * 7 + i) % 11 == 0:  # a fixed, spread-out sample (~1 in 11 combinations)
                    out.append((ep.path, name, value))
    return out


@pytest.mark.parametrize("path,name,value", _cases())
def test_malformed_fields_get_a_4xx_naming_the_field(client, path, name, value):
    r = client.post(path, content=json.dumps({name: value}).encode(), headers={"content-type": "application/json"})
    _printable_header(r)
    if r.status_code == 200:  # a value the field accepts (e.g. an empty list): a normal answer
        assert "error" not in r.json()
        return
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    err = r.json()["error"]
    assert err["field"] and "\n" not in err["message"] and "Traceback" not in err["message"], err
    assert "OverflowError" not in err["message"] and "RecursionError" not in err["message"], err
