"""NeMo 2 recipe overrides and MaxText base.yml overrides (interfaces.deploy.nemo, .maxtext): every
emitted key is in the recorded option table of that version, plan -> command -> plan is exact for
every plan the target can state (hypothesis), and bad values are refused by name."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.errors import InputError
from gpuplan.interfaces.api.training import plan_dict
from gpuplan.interfaces.deploy import maxtext, nemo
from gpuplan.interfaces.deploy.commandline import commands
from gpuplan.interfaces.deploy.launch import TrainingLaunch
from gpuplan.models import load_model
from gpuplan.specs import Precision, Recompute, Sharding, TrainPlan
from gpuplan.specs.execution import AttentionKernel, Framework

LLAMA8B = load_model("llama-3-8b")


def override_keys(text: str) -> list[str]:
    """The `key=value` words of the script's command (the keys)."""
    return [w.split("=", 1)[0] for words in commands(text) for w in words if "=" in w and not w.startswith("-")]


@st.composite
def nemo_plans(draw):
    tp, pp, cp, dp = (draw(st.sampled_from(v)) for v in ([1, 2, 4, 8], [1, 2, 4], [1, 2], [1, 2, 4]))
    vpp = draw(st.sampled_from([1, 2, 4])) if pp > 1 else 1
    mb = draw(st.sampled_from([1, 2]))
    return TrainPlan(tp=tp, pp=pp, cp=cp, dp=dp, vpp=vpp, micro_batch=mb, global_batch=mb * dp * draw(st.integers(1, 8)),
                     seq_len=draw(st.sampled_from([2048, 8192])), recompute=draw(st.sampled_from(list(Recompute))),
                     sharding=draw(st.sampled_from(nemo.SEARCH_LIMITS["sharding"])),
                     precision=draw(st.sampled_from(list(nemo.PLUGINS))), sequence_parallel=tp > 1 and draw(st.booleans()))


@settings(max_examples=60)
@given(nemo_plans(), st.integers(0, 5000))
def test_nemo_plan_translation_is_exact(plan, steps):
    launch = TrainingLaunch("nemo", LLAMA8B, plan, plan.num_gpus, steps or None)
    text = nemo.emit(launch, gpus_per_node=8)
    assert all(k in nemo.T.options for k in override_keys(text))
    assert "--factory llama3_8b" in text and nemo.T.lookup("--factory") is not None
    back = nemo.read(text)
    assert back.model == LLAMA8B and back.gpus == plan.num_gpus and back.steps == (steps or None)
    assert plan_dict(back.plan) == plan_dict(plan) and back.plan.framework is Framework.MEGATRON
    assert back.unmodelled == ()


@st.composite
def maxtext_plans(draw):
    tp, pp, cp, dp = (draw(st.sampled_from(v)) for v in ([1, 2, 4, 8], [1, 2, 4], [1, 2], [1, 2, 4, 8]))
    vpp = draw(st.sampled_from([1, 2, 4])) if pp > 1 else 1
    mb = draw(st.sampled_from([1, 2]))
    accum = draw(st.integers(1, 8)) * (max(1, pp))  # MaxText: pipeline micro-batches a multiple of stages
    return TrainPlan(tp=tp, pp=pp, cp=cp, dp=dp, vpp=vpp, micro_batch=mb, global_batch=mb * dp * accum,
                     seq_len=draw(st.sampled_from([2048, 8192])), recompute=draw(st.sampled_from(list(Recompute))),
                     sharding=draw(st.sampled_from(maxtext.SEARCH_LIMITS["sharding"])) if dp > 1 else Sharding.NONE,
                     precision=draw(st.sampled_from([Precision.BF16, Precision.FP8])), framework=Framework.OTHER,
                     attention_kernel=draw(st.sampled_from([AttentionKernel.FLASH, AttentionKernel.UNFUSED])))


@settings(max_examples=60)
@given(maxtext_plans())
def test_maxtext_plan_translation_is_exact(plan):
    launch = TrainingLaunch("maxtext", LLAMA8B, plan, plan.num_gpus, 1000)
    text = maxtext.emit(launch)
    assert all(k in maxtext.T.options for k in override_keys(text))
    back = maxtext.read(text)
    assert back.model == LLAMA8B and back.gpus == plan.num_gpus and back.steps == 1000 and back.unmodelled == ()
    assert plan_dict(back.plan) == plan_dict(plan)


def test_maxtext_batch_keys_follow_calculate_global_batch_sizes():
    # tp 2 x dp 4 = 8 GPUs, micro-batch 1, global 16: per_device_batch_size = 1 x 4 / 8 = 0.5 and
    # gradient_accumulation_steps = 16 / (1 x 4) = 4, so MaxText trains int(8 x 0.5) x 4 = 16 sequences a step
    plan = TrainPlan(tp=2, dp=4, micro_batch=1, global_batch=16, seq_len=4096, framework=Framework.OTHER)
    words = dict(w.split("=", 1) for w in shlex.split(maxtext.emit(TrainingLaunch("maxtext", LLAMA8B, plan, 8)),
                                                      comments=True) if "=" in w)
    assert (words["per_device_batch_size"], words["gradient_accumulation_steps"]) == ("0.5", "4")
    assert (words["ici_tensor_parallelism"], words["ici_data_parallelism"], words["remat_policy"]) == ("2", "4", "minimal_with_context")


def test_nemo_states_the_recipe_defaults_it_overrides():
    # the llama3_70b recipe's trainer defaults to tp 4 pp 4 vpp 5 cp 2 (recipes/llama3_70b.py trainer()); a plan
    # without interleaving must say virtual_pipeline_model_parallel_size=None, not inherit 5
    model = load_model("llama-3-70b")
    plan = TrainPlan(tp=8, pp=1, dp=2, micro_batch=1, global_batch=32, seq_len=8192, sequence_parallel=True,
                     sharding=Sharding.ZERO1)
    text = nemo.emit(TrainingLaunch("nemo", model, plan, 16), gpus_per_node=8)
    for word in ("--factory llama3_70b", "trainer.strategy.virtual_pipeline_model_parallel_size=None",
                 "trainer.strategy.context_parallel_size=1", "optim.config.use_distributed_optimizer=True"):
        assert word in text


@pytest.mark.parametrize("text, field", [
    (("nemo llm pretrain --factory llama3_8b trainer.num_nodes=1 trainer.devices=8 data.seq_length=4096 "
     "data.micro_batch_size=1 trainer.plugins=fp32_mixed"), "trainer.plugins"),
    ("nemo llm pretrain --factory gpt3_175b trainer.num_nodes=1 trainer.devices=8", "factory"),
    (("nemo llm pretrain --factory llama3_8b trainer.num_nodes=two trainer.devices=8 data.seq_length=4096 "
     "data.micro_batch_size=1"), "trainer.num_nodes"),
    ("nemo llm pretrain --factory llama3_8b trainer.devices=8", "trainer.num_nodes"),
    ("python3 -m maxtext.trainers.pre_train.train base.yml model_name=gpt3-175b", "model_name"),
    ("python3 -m maxtext.trainers.pre_train.train base.yml model_name=llama3-8b remat_policy=sometimes", "remat_policy"),
    ("python3 -m maxtext.trainers.pre_train.train base.yml model_name=llama3-8b ici_tensor_parallelism=8", "gpus"),
])
def test_bad_commands_name_the_option(text, field):
    module = nemo if text.startswith("nemo") else maxtext
    with pytest.raises(InputError) as err:
        module.read(text)
    assert err.value.field == field


def test_unmodelled_overrides_are_listed():
    text = ("nemo llm pretrain --factory llama3_8b -y trainer.num_nodes=1 trainer.devices=8 data.seq_length=4096 "
            "data.micro_batch_size=1 optim.config.lr=3e-4 log.log_dir=/runs")
    assert nemo.read(text).unmodelled == ("optim.config.lr=3e-4", "log.log_dir=/runs")


def test_models_without_a_recipe_are_refused():
    plan = TrainPlan(dp=8, micro_batch=1, global_batch=8, seq_len=4096)
    with pytest.raises(InputError, match="model: NeMo 2.4.0 has no pretraining recipe"):
        nemo.emit(TrainingLaunch("nemo", load_model("llama-2-7b"), plan, 8), 8)
    with pytest.raises(InputError, match="sharding: MaxText has no ZeRO-2"):
        maxtext.emit(TrainingLaunch("maxtext", LLAMA8B, plan.model_copy(update={"sharding": Sharding.ZERO2}), 8))


@pytest.mark.parametrize("target, log", [("nemo", "nemo_llama3_70b.log"), ("maxtext", "maxtext_llama3_70b.log")])
def test_training_config_names_the_log_lines_and_the_import_that_reads_them(target, log):
    import json
    from pathlib import Path

    from typer.testing import CliRunner

    from gpuplan.cli.main import app

    runner = CliRunner()
    out = runner.invoke(app, ["train", "llama-3-70b", "--gpus", "1024", "--emit", target])
    assert out.exit_code == 0, out.output
    line = next(w for w in commands(out.stdout.replace("#   gpuplan", "gpuplan")) if w[:3] == ["gpuplan", "calibrate", "import"])
    sample = Path(__file__).parents[1] / "calibration" / "samples" / log
    args = [str(sample) if w == "train.log" else w for w in line[1:]]
    args = args[:args.index("--out")] + ["--json"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["rows"]
    # the rows carry the plan the config states: llama-3-70b on 1,024 GPUs of dgx-h100 at global batch 512
    assert {(x["model"], x["system"], x["num_gpus"], x["global_batch"]) for x in rows} == {
        ("llama-3-70b", "dgx-h100", "1024", "512")}
