"""Fine-tuning targets (interfaces.deploy.torchtune, .peft): every emitted key in the recorded option
table of that version, plan -> config -> plan exact for every LoRA / QLoRA plan the target can state
(hypothesis), the CLI round trip giving the same plan and prediction, and what a target cannot state
refused by name."""

from __future__ import annotations

import ast
import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuplan.cli.main import app
from gpuplan.errors import InputError
from gpuplan.interfaces.api.training import plan_dict
from gpuplan.interfaces.deploy import peft, torchtune
from gpuplan.interfaces.deploy.finetune_common import canonical
from gpuplan.interfaces.deploy.launch import TrainingLaunch
from gpuplan.models import load_model
from gpuplan.specs import Precision, Recompute, Sharding, TrainPlan
from gpuplan.specs.execution import Framework
from gpuplan.specs.finetune import (
    BaseDtype,
    FineTuneMethod,
    FineTuning,
    MasterWeights,
    Offload,
    Optimizer,
)

runner = CliRunner()
LLAMA8B = load_model("llama-3-8b")
TARGETS = st.sampled_from([("q_proj", "v_proj"), ("q_proj", "k_proj", "v_proj", "o_proj"),
                           ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
                           ("q_proj", "v_proj", "lm_head")])


def cli(*args: str) -> str:
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


@st.composite
def torchtune_plans(draw):
    dp = draw(st.sampled_from([1, 2, 8]))
    sharding = draw(st.sampled_from(torchtune.SHARDINGS)) if dp > 1 else Sharding.NONE
    qlora = draw(st.booleans())
    optimizer = draw(st.sampled_from(list(torchtune.OPTIMIZERS)))
    paged = optimizer is Optimizer.PAGED_ADAMW_8BIT  # FineTuning refuses paged states with offload
    ft = FineTuning(method=FineTuneMethod.QLORA if qlora else FineTuneMethod.LORA,
                    lora_rank=draw(st.sampled_from([None, 4, 16, 64])), lora_targets=draw(TARGETS),
                    lora_dropout=draw(st.sampled_from([0.0, 0.05])), optimizer=optimizer,
                    offload=draw(st.sampled_from([Offload.NONE, Offload.PARAMS])) if sharding is Sharding.ZERO3 and not paged else Offload.NONE,
                    master_weights=MasterWeights.NONE)
    mb = draw(st.sampled_from([1, 2, 4]))
    return TrainPlan(dp=dp, micro_batch=mb, global_batch=mb * dp * draw(st.integers(1, 16)),
                     seq_len=draw(st.sampled_from([2048, 8192])), recompute=draw(st.sampled_from([Recompute.NONE, Recompute.FULL])),
                     sharding=sharding, framework=Framework.FSDP, fine_tuning=ft)


@settings(max_examples=60)
@given(torchtune_plans(), st.integers(0, 5000))
def test_torchtune_plan_translation_is_exact(plan, steps):
    text = torchtune.emit(TrainingLaunch("torchtune", LLAMA8B, plan, plan.num_gpus, steps or None))
    cfg = yaml.safe_load(text)
    assert set(torchtune._flat(cfg)) <= set(torchtune.T.options)
    back = torchtune.read(text)
    assert back.model == LLAMA8B and back.gpus == plan.num_gpus and back.steps == (steps or None) and back.unmodelled == ()
    # the same plan, a default value spelled None (finetune_common.canonical)
    assert plan_dict(back.plan) == plan_dict(plan.model_copy(update={"fine_tuning": canonical(plan.fine_tuning)}))


@st.composite
def peft_plans(draw):
    qlora = draw(st.booleans())
    dp = 1 if qlora else draw(st.sampled_from([1, 2, 8]))
    sharding = draw(st.sampled_from([Sharding.NONE, Sharding.ZERO2, Sharding.ZERO3])) if dp > 1 else Sharding.NONE
    base = draw(st.sampled_from([BaseDtype.NF4, BaseDtype.FP4])) if qlora else draw(st.sampled_from(
        [BaseDtype.BF16, BaseDtype.INT8]))
    ft = FineTuning(method=FineTuneMethod.QLORA if qlora else FineTuneMethod.LORA, lora_rank=draw(st.sampled_from([None, 32])),
                    lora_targets=draw(TARGETS), base_dtype=base, double_quant=draw(st.booleans()) if qlora else True,
                    optimizer=(optimizer := draw(st.sampled_from(list(peft.OPTIM)))),
                    offload=draw(st.sampled_from([Offload.NONE, Offload.PARAMS]))
                    if sharding is Sharding.ZERO3 and optimizer is not Optimizer.PAGED_ADAMW_8BIT else Offload.NONE)
    mb = draw(st.sampled_from([1, 2, 4]))
    return TrainPlan(dp=dp, micro_batch=mb, global_batch=mb * dp * draw(st.integers(1, 16)), seq_len=4096,
                     recompute=draw(st.sampled_from([Recompute.NONE, Recompute.FULL])), sharding=sharding,
                     precision=Precision.BF16, framework=Framework.FSDP, fine_tuning=ft)


@settings(max_examples=60)
@given(peft_plans())
def test_peft_plan_translation_is_exact(plan):
    text = peft.emit(TrainingLaunch("peft", LLAMA8B, plan, plan.num_gpus, 1000))
    ast.parse(text)  # a Python script
    calls, unmodelled, _ = peft._calls(text)
    assert unmodelled == [] and all(f"{c}.{k}" in peft.T.options for c, kw in calls.items() for k in kw)
    back = peft.read(text)
    assert back.model == LLAMA8B and back.gpus == plan.num_gpus and back.steps == 1000 and back.unmodelled == ()
    want = plan.model_copy(update={"fine_tuning": canonical(plan.fine_tuning)})
    assert plan_dict(back.plan) == plan_dict(want)


@pytest.mark.parametrize("target, gpus, opts", [
    ("torchtune", "8", ["--finetune", "qlora", "--lora-targets", "all_linear", "--master-weights", "none", "--sharding",
                        "zero3", "--recompute", "full"]),
    ("torchtune", "1", ["--finetune", "lora", "--master-weights", "none"]),
    ("peft", "1", ["--finetune", "qlora", "--lora-targets", "all_linear"]),
    ("peft", "8", ["--finetune", "lora", "--lora-rank", "16", "--sharding", "zero3", "--optimizer", "paged_adamw_8bit"]),
])
def test_cli_round_trip_same_plan_and_prediction(tmp_path, target, gpus, opts):
    path = tmp_path / "config"
    path.write_text(cli("train", "llama-3-8b", "--gpus", gpus, "--tokens", "1B", *opts, "--emit", target))
    # the prediction --emit made: the target's framework (FSDP) on the given plan
    direct = json.loads(cli("train", "llama-3-8b", "--gpus", gpus, "--tokens", "1B", *opts, "--framework", "fsdp", "--json"))
    back = json.loads(cli("train", "--from", str(path), "--system", "dgx-h100", "--json"))
    assert back["read_from"] == target and back["unmodelled_options"] == []
    assert back["best_plan"] == direct["best_plan"]
    for key in ("step_time_s", "mfu_pct", "memory_per_gpu_gib", "steps"):
        assert back[key] == direct[key], key


def test_targets_refuse_what_they_cannot_state():
    plan = TrainPlan(dp=8, micro_batch=1, global_batch=8, seq_len=4096, sharding=Sharding.NONE,
                     fine_tuning=FineTuning(method=FineTuneMethod.LORA, master_weights=MasterWeights.NONE))
    with pytest.raises(InputError, match="sharding: torchtune v0.6.1 shards with FSDP2"):
        torchtune.emit(TrainingLaunch("torchtune", LLAMA8B, plan, 8))
    mlp_part = plan.model_copy(update={"sharding": Sharding.ZERO3, "fine_tuning": plan.fine_tuning.model_copy(
        update={"lora_targets": ("q_proj", "gate_proj")})})
    with pytest.raises(InputError, match="MLP's three projections together"):
        torchtune.emit(TrainingLaunch("torchtune", LLAMA8B, mlp_part, 8))
    with pytest.raises(InputError, match="precision: a PEFT / TRL script"):
        peft.emit(TrainingLaunch("peft", LLAMA8B, plan, 8))
    # Megatron-LM's command states no adapters: a LoRA plan is refused, not emitted without them
    r = runner.invoke(app, ["train", "llama-3-8b", "--gpus", "8", "--finetune", "lora", "--emit", "megatron"])
    assert r.exit_code == 2 and "--emit torchtune or peft" in r.output
    r = runner.invoke(app, ["train", "--from", "from peft import LoraConfig\nLoraConfig(r=8)\n", "--system", "dgx-h100"])
    assert r.exit_code == 2 and "SFTConfig" in r.output


def test_peft_reads_a_users_script_and_lists_the_rest():
    text = ("# run: accelerate launch --num_processes 2 sft.py\nMODEL_ID = 'meta-llama/Meta-Llama-3-8B'\n"
            "lc = LoraConfig(r=16, lora_alpha=32, target_modules=['q_proj', 'v_proj'], bias='none')\n"
            "args = TrainingArguments(output_dir='o', per_device_train_batch_size=4, gradient_accumulation_steps=2, "
            "bf16=True, learning_rate=2e-4, max_length=2048, packing=True)\n")
    back = peft.read(text)
    # 2 GPUs x 4 x 2 = 16 sequences a step of 2,048 tokens; r 16 on q and v
    assert (back.gpus, back.plan.global_batch, back.plan.seq_len, back.plan.fine_tuning.rank) == (2, 16, 2048, 16)
    assert back.unmodelled == ("LoraConfig(bias='none')", "SFTConfig(learning_rate=0.0002)")
    assert back.plan.fine_tuning.optimizer is Optimizer.ADAMW
