"""The Train and Serve pages' launch-config downloads: POST /api/v1/train/config and
/api/v1/serve/run/config answer the text `gpuplan ... --emit TARGET` prints (the header command
names that line), with a file name; bad input is a 4xx naming the field."""

from __future__ import annotations

import shlex

import pytest

from tests.web.conftest import cli


@pytest.mark.parametrize("path, body, target, filename", [
    ("train/config", {"model": "llama-3-8b", "gpus": 64, "tokens": "10B"}, "torchtitan", "torchtitan.toml"),
    ("train/config", {"model": "llama-3-70b", "gpus": 1024}, "nemo", "nemo_pretrain.sh"),
    ("serve/run/config", {"model": "llama-3-8b", "tp": 2, "rate": 4}, "vllm", "vllm_serve.sh"),
    ("serve/run/config", {"model": "llama-3-8b", "rate": 4}, "vllm-bench", "vllm_bench.sh"),
    ("serve/run/config", {"model": "llama-3-8b", "concurrency": 8, "engine": "sglang"}, "k8s", "k8s.yaml"),
])
def test_download_is_the_clis_emitted_text(client, path, body, target, filename):
    r = client.post(f"/api/v1/{path}", json={**body, "target": target})
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["target"] == target and d["filename"] == filename and d["written_for"]
    line = r.headers["X-Gpuplan-Command"]
    words = shlex.split(line)
    # the header is the CLI line that prints the same text: `gpuplan train|serve run ... --emit TARGET`
    assert words[0] == "gpuplan" and words[words.index("--emit") + 1] == target and "--json" not in words
    res = cli(words[1:])
    assert res.exit_code == 0, res.output
    assert res.stdout == d["text"]


def test_bad_target_is_a_4xx_naming_emit(client):
    r = client.post("/api/v1/train/config", json={"model": "llama-3-8b", "gpus": 8, "target": "nemo-megatron"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["field"] == "emit" and "allowed: megatron, nemo, torchtitan, deepspeed, maxtext, torchtune, peft" in err["message"]
    r = client.post("/api/v1/serve/run/config", json={"model": "llama-3-8b", "rate": 4})  # no target
    assert r.status_code == 422 and r.json()["error"]["field"] == "target"
