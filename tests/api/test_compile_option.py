"""`--compile` (interfaces.api.compile_option): the user's words for a plan's torch.compile'd parts,
on `train`, `fit` and the API, with each expected number derived by hand.

Llama 3 8B (h 4096, vocab 128256, untied; catalog) on H100s under torchtitan.
"""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuplan import api
from gpuplan.cli.main import app
from gpuplan.errors import InputError
from gpuplan.interfaces.api.compile_option import (
    COMPILE_CHOICES, TORCHTITAN_COMPILE_DEFAULT, compile_flags, compile_label,
)
from gpuplan.specs.execution import Framework

runner = CliRunner()
TITAN = Framework.TORCHTITAN
VOCAB = 128256  # Llama 3 8B's vocabulary (config.json vocab_size)


def test_choices_are_torchtitans_components():
    # torchtitan Compile.components: "model" and "loss", each on or off (job_config.py v0.2.x)
    assert compile_flags("none", TITAN) == (False, False)
    assert compile_flags("model", TITAN) == (True, False)
    assert compile_flags("loss", TITAN) == (False, True)
    assert compile_flags("model+loss", TITAN) == (True, True)
    assert compile_flags(None, TITAN) == (False, False)  # torchtitan's compile.enable = False
    assert {compile_label(*flags) for flags in COMPILE_CHOICES.values()} == set(COMPILE_CHOICES)


@pytest.mark.parametrize("fw", [f for f in Framework if f is not TITAN])
def test_compile_needs_torchtitan(fw):
    assert compile_flags("none", fw) == (False, False)
    with pytest.raises(InputError, match="^--compile: torch.compile is modelled for --framework torchtitan, and as 'model' for LoRA") as e:
        compile_flags("model+loss", fw)
    assert e.value.field == "compile"


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=12))
def test_bad_values_name_the_option(value):
    if value.strip().lower().replace(" ", "") in COMPILE_CHOICES:
        return
    with pytest.raises(InputError) as e:
        compile_flags(value, TITAN)
    assert e.value.field == "compile" and str(e.value).startswith("--compile: ")
    assert "\n" not in str(e.value).replace(repr(value), "")


def _fit(*extra):
    r = runner.invoke(app, ["fit", "train", "llama-3-8b", "--gpu", "h100-sxm5-80gb", "--gpus", "1", "--seq-len", "8192",
                            "--framework", "torchtitan", *extra, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_fit_loss_memory_drops_by_8_bytes_per_logit():
    # one micro-batch of 8192 tokens, tp 1: eager PyTorch cross entropy on fp32 logits holds 12 B per
    # logit, the compiled one the bf16 logits and their gradient, 4 B (loss_memory docstring), so the
    # logits term differs by (12 - 4) x 1 x 8192 x 128256 = 8,405,385,216 B
    eager, compiled = _fit(), _fit("--compile", "model+loss")
    assert eager["compile"] == "none" and compiled["compile"] == "model+loss"
    assert compiled["plan"]["compiled_loss"] is True and compiled["plan"]["compiled_model"] is True
    drop = eager["activations_bytes"]["logits"] - compiled["activations_bytes"]["logits"]
    assert drop == pytest.approx((12 - 4) * 1 * 8192 * VOCAB, rel=1e-12)
    # compiling the blocks alone leaves the loss eager: the same logits bytes as no compile
    assert _fit("--compile", "model")["activations_bytes"]["logits"] == eager["activations_bytes"]["logits"]


def test_fit_api_field_matches_cli():
    rec = api.fit_train("llama-3-8b", "h100-sxm5-80gb", 1, seq_len=8192, framework="torchtitan", compile="loss").to_dict()
    assert rec["compile"] == "loss" and rec["plan"]["compiled_loss"] is True and rec["plan"]["compiled_model"] is False


def test_bad_compile_exits_2_with_one_line():
    for args in (["--framework", "torchtitan", "--compile", "bogus"], ["--compile", "model"]):
        r = runner.invoke(app, ["fit", "train", "llama-3-8b", "--gpus", "1", *args])
        assert r.exit_code == 2
        assert r.output.strip().count("\n") == 0 and "--compile" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, ["train", "gpt3-125m", "--gpus", "8", "--compile", "blocks"])
    assert r.exit_code == 2 and "--compile" in r.output


def _train(*extra):
    return api.train("llama-3-8b", "dgx-h100", 8, framework="torchtitan", tp=1, pp=1, cp=1, micro_batch=1,
                     recompute="selective", sharding="fsdp", sequence_parallel=False, seq_len=8192, global_batch=8,
                     **dict(extra))


def test_train_given_plan_runs_compiled_and_says_so():
    eager, compiled = _train(), _train(("compile", "model+loss"))
    de, dc = eager.to_dict(), compiled.to_dict()
    assert de["best_plan"]["compile"] == "none" and dc["best_plan"]["compile"] == "model+loss"
    # fused blocks and a fused loss move fewer bytes: the compiled step is shorter, same plan otherwise
    assert dc["step_time_s"] < de["step_time_s"]
    assert {k: v for k, v in dc["best_plan"].items() if k != "compile"} == \
        {k: v for k, v in de["best_plan"].items() if k != "compile"}
    # the logits' memory: micro-batch 1 x 8192 tokens x 128256 x (12 - 4) B less (as under fit)
    drop_gib = (12 - 4) * 8192 * VOCAB / 2**30
    assert de["memory_per_gpu_gib"] - dc["memory_per_gpu_gib"] == pytest.approx(drop_gib, rel=1e-9)
    # not given: torchtitan's default (compile.enable = False) decided it and is listed; given: it is not
    assert TORCHTITAN_COMPILE_DEFAULT in de["framework_defaults_assumed"]
    assert TORCHTITAN_COMPILE_DEFAULT not in dc["framework_defaults_assumed"]
    assert TORCHTITAN_COMPILE_DEFAULT not in _train(("compile", "none")).to_dict()["framework_defaults_assumed"]


def test_train_search_keeps_compile_on_every_plan():
    d = api.train("gpt3-125m", "dgx-h100", 8, framework="torchtitan", compile="loss", top=3).to_dict()
    assert d["best_plan"]["compile"] == "loss"
    assert {p["plan"]["compile"] for p in d["search"]["top_plans"]} == {"loss"}


def test_megatron_default_lists_no_compile_line():
    d = api.train("gpt3-125m", "dgx-h100", 8, top=1).to_dict()
    assert d["best_plan"]["compile"] == "none"
    assert TORCHTITAN_COMPILE_DEFAULT not in d["framework_defaults_assumed"]


@pytest.mark.parametrize("choice, components", [("model+loss", '["model", "loss"]'), ("loss", '["loss"]')])
def test_torchtitan_config_states_compile_and_reads_back(tmp_path, choice, components):
    # --emit torchtitan writes [compile] enable = true with the parts (torchtitan Compile.components);
    # --from reads it back into the same plan and the same prediction
    r = runner.invoke(app, ["train", "llama-3-8b", "--gpus", "8", "--framework", "torchtitan", "--compile", choice,
                            "--emit", "torchtitan"])
    assert r.exit_code == 0, r.output
    assert f"[compile]\nenable = true\ncomponents = {components}\n" in r.stdout
    path = tmp_path / "job.toml"
    path.write_text(r.stdout)
    searched = api.train("llama-3-8b", "dgx-h100", 8, compile=choice,
                         **api.train_options_for("torchtitan", None)).to_dict()
    read = api.train_from(str(path), "dgx-h100").to_dict()
    assert read["unmodelled_options"] == []
    assert read["best_plan"] == searched["best_plan"] and read["best_plan"]["compile"] == choice
    assert read["step_time_s"] == searched["step_time_s"]
    assert read["framework_defaults_assumed"] == searched["framework_defaults_assumed"]


def test_uncompiled_config_writes_no_compile_section_and_bad_components_are_refused(tmp_path):
    r = runner.invoke(app, ["train", "llama-3-8b", "--gpus", "8", "--emit", "torchtitan"])
    assert r.exit_code == 0 and "[compile]" not in r.stdout
    path = tmp_path / "job.toml"
    path.write_text(r.stdout + "\n[compile]\nenable = true\ncomponents = [\"blocks\"]\n")
    with pytest.raises(InputError, match="^compile.components: ") as e:
        api.train_from(str(path), "dgx-h100")
    assert e.value.field == "compile.components"


def test_a_lora_plan_on_a_pytorch_loop_compiles_its_model_only():
    # finetune_activations reads the compiled model on fsdp / other LoRA loops (an eager SwiGLU keeps
    # silu's output); nothing there reads a compiled loss, and megatron has no such loop
    from gpuplan.specs.finetune import FineTuning

    lora = FineTuning(method="lora")
    assert compile_flags("model", Framework.FSDP, lora) == (True, False)
    assert compile_flags("model", Framework.OTHER, lora) == (True, False)
    for value, fw in (("model+loss", Framework.FSDP), ("model", Framework.MEGATRON)):
        with pytest.raises(InputError, match="^--compile: "):
            compile_flags(value, fw, lora)
    with pytest.raises(InputError, match="^--compile: "):
        compile_flags("model", Framework.FSDP)  # pretraining on fsdp: no compiled model is modelled
