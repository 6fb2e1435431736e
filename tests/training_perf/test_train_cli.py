"""`gpuplan train`: JSON contract, one-plan mode, bad input."""

from __future__ import annotations

import json

from gpuplan.cli.main import app


def test_default_answers_the_175b_question(runner):
    res = runner.invoke(app, ["train", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    for key in ("best_plan", "step_time_s", "tokens_per_s", "mfu_pct", "tflops_per_gpu_model", "days",
                "gpu_hours", "energy_mwh", "cost_usd", "memory_per_gpu_gib"):
        assert key in d
    assert d["model"] == "gpt3-175b" and d["num_gpus"] == 1024 and d["tokens"] == 300e9
    # gpu_hours = GPUs x days x 24 (definition)
    assert abs(d["gpu_hours"] - 1024 * d["days"] * 24) < 1e-6 * d["gpu_hours"]
    # a 175B model cannot run at more than ~70% MFU nor fit below 8 GPUs' worth of states per GPU
    assert 20 < d["mfu_pct"] < 75 and d["memory_per_gpu_gib"] <= 80


def test_one_plan_and_errors(runner):
    # every searched axis named: that one plan is evaluated (no search)
    one = ["--tp", "8", "--pp", "8", "--cp", "1", "--vpp", "3", "--micro-batch", "1", "--recompute", "selective",
           "--sharding", "none", "--sequence-parallel"]
    res = runner.invoke(app, ["train", *one, "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["best_plan"]["tp"] == 8 and d["best_plan"]["dp"] == 16 and "search" not in d
    # a subset of the axes (issue "Plans a practitioner would sign", partial constraints): those are
    # fixed and the rest searched; the search's best plan keeps tp 8 and pp 8
    part = json.loads(runner.invoke(app, ["train", "--tp", "8", "--pp", "8", "--json"]).stdout)
    assert part["best_plan"]["tp"] == 8 and part["best_plan"]["pp"] == 8 and part["search"]["plans_evaluated"] > 1
    assert {p["plan"]["tp"] for p in part["search"]["top_plans"]} == {8}
    bad = runner.invoke(app, ["train", "--recompute", "sometimes"])
    assert bad.exit_code == 2 and "recompute" in bad.output
    bad = runner.invoke(app, ["train", "--tp", "3"])
    assert bad.exit_code == 2


def test_tp_comm_overlap_flag(runner):
    # the same tp=8 plan with and without TE TP-comm overlap: the flag is echoed in best_plan and
    # can only hide TP communication (step_time model: overlapped <= blocking collectives)
    args = ["train", "--tp", "8", "--pp", "8", "--vpp", "3", "--sequence-parallel", "--json"]
    off = json.loads(runner.invoke(app, args).stdout)
    res = runner.invoke(app, args + ["--tp-comm-overlap"])
    assert res.exit_code == 0, res.output
    on = json.loads(res.stdout)
    assert on["best_plan"]["tp_comm_overlap"] is True and off["best_plan"]["tp_comm_overlap"] is False
    assert on["step_time_s"] < off["step_time_s"]


def test_train_states_the_framework_defaults_it_assumed(runner):
    # issue 32 item 3: the stack's unstated defaults the model used are printed and in --json
    args = ["train", "llama-3-8b", "--system", "dgx-h100", "--gpus", "8", "--tokens", "1B",
            "--tp", "1", "--pp", "1", "--cp", "1", "--micro-batch", "1", "--recompute", "selective",
            "--sharding", "fsdp"]
    out = json.loads(runner.invoke(app, [*args, "--framework", "torchtitan", "--json"]).stdout)
    assert out["framework"] == "torchtitan"
    assumed = out["framework_defaults_assumed"]
    assert any("enable_async_tensor_parallel = False" in line for line in assumed)
    assert any("not compiled" in line for line in assumed)
    mega = json.loads(runner.invoke(app, [*args, "--framework", "megatron", "--json"]).stdout)
    assert any("overlap_grad_reduce" in line for line in mega["framework_defaults_assumed"])
    text = runner.invoke(app, [*args, "--framework", "torchtitan"]).stdout
    assert "torchtitan defaults assumed:" in text and "PyTorch context_parallel" in text
