"""`gpuplan.api` takes ids or spec objects alike (ids are resolved at the api boundary), and the
defaults and hardware rule that moved out of the CLI (docs/options.md)."""

from __future__ import annotations

import pytest

from gpuplan import api
from gpuplan.catalog import load_catalog
from gpuplan.errors import InputError
from gpuplan.models import load_model
from gpuplan.specs import TrainPlan


def test_train_ids_and_specs_agree():
    """estimate_training("gpt3-175b", ...) crashed on string ids; api.train resolves them."""
    cat = load_catalog()
    one = dict(tp=8, pp=8, cp=1, vpp=3, micro_batch=1, recompute="selective", sharding="none", sequence_parallel=True)
    by_id = api.train("gpt3-175b", "dgx-h100", 1024, **one).to_dict()
    by_spec = api.train(load_model("gpt3-175b"), cat.system("dgx-h100"), 1024, **one).to_dict()
    assert by_id == by_spec
    # 1024 GPUs / (tp 8 x pp 8) = dp 16; the published GPT-3 175B batch: 1536 sequences (Brown et al. 2020
    # Table 2.1, 3.2M tokens; Narayanan et al. 2021 Table 1: 1536), a multiple of micro-batch 1 x dp 16
    assert by_id["best_plan"]["dp"] == 16 and by_id["best_plan"]["global_batch"] == 1536
    assert by_id["best_plan"]["sequence_parallel"] is True


def test_train_plan_object_equals_degrees():
    # the degrees' default batch: GPT-3 175B's published 1536 sequences (catalog.recipes), dp = 1024 / 64 =
    # 16, micro-batch 1: 96 micro-batches, so 1536, the plan object's batch; only how it was set differs
    plan = TrainPlan(tp=8, pp=8, dp=16, vpp=3, micro_batch=1, global_batch=1536, seq_len=2048,
                     recompute="selective", sequence_parallel=True)
    given = api.train("gpt3-175b", plan=plan).to_dict()
    degrees = api.train("gpt3-175b", tp=8, pp=8, cp=1, vpp=3, micro_batch=1, recompute="selective", sharding="none",
                        sequence_parallel=True).to_dict()
    how = ("global_batch_default", "global_batch_note")
    assert {k: v for k, v in given.items() if k not in how} == {k: v for k, v in degrees.items() if k not in how}
    assert degrees["global_batch_sequences"] == 1536 and degrees["global_batch_default"]
    assert not given["global_batch_default"] and given["global_batch_note"] is None


def test_fit_serve_model_hw_ids_and_specs_agree():
    cat = load_catalog()
    h100, llama = cat.gpu("h100-sxm5-80gb"), load_model("llama-3-8b")
    assert api.fit_train("llama-3-8b", "h100-sxm5-80gb", 8, tp=2).to_dict() == api.fit_train(llama, h100, 8, tp=2).to_dict()
    kw = dict(tp=2, input_len=256, output_len=32, rate=4)
    assert api.serve_run("llama-3-8b", "h100-sxm5-80gb", **kw).to_dict() == api.serve_run(llama, h100, **kw).to_dict()
    assert api.model_show("llama-3-8b").to_dict() == api.model_show(llama).to_dict()
    assert api.hw_show("h100-sxm5-80gb").to_dict() == api.hw_show(h100).to_dict()
    assert api.systems_show("dgx-h100").to_dict() == api.systems_show(cat.system("dgx-h100")).to_dict()
    assert api.comm("all_reduce", "dgx-h100", 16).to_dict() == api.comm("all_reduce", cat.system("dgx-h100"), 16).to_dict()
    assert api.mig_profiles("a100-sxm4-80gb").to_dict() == api.mig_profiles(cat.gpu("a100-sxm4-80gb")).to_dict()


def test_plan_takes_a_model_spec():
    a = api.plan("gpt3-175b", "dgx-h100", gpus=64).to_dict()
    b = api.plan(load_model("gpt3-175b"), load_catalog().system("dgx-h100"), gpus=64).to_dict()
    assert a == b and a["model"] == "gpt3-175b"


def test_bad_types_name_the_field():
    with pytest.raises(InputError, match="model"):
        api.train(42)
    with pytest.raises(InputError, match="gpu"):
        api.hw_show(3.5)


@pytest.mark.parametrize("model,expected,degrees", [
    ("gpt3-175b", 2048, dict(gpus=64, tp=8, pp=8, recompute="full")),  # GPT-3's context is 2048 tokens (Brown et al. 2020, sec. 2.1)
    ("gpt2", 1024, dict(gpus=8, tp=1)),  # GPT-2's n_positions = 1024 (its config.json)
    ("llama-3-8b", 8192, dict(gpus=8, tp=8)),  # its published recipe: 8,192-token sequences (Meta, 2024-04-18)
    ("mistral-7b", 4096, dict(gpus=8, tp=8)),  # no recipe: max positions 32768, capped at 4096
])
def test_one_seq_len_default(model, expected, degrees):
    """--seq-len defaults to the published recipe's, else min(max positions, 4096), in train, fit and model
    show alike (the plans
    given to `train` fit in 80 GiB: a plan that does not fit is refused)."""
    assert api.model_show(model).to_dict()["flops_per_token"]["seq_len"] == expected
    assert api.fit_train(model, gpus=1).to_dict()["plan"]["seq_len"] == expected
    assert api.train(model, **degrees).to_dict()["best_plan"]["seq_len"] == expected


def test_fit_sequence_parallel_default_follows_tp():
    assert api.fit_train("llama-3-8b", gpus=8, tp=2).plan.sequence_parallel is True
    assert api.fit_train("llama-3-8b", gpus=8, tp=2, sequence_parallel=False).plan.sequence_parallel is False
    assert api.fit_train("llama-3-8b", gpus=8, tp=1, sequence_parallel=True).plan.sequence_parallel is False  # nothing to split


def test_one_rule_for_the_serving_system():
    """--system names node and GPU; --gpu alone gets its widest catalog system."""
    from gpuplan.interfaces.api._common import system_and_gpu

    system, gpu = system_and_gpu("dgx-b200", None)
    assert (system.id, gpu.id) == ("dgx-b200", "b200")
    system, gpu = system_and_gpu(None, "b200", replica_gpus=8)
    assert system.scaleup_domain_gpus >= 8 and gpu.id == "b200"
    system, gpu = system_and_gpu(None, None)
    assert gpu.id == "h100-sxm5-80gb" and system.gpu == "h100-sxm5-80gb"
    with pytest.raises(InputError, match="gpu"):  # an H100 system cannot hold A100s
        system_and_gpu("dgx-h100", "a100-sxm4-80gb")
    with pytest.raises(InputError, match="scale-up domain"):  # H100 systems in the catalog: 8-GPU NVLink domains
        api.serve_run("llama-3-70b", "h100-sxm5-80gb", tp=16)
    # serve run and serve frontier use the same rule: the b200 frontier runs on dgx-b200's fabric
    by_gpu = api.serve_frontier("llama-3-8b", "b200", input_len=256, output_len=32).to_dict()
    by_system = api.serve_frontier("llama-3-8b", system=load_catalog().widest_system_for("b200").id,
                                   input_len=256, output_len=32).to_dict()
    assert by_gpu == by_system


def test_fit_takes_a_system_or_a_plan_object():
    """`fit --system ID` budgets the system's GPU (dgx-b200: b200, 180 GB HBM3e per GPU in the catalog)."""
    by_system = api.fit_train("llama-3-8b", gpus=8, system="dgx-b200", tp=2).to_dict()
    assert by_system == api.fit_train("llama-3-8b", "b200", 8, tp=2).to_dict() and by_system["gpu"] == "b200"
    with pytest.raises(InputError, match="gpu"):
        api.fit_train("llama-3-8b", "h100-sxm5-80gb", 8, system="dgx-b200")
    # llama-3-8b's default sequence is its published 8,192 tokens (catalog.recipes)
    plan = TrainPlan(tp=2, dp=4, seq_len=8192, sequence_parallel=True)
    assert api.fit_train("llama-3-8b", gpus=8, plan=plan).to_dict() == api.fit_train("llama-3-8b", gpus=8, tp=2).to_dict()
