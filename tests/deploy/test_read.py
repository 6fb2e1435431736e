"""Reading users' own launch configs (`train --from`, `serve run --from`): fixtures in the programs'
documented formats (tests/deploy/fixtures, marked FIXTURE: not gpuplan output), what each option is read
as, unmodelled options listed, bad input refused in one line with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuplan.cli.main import app
from gpuplan.errors import InputError
from gpuplan.interfaces.api.deploy import read_serving, read_training

FIXTURES = Path(__file__).with_name("fixtures")
runner = CliRunner()


def test_megatron_gpt3_example_script():
    launch = read_training(str(FIXTURES / "megatron_gpt3_175b.sh"))
    # 48 nodes x 8 GPUs (torchrun --nnodes 48 --nproc_per_node 8); tp 8 x pp 16 = 128 -> dp 384 / 128 = 3
    assert launch.gpus == 384
    p = launch.plan
    assert (p.tp, p.pp, p.dp, p.cp, p.micro_batch, p.global_batch, p.seq_len) == (8, 16, 3, 1, 1, 1536, 2048)
    assert p.precision.value == "fp16" and p.recompute.value == "none" and p.sharding.value == "none"
    assert launch.steps == 500000
    # 96 layers, hidden 12288, 96 heads, GELU 4h FFN, LayerNorm, learned positions, biases, tied embeddings, dropout
    # 0.1 (Megatron-LM's defaults), GPT-2 BPE vocabulary 50,257: GPT-3 175B (Brown et al. 2020, Table 2.1)
    assert launch.model.name == "gpt3-175b"
    unmodelled = " | ".join(launch.unmodelled)
    for option in ("--rampup-batch-size 16 16 5859375", "--lr 6.0e-5", "--data-path /data/gpt3_text_document",
                   "(torchrun) --master_addr localhost", "--split 949,50,1"):
        assert option in unmodelled, option


def test_train_from_cli_lists_unmodelled_options():
    r = runner.invoke(app, ["train", "--from", str(FIXTURES / "megatron_gpt3_175b.sh"), "--system", "dgx-a100-80gb",
                            "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["read_from"] == "megatron"
    assert out["best_plan"]["tp"] == 8 and out["best_plan"]["pp"] == 16 and out["num_gpus"] == 384
    assert any(o.startswith("--lr-decay-style") for o in out["unmodelled_options"])
    assert out["steps"] == 500000  # the run length the command states (--train-iters)


def test_vllm_fixture():
    launch = read_serving(str(FIXTURES / "vllm_serve.sh"))
    assert (launch.tp, launch.pp, launch.ep, launch.attention_dp) == (4, 1, 1, 1)
    assert launch.model.name == "llama-3-70b"  # the Hub id of a bundled model
    prof = launch.engine
    assert (prof.name, prof.max_batch_seqs, prof.max_batch_tokens, prof.memory_fraction) == ("vllm", 128, 4096, 0.85)
    assert prof.block_size == 16  # not stated: vLLM's default block (CacheConfig block_size 16)
    assert launch.kv_dtype == "fp8" and launch.weight_dtype == "bf16"
    assert set(launch.unmodelled) == {"--port 8000", "--served-model-name llama70b", "--api-key secret",
                                      "--enable-prefix-caching"}


def test_sglang_fixture_dp_attention():
    launch = read_serving(str(FIXTURES / "sglang_launch.sh"))
    # --tp-size 8 --dp-size 8 --enable-dp-attention: 8 attention groups of 1 GPU, experts over --ep-size 8
    assert (launch.tp, launch.attention_dp, launch.ep) == (8, 8, 8)
    assert (launch.engine.memory_fraction, launch.engine.max_batch_tokens) == (0.8, 4096)
    assert launch.engine.scheduler.value == "prefill-first"  # no --enable-mixed-chunk
    assert set(launch.unmodelled) == {"--host 0.0.0.0", "--port 30000", "--trust-remote-code"}


def _error(*args: str) -> str:
    r = runner.invoke(app, list(args))
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1, r.output
    return lines[0]


@pytest.mark.parametrize("args, says", [
    (["train", "--emit", "nemo-megatron"], "--emit: unknown target 'nemo-megatron'; allowed: megatron, nemo, torchtitan, deepspeed, maxtext"),
    (["serve", "run", "llama-3-8b", "--emit", "tgi"], "--emit: unknown target 'tgi'; allowed: vllm, sglang, trtllm, k8s"),
    (["serve", "run", "llama-3-8b", "--engine", "sglang", "--emit", "vllm"], "--engine:"),
    (["serve", "run", "llama-3-8b", "--emit", "k8s"], "--engine: --emit k8s runs an engine's container"),
    (["train", "llama-3-8b", "--gpus", "8", "--framework", "deepspeed", "--emit", "megatron"], "--framework:"),
    (["train", "llama-3-8b", "--gpus", "8", "--sharding", "zero1", "--emit", "torchtitan"], "sharding:"),
    (["train", "--from", "echo hello"], "from: not a Megatron-LM command line"),
    (["train", "--from", ("torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --num-layers two --hidden-size 64 "
                          "--num-attention-heads 4 --vocab-size 100")], "--num-layers: 'two' is not an integer"),
    (["train", "--from", "pretrain_gpt.py --num-layers 2"], "from: the command has no torchrun"),
    (["train", "--from", "{\"train_batch_size\": 8}"], "from: a DeepSpeed JSON states no model"),
    (["train", "llama-3-8b", "--gpus", "8", "--from",
      "{\"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"stage\": 5}}"], "zero_optimization.stage: 5"),
    (["train", "--from", ("[model]\nflavor = '8B'\n[parallelism]\ndata_parallel_shard_degree = 8\n[training]\n"
                          "seq_len = 'long'")], "training.seq_len: 'long'"),
    (["serve", "run", "--from", "vllm serve meta-llama/Meta-Llama-3-8B --tensor-parallel-size two"],
     "--tensor-parallel-size: 'two' is not an integer"),
    (["serve", "run", "--from", "vllm serve no-such/model"], "model: 'no-such/model'"),
    (["serve", "run", "--from", "vllm serve meta-llama/Meta-Llama-3-8B --gpu-memory-utilization 1.5"],
     "--gpu-memory-utilization: 1.5 must be in (0, 1]"),
    (["serve", "run", "--from", "trtllm-serve meta-llama/Meta-Llama-3-8B --extra_llm_api_options missing.yaml"],
     "--extra_llm_api_options:"),
    (["serve", "run", "--from", "vllm serve 'meta-llama/Meta-Llama-3-8B"], "from: cannot split the command"),
    (["serve", "run", "llama-3-8b", "--weight-dtype", "int4", "--emit", "vllm"], "weight_dtype:"),
])
def test_bad_input_is_one_line_exit_2(args, says):
    assert says in _error(*args)


@settings(max_examples=150)
@given(st.text(max_size=300))
def test_reading_any_text_is_a_launch_or_an_input_error(text):
    for read in (read_training, read_serving):
        try:
            read(text)
        except InputError as exc:
            assert "\n" not in str(exc).strip()


_WORDS = st.sampled_from(["--tensor-model-parallel-size", "--num-layers", "--hidden-size", "--num-attention-heads",
                          "--vocab-size", "--seq-length", "--micro-batch-size", "--moe-layer-freq", "--num-experts",
                          "--tensor-parallel-size", "--max-num-seqs", "--block-size", "--cudagraph-capture-sizes",
                          "--tp-size", "--enable-dp-attention", "8", "0", "-1", "x", "1e9", "([0]*3+[1]*5)", "="])


@settings(max_examples=150)
@given(st.lists(_WORDS, max_size=24), st.sampled_from([
    "torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py ", "vllm serve meta-llama/Meta-Llama-3-8B ",
    "python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-8B ", "trtllm-serve meta-llama/Meta-Llama-3-8B "]))
def test_option_soup_is_a_launch_or_an_input_error(words, program):
    text = program + " ".join(words)
    reader = read_training if "pretrain_gpt" in program else read_serving
    try:
        reader(text)
    except InputError as exc:
        assert "\n" not in str(exc).strip()
