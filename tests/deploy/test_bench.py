"""The benchmark scripts of `serve run|plan --emit vllm-bench|sglang-bench|trtllm-bench`
(interfaces.deploy.bench): every option in the recorded table of that benchmark's version, the
prediction's workload stated exactly, and the script's own run configuration accepted by
`gpuplan calibrate import`, whose rows carry the same load (the loop closes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomllib
from typer.testing import CliRunner

from gpuplan.cli.main import app
from gpuplan.interfaces.deploy.bench import BENCHES
from gpuplan.interfaces.deploy.commandline import commands, here_documents

runner = CliRunner()
FIXTURES = Path(__file__).parent / "fixtures"


def cli(*args: str) -> str:
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def bench_words(text: str, target: str) -> dict[str, str]:
    """{option: value} of the benchmark command (flags map to '')."""
    program = BENCHES[target][3]
    words = next(w for w in commands(text) if w[:len(program)] == program)[len(program):]
    out, i = {}, 0
    while i < len(words):
        if i + 1 < len(words) and not words[i + 1].startswith("--"):
            out[words[i]] = words[i + 1]
            i += 2
        else:
            out[words[i]] = ""
            i += 1
    return out


@pytest.mark.parametrize("target", list(BENCHES))
def test_every_option_is_recorded_and_the_load_is_the_predictions(target):
    text = cli("serve", "run", "llama-3-8b", "--rate", "4", "--input-len", "1024", "--output-len", "128",
               "--emit", target)
    table = BENCHES[target][0]
    words = bench_words(text, target)
    assert all(table.lookup(w) is not None for w in words)
    # the workload of the prediction: Poisson 4 requests/s, fixed 1024 -> 128 tokens, the 2,000 requests
    # gpuplan simulates for an open loop (workloads/inference/replica.py STEADY_STATE.open_loop_requests)
    assert (words["--request-rate"], words["--random-input-len"], words["--random-output-len"],
            words["--num-prompts"]) == ("4.0", "1024", "128", "2000")
    # fixed lengths: vLLM draws in [len(1-r), len(1+r)] (r = 0), SGLang in [len r, len] (r = 1), TensorRT-LLM's
    # RandomDataset defaults to 0.0
    assert words.get("--random-range-ratio") == {"vllm-bench": "0.0", "sglang-bench": "1.0", "trtllm-bench": None}[target]
    assert words["--model"] == "meta-llama/Meta-Llama-3-8B"


def test_closed_loop_and_plan_replica_rate():
    words = bench_words(cli("serve", "run", "llama-3-8b", "--concurrency", "16", "--emit", "vllm-bench"), "vllm-bench")
    # a closed loop: no rate (the client's default, infinite), 16 in flight, max(2000, 4 x 16) requests
    assert "--request-rate" not in words and words["--max-concurrency"] == "16" and words["--num-prompts"] == "2000"
    plan = json.loads(cli("serve", "plan", "llama-3-8b", "--rate", "20", "--engine", "vllm", "--json"))
    words = bench_words(cli("serve", "plan", "llama-3-8b", "--rate", "20", "--emit", "vllm-bench"), "vllm-bench")
    # one replica measured at its share of the rate, the open loop the plan verified
    assert float(words["--request-rate"]) == pytest.approx(20 / plan["best"]["replicas"])


@pytest.mark.parametrize("target, kind, result", [
    ("trtllm-bench", "trtllm", FIXTURES / "trtllm_benchmark_serving_result.json"),
    ("vllm-bench", "vllm", Path(__file__).parents[1] / "calibration" / "samples" / "vllm_bench_serve_llama8b.json"),
])
def test_calibrate_import_reads_the_result_with_the_scripts_config(tmp_path, target, kind, result):
    text = cli("serve", "run", "llama-3-8b", "--concurrency", "16", "--input-len", "2048", "--output-len", "256",
               "--emit", target)
    _, bodies = here_documents(text)
    config = tmp_path / "gpuplan-bench.toml"
    config.write_text(bodies["gpuplan-bench.toml"])
    assert tomllib.loads(config.read_text())["tp"] == 1
    line = next(w for w in commands(text) if w[:3] == ["gpuplan", "calibrate", "import"])
    assert line[3] == kind
    rows = json.loads(cli("calibrate", "import", kind, str(result), "--config", str(config), "--json"))["rows"]
    tpot = next(r for r in rows if r["metric"] == "tpot_ms")
    engine = {"trtllm": "tensorrt-llm", "vllm": "vllm"}[kind]
    # the system is the replica's node (the H100's widest catalog system), which sets its TP all-reduce path
    assert (tpot["engine"], tpot["system"], tpot["layers"], tpot["tp"]) == (engine, "dgx-h100", "32", "1")
    if kind == "trtllm":
        # the FIXTURE: max_concurrency 16, 4,096,000 / 2,000 = 2,048 input and 512,000 / 2,000 = 256 output tokens,
        # mean_tpot_ms 2.73: the closed loop the script ran
        assert (tpot["concurrency"], tpot["input_len"], tpot["output_len"], tpot["value"]) == ("16", "2048", "256", "2.73")


def test_bench_refuses_what_the_random_dataset_cannot_state():
    r = runner.invoke(app, ["serve", "run", "llama-3-8b", "--rate", "4", "--input-dist", "uniform:256:768",
                            "--emit", "vllm-bench"])
    assert r.exit_code == 2 and "fixed lengths" in r.output
    r = runner.invoke(app, ["serve", "run", "llama-3-8b", "--rate", "4", "--engine", "sglang", "--emit", "vllm-bench"])
    assert r.exit_code == 2 and "--engine" in r.output
