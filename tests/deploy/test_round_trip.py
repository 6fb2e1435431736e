"""Emit, then read back: the same plan and the same prediction (docs/deploy.md, issue "From plan to
running job and back"). Every number compared here comes from gpuplan twice (once from the options,
once from the config it wrote), so the test asserts equality, not a value."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from gpuplan import api
from gpuplan.cli.main import app

runner = CliRunner()
#: keys of `train --json` that echo inputs rather than predict (the run length is read back as
#: whole steps, and a config states its batch, so the batch is no longer "the default")
TRAIN_INPUT_ECHO = {"tokens", "global_batch_default", "global_batch_note", "search", "read_from", "unmodelled_options"}


def cli(*args: str) -> str:
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def _train_json(*args: str) -> dict:
    return json.loads(cli("train", *args, "--json"))


@pytest.mark.parametrize("target, model, gpus", [
    ("megatron", "llama-3-70b", "1024"),
    ("megatron", "mixtral-8x7b", "64"),
    ("torchtitan", "llama-3-8b", "64"),
    ("nemo", "llama-3-70b", "1024"),
    ("maxtext", "llama-3-70b", "1024"),
    ("maxtext", "llama-3-8b", "64"),
])
def test_training_round_trip(tmp_path, target, model, gpus):
    text = cli("train", model, "--gpus", gpus, "--emit", target)
    path = tmp_path / "launch.txt"
    path.write_text(text)
    # the prediction `--emit` made: the target's framework, searched over the plans its config can state
    searched = api.train(model, "dgx-h100", int(gpus), **api.train_options_for(target, None)).to_dict()
    read = _train_json("--from", str(path), "--system", "dgx-h100")
    assert read["read_from"] == target and read["unmodelled_options"] == []
    assert read["best_plan"] == searched["best_plan"]
    for key in set(searched) - TRAIN_INPUT_ECHO:
        assert read[key] == searched[key], key
    # the run length: whole steps of global batch x sequence, at least the tokens asked for
    assert read["steps"] == searched["steps"] and read["tokens"] >= searched["tokens"]


def test_deepspeed_round_trip(tmp_path):
    # a DeepSpeed JSON states no model, GPU count or sequence: --from takes MODEL and --gpus
    text = cli("train", "llama-3-8b", "--gpus", "16", "--tokens", "1B", "--emit", "deepspeed")
    path = tmp_path / "ds.json"
    path.write_text(text)
    searched = api.train("llama-3-8b", "dgx-h100", 16, tokens="1B", **api.train_options_for("deepspeed", None)).to_dict()
    read = _train_json("llama-3-8b", "--gpus", "16", "--tokens", "1B", "--from", str(path))
    assert read["best_plan"] == searched["best_plan"]
    assert (read["best_plan"]["tp"], read["best_plan"]["pp"]) == (1, 1)  # the plans a DeepSpeed JSON states
    for key in set(searched) - TRAIN_INPUT_ECHO:
        assert read[key] == searched[key], key


SERVE_ECHO = {"read_from", "unmodelled_options"}


@pytest.mark.parametrize("target, engine, model, tp", [
    ("vllm", "vllm", "llama-3-8b", "2"),
    ("sglang", "sglang", "llama-3-8b", "2"),
    ("trtllm", "tensorrt-llm", "llama-3-8b", "2"),
    ("vllm", "vllm", "mixtral-8x7b", "4"),
])
def test_serving_round_trip(tmp_path, target, engine, model, tp):
    load = ["--rate", "4", "--input-len", "1024", "--output-len", "128"]
    text = cli("serve", "run", model, "--tp", tp, *load, "--emit", target)
    path = tmp_path / "serve.sh"
    path.write_text(text)
    direct = json.loads(cli("serve", "run", model, "--tp", tp, *load, "--engine", engine, "--json"))
    read = json.loads(cli("serve", "run", "--from", str(path), "--gpu", "h100-sxm5-80gb", *load, "--json"))
    assert read["read_from"] == target and read["unmodelled_options"] == []
    assert {k: v for k, v in read.items() if k not in SERVE_ECHO} == direct


def test_serving_round_trip_with_attention_dp_and_fp8(tmp_path):
    # MoE with expert parallelism over tp and attention data parallelism, fp8 weights and KV (SGLang)
    opts = ["mixtral-8x7b", "--tp", "4", "--ep", "4", "--attention-dp", "4", "--weight-dtype", "fp8", "--kv-dtype", "fp8",
            "--concurrency", "32", "--input-len", "512", "--output-len", "64"]
    text = cli("serve", "run", *opts, "--emit", "sglang")
    assert "--enable-dp-attention" in text and "--quantization fp8" in text
    direct = json.loads(cli("serve", "run", *opts, "--engine", "sglang", "--json"))
    read = json.loads(cli("serve", "run", "--from", text, "--gpu", "h100-sxm5-80gb", "--concurrency", "32",
                          "--input-len", "512", "--output-len", "64", "--json"))
    assert {k: v for k, v in read.items() if k not in SERVE_ECHO} == direct


def test_kubernetes_manifests_carry_replicas_and_gpus():
    out = json.loads(cli("serve", "plan", "llama-3-8b", "--rate", "20", "--engine", "vllm", "--json"))
    best = out["best"]
    text = cli("serve", "plan", "llama-3-8b", "--rate", "20", "--engine", "vllm", "--emit", "k8s")
    docs = [d for d in yaml.safe_load_all(text) if d]
    assert [d["kind"] for d in docs] == ["Deployment"]
    spec = docs[0]["spec"]
    assert spec["replicas"] == best["replicas"]
    container = spec["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == best["tp"]
    assert container["command"][:3] == ["vllm", "serve", "meta-llama/Meta-Llama-3-8B"]
    assert container["command"][container["command"].index("--tensor-parallel-size") + 1] == str(best["tp"])


def test_kubernetes_multi_node_instance_is_a_leader_worker_set():
    # a 16-GPU instance on 8-GPU nodes: one LeaderWorkerSet group of 2 pods x 8 GPUs (TensorRT-LLM with its options
    # file as a ConfigMap)
    text = cli("serve", "run", "llama-3.1-405b", "--tp", "8", "--pp", "2", "--concurrency", "8", "--input-len", "256",
               "--output-len", "16", "--engine", "tensorrt-llm", "--system", "dgx-h100", "--emit", "k8s")
    docs = [d for d in yaml.safe_load_all(text) if d]
    assert [d["kind"] for d in docs] == ["ConfigMap", "LeaderWorkerSet"]
    lws = docs[1]["spec"]
    assert lws["replicas"] == 1 and lws["leaderWorkerTemplate"]["size"] == 2
    leader = lws["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert "--pp_size" in leader["command"]
    assert json.loads(docs[0]["data"]["extra-llm-api-options.yaml"])["kv_cache_config"]["tokens_per_block"] == 64


def test_train_from_on_twice_the_gpus_keeps_layout_and_batch(tmp_path):
    # the same tp x pp x cp group and global batch on 2x the GPUs: dp doubles, each rank runs half the micro-batches
    text = cli("train", "llama-3-8b", "--gpus", "64", "--emit", "megatron")
    path = tmp_path / "launch.sh"
    path.write_text(text)
    one = _train_json("--from", str(path), "--system", "dgx-h100")
    two = _train_json("--from", str(path), "--system", "dgx-h100", "--gpus", "128")
    assert two["best_plan"] == {**one["best_plan"], "dp": 2 * one["best_plan"]["dp"]}
    assert two["global_batch_sequences"] == one["global_batch_sequences"]
    assert two["num_micro_batches"] * 2 == one["num_micro_batches"]


def test_disaggregated_plan_is_one_manifest_per_pool():
    # llama-3-8b at 40 req/s, 4096-token prompts and a 20 ms TPOT objective: the plan's best option is
    # disaggregated (its `--json`), so the manifests are one Deployment per pool with the pool's instances and tp
    opts = ["serve", "plan", "llama-3-8b", "--rate", "40", "--input-len", "4096", "--output-len", "256", "--tpot-ms", "20",
            "--disaggregated", "--engine", "vllm"]
    best = json.loads(cli(*opts, "--json"))["best"]
    assert best["mode"] == "disaggregated"
    docs = [d for d in yaml.safe_load_all(cli(*opts, "--emit", "k8s")) if d]
    got = {d["metadata"]["labels"]["gpuplan/role"]: (d["spec"]["replicas"],
           d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]) for d in docs}
    assert got == {p["role"]: (p["instances"], p["tp"]) for p in best["pools"]}
    r = runner.invoke(app, [*opts, "--emit", "vllm"])  # one command cannot state two pools
    assert r.exit_code == 2 and "--emit k8s" in r.output
