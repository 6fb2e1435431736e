"""`gpuplan fit` CLI: JSON contract, the seeds' 7B question, inverse questions, clean errors."""

import json

from typer.testing import CliRunner

from gpuplan.cli.main import app

runner = CliRunner()
KEYS = {"weights", "gradients", "optimizer", "activations", "other", "total"}


def run_json(*args):
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_train_json_contract():
    d = run_json("fit", "train", "llama-3-8b", "--gpu", "h100-sxm5-80gb", "--gpus", "8", "--tp", "2", "--sharding", "zero1")
    assert set(d["per_gpu_bytes"]) == KEYS and isinstance(d["fits"], bool)
    assert d["plan"]["dp"] == 4  # derived: 8 / (tp 2)
    assert abs(sum(d["per_gpu_bytes"][k] for k in KEYS - {"total"}) - d["per_gpu_bytes"]["total"]) < 1


def test_seed_question_7b_adam_fp16():
    # "memory required to train a 7B model with Adam in FP16: 18 bytes per parameter" -- Llama-2-7B, one GPU:
    # 6,738,415,616 x (2 + 4 + 12) = 121.3e9 B = 112.96 GiB of model states: does not fit in 80 GB.
    d = run_json("fit", "train", "llama-2-7b", "--gpu", "h100-sxm5-80gb", "--gpus", "1", "--precision", "fp16", "--seq-len", "2048")
    assert d["bytes_per_param"]["model_states"] == 18
    states = sum(d["per_gpu_bytes"][k] for k in ("weights", "gradients", "optimizer"))
    assert states == 18 * 6_738_415_616
    assert d["fits"] is False and d["per_gpu_bytes"]["activations"] > 0
    d16 = run_json("fit", "train", "llama-2-7b", "--gpu", "h100-sxm5-80gb", "--gpus", "1", "--precision", "fp16",
                   "--grad-precision", "fp16", "--seq-len", "2048")
    assert d16["bytes_per_param"]["model_states"] == 16
    text = runner.invoke(app, ["fit", "train", "llama-2-7b", "--gpu", "h100-sxm5-80gb", "--gpus", "1", "--precision", "fp16"]).output
    assert "18 B/param" in text and "16 B/param" in text and "activations add" in text


def test_inverse_commands():
    # seq 2048: at 4096 one micro-batch needs 77.4 GiB, past the 72 GiB usable of 80 at the 10% memory headroom
    d = run_json("fit", "max-batch", "llama-3-8b", "--gpu", "h100-sxm5-80gb", "--gpus", "8", "--sharding", "zero1", "--seq-len", "2048")
    assert d["max_micro_batch"] >= 1 and d["memory"]["fits"]
    # with no headroom (--memory-headroom 0) the 4096 case fits at micro-batch 1 (77.4 <= 80 GiB)
    d = run_json("fit", "max-batch", "llama-3-8b", "--gpu", "h100-sxm5-80gb", "--gpus", "8", "--sharding", "zero1", "--seq-len",
                 "4096", "--memory-headroom", "0")
    assert d["max_micro_batch"] >= 1 and d["memory"]["fits"]
    d = run_json("fit", "max-seq", "llama-3-8b", "--gpu", "h100-sxm5-80gb", "--gpus", "8", "--sharding", "zero1")
    assert d["max_seq_len"] % 128 == 0 and d["memory"]["fits"]
    d = run_json("fit", "min-gpus", "llama-3-70b", "--gpu", "h100-sxm5-80gb", "--sharding", "zero1", "--seq-len", "4096")
    p = d["plan"]
    assert d["min_gpus"] == p["tp"] * p["pp"] * p["dp"] * p["cp"] and d["memory"]["fits"]


def test_impossible_parallelism_exit_2():
    r = runner.invoke(app, ["fit", "train", "gpt2", "--gpu", "h100-sxm5-80gb", "--gpus", "8", "--tp", "8"])
    assert r.exit_code == 2 and "tp" in r.output and "heads" in r.output
    r = runner.invoke(app, ["fit", "train", "gpt2", "--gpu", "h100-sxm5-80gb", "--gpus", "8", "--tp", "2", "--dp", "2"])
    assert r.exit_code == 2 and "--gpus" in r.output
    r = runner.invoke(app, ["fit", "train", "gpt2", "--gpu", "no-such-gpu", "--gpus", "1"])
    assert r.exit_code == 2
