"""`gpuplan fit train` / `gpuplan train` with fine-tuning options: the seed's 70B QLoRA case, JSON keys,
one-line errors with exit code 2."""

import json

import pytest
from typer.testing import CliRunner

from gpuplan.cli.main import app

runner = CliRunner()
SEED = ["fit", "train", "llama-2-70b", "--gpu", "rtx-4090", "--gpus", "2", "--finetune", "qlora", "--lora-rank", "64",
        "--sharding", "fsdp", "--offload", "params"]


def run_json(*args):
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_seed_case_70b_qlora_on_two_4090s():
    d = run_json(*SEED, "--recompute", "full")
    per = d["per_gpu_bytes"]
    # everything the model holds lives on the host; the GPU keeps the layers it gathers
    assert per["weights"] == per["gradients"] == per["optimizer"] == 0
    # Llama-2-70B layer in NF4 double-quantised: q, o (8192^2) 2 x 34,619,396 + k, v (8192 x 1024) 2 x 4,327,428
    # + gate, up, down (8192 x 28672) 3 x 121,167,876 = 441,397,276; bf16 norms 2 x 8192 x 2 = 32,768; bf16 q, v
    # adapters r 64: (64 x 16384 + 64 x 9216) x 2 = 3,276,800; two layers gathered
    assert d["other_bytes"]["zero3_gather_buffer"] == 2 * (441_397_276 + 32_768 + 3_276_800)
    # host per GPU, half of: 80 layers 35,311,782,080 + norms (80 x 16,384 + 8,192) x 2 + embedding and head
    # 2 x 32,000 x 8192 x 2 + adapters 131,072,000 x (2 + 4 + 12)
    host = (35_311_782_080 + 2_637_824 + 1_048_576_000 + 131_072_000 * 18) / 2
    assert d["host_offload_bytes"] == pytest.approx(host)
    assert d["fits"] is True and d["trainable_params_per_gpu"] == 131_072_000
    assert d["plan"]["fine_tuning"]["method"] == "qlora" and d["plan"]["fine_tuning"]["offload"] == "params"
    # without activation checkpointing 80 layers x 4096 tokens of activations do not fit in 24 GB
    assert run_json(*SEED)["fits"] is False
    text = runner.invoke(app, SEED).output
    assert "does NOT fit" in text and "--recompute full" in text and "offloaded to the host" in text


@pytest.mark.parametrize("extra, option", [
    (["--finetune", "qlora", "--base-dtype", "bf16"], "--finetune"),
    (["--finetune", "lora", "--offload", "params"], "--offload"),
    (["--lora-rank", "8"], "--lora-rank"),
    (["--finetune", "lora", "--lora-targets", "q_proj+nope"], "--lora-targets"),
    (["--grad-accum", "4", "--global-batch", "3"], "--grad-accum"),
    (["--finetune", "lora", "--lora-dropout", "1.5"], "--lora-dropout"),
])
def test_bad_combinations_are_one_line_exit_2(extra, option):
    r = runner.invoke(app, ["fit", "train", "llama-2-7b", "--gpus", "2", *extra])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and option in lines[0] and "Traceback" not in r.output


def test_grad_accum_sets_the_global_batch():
    d = run_json("fit", "train", "llama-2-7b", "--gpus", "2", "--micro-batch", "2", "--grad-accum", "4",
                 "--finetune", "lora")
    assert d["plan"]["global_batch"] == 2 * 4 * 2  # micro-batch x grad-accum x dp


def test_train_evaluates_a_fine_tuning_plan():
    d = run_json("train", "llama-2-7b", "--system", "h100-sxm5-80gb", "--gpus", "1", "--finetune", "qlora",
                 "--lora-targets", "all_linear", "--lora-rank", "64", "--micro-batch", "2", "--seq-len", "2048",
                 "--grad-accum", "8", "--recompute", "full", "--tokens", "10M")
    assert d["best_plan"]["fine_tuning"]["method"] == "qlora" and d["best_plan"]["global_batch"] == 16
    assert "search" not in d and d["tokens_per_s_per_gpu"] > 0
    assert d["step_breakdown_s"]["offload_s"] == 0.0


def test_compiled_and_old_bitsandbytes_options():
    base = ["fit", "train", "llama-2-7b", "--gpu", "a100-sxm4-40gb", "--gpus", "1", "--finetune", "qlora",
            "--seq-len", "1024"]
    eager, compiled, old = (run_json(*base, *extra)["activations_bytes"]["layers"]
                            for extra in ([], ["--compile", "model"], ["--base-matmul-keeps-input"]))
    # 32 layers x 1,024 tokens: eager SwiGLU keeps silu's output, 2 x 11,008 B per token
    assert eager - compiled == pytest.approx(32 * 1024 * 2 * 11_008)
    # bitsandbytes < 0.43.2 keeps the frozen fc1 and fc2 inputs, 2 x (4,096 + 11,008) B per token
    assert old - eager == pytest.approx(32 * 1024 * 2 * (4096 + 11_008))
    r = runner.invoke(app, [*base[:-4], "--finetune", "lora", "--base-matmul-keeps-input"])
    assert r.exit_code == 2 and "needs finetune qlora" in r.output
