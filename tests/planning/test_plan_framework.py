"""`gpuplan plan --framework --compile --optimizer-impl --deepspeed-release` (interfaces.api.framework_choice):
the options shape the plan search exactly as they shape `gpuplan train`, so the plan `plan` picks has
the step time `train` gives that plan under the same options, and `plan --json` states the stack and
the defaults it assumed.

GPT-3 125M on one DGX H100 (8 GPUs), 1B tokens: a search of a few hundred plans, well under a second.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuplan import api
from gpuplan.cli.main import app
from gpuplan.errors import InputError
from gpuplan.interfaces.api.compile_option import TORCHTITAN_COMPILE_DEFAULT
from gpuplan.interfaces.api.framework_choice import framework_choice
from gpuplan.specs.execution import Framework

runner = CliRunner()
BASE = dict(tokens="1B", gpus=8)
AXES = ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "recompute", "sharding", "sequence_parallel",
        "global_batch", "seq_len")


def _plan(**stack) -> dict:
    return api.plan("gpt3-125m", **BASE, **stack).to_dict()


def _train_on(best: dict, **stack) -> dict:
    """`train` evaluating the one plan `best` (every searched axis given) with the same stack options."""
    impl = stack.get("optimizer_impl")
    return api.train("gpt3-125m", "dgx-h100", 8, tokens="1B", **{k: best[k] for k in AXES},
                     framework=stack.get("framework"), compile=stack.get("compile"),
                     deepspeed_release=stack.get("deepspeed_release"),
                     fine_tuning={"optimizer_impl": impl} if impl else None).to_dict()


@pytest.mark.parametrize("stack", [
    {"framework": "torchtitan", "compile": "model+loss"},
    {"framework": "torchtitan", "compile": "loss"},
    {"framework": "deepspeed", "deepspeed_release": "0.5"},
    {"framework": "fsdp", "optimizer_impl": "loop"},
    {"framework": "transformers"},  # Hugging Face modules in eager PyTorch (step.hf_eager)
    {},  # the system's default stack (megatron on a DGX H100)
], ids=lambda s: "+".join(f"{k}={v}" for k, v in s.items()) or "default")
def test_best_plan_step_time_equals_train_on_that_plan(stack):
    d = _plan(**stack)
    t = _train_on(d["best_plan"], **stack)
    assert t["best_plan"] == d["best_plan"]  # the same plan, compile label included
    assert d["workload_details"]["step_time_s"] == pytest.approx(t["step_time_s"], rel=1e-9, abs=0)
    assert d["workload_details"]["memory_per_gpu_gib"] == pytest.approx(t["memory_per_gpu_gib"], rel=1e-9, abs=0)
    # the stack timed and the defaults it assumed: train's keys, the same values
    for key in ("framework", "deepspeed_release", "framework_defaults_assumed"):
        assert d[key] == t[key], key
    assert d["framework"] == stack.get("framework", "megatron")  # DGX H100: Megatron-core by default
    assert d["framework_given"] is bool(stack.get("framework"))


def test_compiling_torchtitan_changes_the_searched_time():
    # compile_option: compiled blocks fuse each block's eager elementwise kernels (fp32 RMSNorm, complex
    # rotary, repeat_kv) and a compiled loss drops the fp32 logits pass, so each moves fewer HBM bytes:
    # the best compiled plan is faster than the best eager one, and each is train's time for its plan
    eager, compiled = _plan(framework="torchtitan"), _plan(framework="torchtitan", compile="model+loss")
    assert compiled["workload_details"]["step_time_s"] < eager["workload_details"]["step_time_s"]
    assert (eager["compile"], compiled["compile"]) == ("none", "model+loss")
    # not given, torchtitan's default (compile.enable = False) is stated among the defaults; given, it is not
    assert TORCHTITAN_COMPILE_DEFAULT in eager["framework_defaults_assumed"]
    assert TORCHTITAN_COMPILE_DEFAULT not in compiled["framework_defaults_assumed"]


def test_deepspeed_release_is_stated_first():
    d = _plan(framework="deepspeed", deepspeed_release="0.5")
    assert d["deepspeed_release"] == "0.5"
    # specs.execution.assumed_defaults_of: the release heads a deepspeed plan's defaults
    assert d["framework_defaults_assumed"][0].startswith("DeepSpeed release") and "0.5" in d["framework_defaults_assumed"][0]
    assert d["optimizer_impl"] is None
    assert _plan()["deepspeed_release"] is None  # megatron: no DeepSpeed release


@pytest.mark.parametrize("args,field,start", [
    (["--framework", "bogus"], "framework", "--framework: 'bogus' is not one of megatron, deepspeed"),
    (["--framework", "torchtitan", "--compile", "blocks"], "compile", "--compile: 'blocks' is not one of none, model"),
    (["--compile", "model"], "compile", "--compile: torch.compile is modelled for --framework torchtitan"),
    (["--framework", "deepspeed", "--deepspeed-release", "0.x"], "deepspeed_release", "--deepspeed-release: '0.x' is not"),
    (["--deepspeed-release", "0.5"], "deepspeed_release", "--deepspeed-release: applies to --framework deepspeed"),
    (["--goal", "serve", "--framework", "fsdp"], "framework", "--framework: only with --goal train"),
    (["--goal", "finetune", "--compile", "model"], "compile", "--compile: only with --goal train"),
    (["--optimizer-impl", "bogus"], "--optimizer-impl", "Invalid value for '--optimizer-impl'"),
])
def test_bad_stack_options_are_one_line_exit_2(args, field, start):
    res = runner.invoke(app, ["plan", "gpt3-125m", "--tokens", "1B", "--gpus", "8", *args, "--json"])
    assert res.exit_code == 2, res.output
    err = json.loads(res.stdout)["error"]
    assert err["field"] == field and err["message"].startswith(start)
    assert "\n" not in err["message"] and "Traceback" not in res.output
    plain = runner.invoke(app, ["plan", "gpt3-125m", "--tokens", "1B", "--gpus", "8", *args])
    assert plain.exit_code == 2 and len(plain.output.strip().splitlines()) == 1


def test_cli_prints_the_stack_defaults():
    res = runner.invoke(app, ["plan", "gpt3-125m", "--tokens", "1B", "--gpus", "8", "--framework", "torchtitan",
                              "--compile", "model"])
    assert res.exit_code == 0, res.output
    assert "torchtitan defaults assumed:" in res.output


@settings(max_examples=60, deadline=None)
@given(framework=st.one_of(st.none(), st.sampled_from([f.value for f in Framework]), st.text(max_size=12)),
       compile=st.one_of(st.none(), st.sampled_from(["none", "model", "loss", "model+loss"]), st.text(max_size=12)),
       impl=st.one_of(st.none(), st.sampled_from(["loop", "foreach", "fused"]), st.text(max_size=8)))
def test_stack_options_resolve_or_name_their_field(framework, compile, impl):
    # every combination either resolves (a framework, compiled parts only under torchtitan) or is an
    # InputError naming one of the options
    from gpuplan.interfaces.api._common import resolve_system

    try:
        choice = framework_choice(framework, resolve_system("dgx-h100"), compile=compile, optimizer_impl=impl)
    except InputError as e:
        assert e.field in ("framework", "compile", "optimizer_impl")
        return
    assert any(choice.compiled) <= (choice.framework is Framework.TORCHTITAN)
    fields = choice.search_fields()
    assert (fields["compiled_model"], fields["compiled_loss"]) == choice.compiled
    assert choice.json()["framework_defaults_assumed"]


def test_emit_runs_the_stack_on_the_default_system():
    # `plan --emit` with no --system: the config of the plan `train` finds on the chosen GPU count of the
    # default system (dgx-h100), under the same stack options; torchtitan's [compile] section states them
    # (compile.enable = true, components ["model", "loss"]: torchtitan job_config.py v0.2.2 `Compile`)
    stack = ["--framework", "torchtitan", "--compile", "model+loss"]
    res = runner.invoke(app, ["plan", "llama-3-8b", "--tokens", "10B", "--gpus", "64", *stack, "--emit", "torchtitan"])
    assert res.exit_code == 0, res.output
    assert '[compile]\nenable = true\ncomponents = ["model", "loss"]' in res.stdout
    same = runner.invoke(app, ["train", "llama-3-8b", "--system", "dgx-h100", "--gpus", "64", "--tokens", "10B", *stack,
                               "--emit", "torchtitan"])
    assert same.exit_code == 0 and same.stdout == res.stdout
