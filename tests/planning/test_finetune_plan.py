"""`gpuplan plan --goal finetune`: methods x hardware for a fine-tuning job, and `gpuplan train` on the
seed's 70B QLoRA case (answers with activation checkpointing chosen, said in a note)."""

import json

import pytest
from typer.testing import CliRunner

from gpuplan import api
from gpuplan.cli.main import app
from gpuplan.interfaces.api.fine_tuning import FINETUNE_GLOBAL_BATCH, fine_tuning_global_batch
from gpuplan.interfaces.api.fine_tuning_plan import FINETUNE_HARDWARE, METHODS

runner = CliRunner()
SEED_TRAIN = ["train", "llama-2-70b", "--system", "rtx-4090", "--gpus", "2", "--finetune", "qlora", "--lora-rank", "64",
              "--sharding", "fsdp", "--offload", "params", "--tokens", "10M"]


def test_plan_goal_finetune_json_compares_methods_and_hardware():
    r = runner.invoke(app, ["plan", "llama-2-7b", "--goal", "finetune", "--tokens", "100M", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["goal"] == "finetune" and d["tokens"] == 100e6
    cands = d["candidates"]
    assert len(cands) == len(FINETUNE_HARDWARE) * len(METHODS)
    assert {c["method"] for c in cands} == {"full", "lora", "qlora"}
    assert min(c["gpu_memory_gib"] for c in cands) == 24 and any(c["system"] == "dgx-b200" for c in cands)
    for c in cands:
        assert c["fits"], c  # Llama-2-7B fine-tunes everywhere, with offload where needed
        # time = tokens / (tokens/s), whole steps of global batch x seq tokens (a step is 4,096 x the batch)
        steps = -(-100e6 // (c["global_batch_sequences"] * 4096))
        assert c["time_s"] == pytest.approx(steps * c["global_batch_sequences"] * 4096 / c["tokens_per_s"], rel=1e-9)
        assert c["memory_per_gpu_gib"] <= 0.9 * c["gpu_memory_gib"] + 1e-9  # within the usable 90%
        lo, hi = c["band_80pct"]["days"]
        assert lo < c["days"] < hi
        assert c["cost_usd"] is None or c["cost_usd"] == pytest.approx(c["gpu_hours"] * c["usd_per_gpu_hour"], rel=1e-9)
    # full fine-tuning of 6.7B parameters with AdamW (16 B per parameter, ZeRO) needs > 100 GB: on one
    # 80 GB GPU the optimizer moves to the CPU; on the 8-GPU DGX sharding alone suffices
    one_h100 = next(c for c in cands if c["system"] == "h100-sxm5-80gb" and c["method"] == "full")
    dgx = next(c for c in cands if c["system"] == "dgx-h100" and c["method"] == "full")
    assert one_h100["offload"] != "none" and dgx["offload"] == "none"
    assert d["fastest"] is not None and "fastest" in d["answer"]


def test_plan_goal_finetune_given_system_and_refusal():
    d = api.plan("llama-2-70b", "rtx-4090", goal="finetune", tokens="10M", gpus=2).to_dict()
    assert [(c["system"], c["gpus"]) for c in d["candidates"]] == [("rtx-4090", 2)] * 3
    qlora = next(c for c in d["candidates"] if c["method"] == "qlora")
    assert qlora["fits"] and qlora["offload"] in ("optimizer", "params")
    r = runner.invoke(app, ["plan", "llama-2-7b", "--goal", "finetune", "--lora-targets", "q_proj+nope"])
    assert r.exit_code == 2 and "--lora-targets" in r.output and len(r.output.strip().splitlines()) == 1
    r = runner.invoke(app, ["plan", "llama-2-7b", "--goal", "finetune", "--emit", "megatron"])
    assert r.exit_code == 2 and "--goal finetune" in r.output


def test_fine_tuning_global_batch():
    # qlora.py: per-device batch 1 x 16 accumulation steps = 16 sequences
    assert FINETUNE_GLOBAL_BATCH == 16
    assert fine_tuning_global_batch(1, 2) == 16 and fine_tuning_global_batch(4, 8) == 32  # one micro-batch per GPU at least
    assert fine_tuning_global_batch(3, 1) == 18  # rounded up to a multiple of micro-batch x dp


def test_train_answers_the_seed_case():
    r = runner.invoke(app, [*SEED_TRAIN, "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["best_plan"]["recompute"] == "full" and d["best_plan"]["global_batch"] == 16
    assert any("activation checkpointing on" in n for n in d["plan_notes"])
    assert d["tokens_per_s"] > 0 and d["memory_per_gpu_gib"] < 24 * 0.9
    band = d["band_80pct"]
    # RTX 4090 (Ada) has no public row: the fine-tuning band is widened by the unseen-hardware band
    assert band["regime"].startswith("training/time/finetune") and band["validated"] is False
    lo, hi = band["tokens_per_s"]
    assert lo < d["tokens_per_s"] < hi
    text = runner.invoke(app, SEED_TRAIN).output
    assert "80% band of the memory per GPU" in text and "note: activation checkpointing on" in text
    # given --recompute none the plan is refused, as before
    r = runner.invoke(app, [*SEED_TRAIN, "--recompute", "none"])
    assert r.exit_code == 2 and "needs" in r.output


def test_plan_lora_options_errors_name_the_option_as_typed():
    # the CLI convention (api._common.parse_enum, fine_tuning_spec): the option as typed, with `--`
    r = runner.invoke(app, ["plan", "llama-2-7b", "--lora-rank", "8"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert "--lora-rank: only with --goal finetune" in r.output
    r = runner.invoke(app, ["plan", "llama-2-7b", "--lora-targets", "qv"])
    assert r.exit_code == 2 and "--lora-targets: only with --goal finetune" in r.output
