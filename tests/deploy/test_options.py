"""Every option gpuplan emits is in the recorded option table of that target's version
(interfaces.deploy.options), and the translation plan -> config -> plan is exact for every plan a
target can state (hypothesis over plans and engine limits; no prediction is run here)."""

from __future__ import annotations

import json
import re
import shlex

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.interfaces.api.training import plan_dict
from gpuplan.interfaces.deploy import (
    deepspeed,
    k8s,
    megatron,
    sglang,
    torchtitan,
    trtllm,
    vllm,
)
from gpuplan.interfaces.deploy.commandline import commands, here_documents
from gpuplan.interfaces.deploy.launch import (
    ServingLaunch,
    TrainingLaunch,
    model_id,
    profile_for,
)
from gpuplan.interfaces.deploy.options import TABLES, TORCHRUN
from gpuplan.models import load_model
from gpuplan.specs import Precision, Recompute, Sharding, TrainPlan
from gpuplan.specs.execution import Framework
from gpuplan.workloads.inference.sim.schedulers import SchedulerKind

LLAMA8B = load_model("llama-3-8b")
MIXTRAL = load_model("mixtral-8x7b")


def option_words(text: str) -> list[str]:
    """Every `--option` word of a script's commands (an `--x=v` counts as `--x`)."""
    return [w.split("=")[0] for words in commands(text) for w in words
            if w.startswith("-") and not w[1:2].isdigit() and w != "-m"]  # `python -m`: the interpreter's, not the program's


def _known(table, word: str) -> bool:
    if table.lookup(word) is not None:
        return True
    return word.startswith("--no-") and table.lookup("--" + word[5:]) is not None


@st.composite
def megatron_plans(draw):
    tp, pp, cp, dp = (draw(st.sampled_from(v)) for v in ([1, 2, 4, 8], [1, 2, 4], [1, 2], [1, 2, 4]))
    vpp = draw(st.sampled_from([1, 2, 4])) if pp > 1 else 1
    mb = draw(st.sampled_from([1, 2]))
    return TrainPlan(tp=tp, pp=pp, cp=cp, dp=dp, vpp=vpp, micro_batch=mb, global_batch=mb * dp * draw(st.integers(1, 8)),
                     seq_len=draw(st.sampled_from([2048, 4096, 8192])), recompute=draw(st.sampled_from(list(Recompute))),
                     sharding=draw(st.sampled_from(list(Sharding))),
                     precision=draw(st.sampled_from([Precision.BF16, Precision.FP16, Precision.FP8, Precision.MXFP8,
                                                     Precision.NVFP4])),
                     sequence_parallel=tp > 1 and draw(st.booleans()), tp_comm_overlap=draw(st.booleans()))


@settings(max_examples=60)
@given(megatron_plans(), st.integers(0, 5000))
def test_megatron_plan_translation_is_exact(plan, steps):
    launch = TrainingLaunch("megatron", LLAMA8B, plan, plan.num_gpus, steps or None)
    text = megatron.emit(launch, gpus_per_node=8)
    assert all(_known(megatron.T, w) or _known(TORCHRUN, w) for w in option_words(text))
    back = megatron.read(text)
    assert back.model == LLAMA8B and back.gpus == plan.num_gpus and back.steps == (steps or None)
    assert plan_dict(back.plan) == plan_dict(plan)
    assert back.plan.grad_precision == plan.grad_precision and back.plan.attention_kernel == plan.attention_kernel
    assert back.unmodelled == ()


@st.composite
def torchtitan_plans(draw):
    tp, pp, dp = (draw(st.sampled_from(v)) for v in ([1, 2, 4, 8], [1, 2, 4], [1, 2, 4, 8]))
    vpp = draw(st.sampled_from([1, 2])) if pp > 1 else 1
    mb = draw(st.sampled_from([1, 2]))
    return TrainPlan(tp=tp, pp=pp, dp=dp, cp=draw(st.sampled_from([1, 2])), vpp=vpp, micro_batch=mb,
                     global_batch=mb * dp * draw(st.integers(1, 8)), seq_len=draw(st.sampled_from([2048, 8192])),
                     recompute=draw(st.sampled_from(list(Recompute))),
                     sharding=draw(st.sampled_from([Sharding.NONE, Sharding.ZERO2, Sharding.ZERO3])) if dp > 1
                     else Sharding.NONE,
                     precision=draw(st.sampled_from([Precision.BF16, Precision.FP8, Precision.MXFP8])),
                     sequence_parallel=tp > 1, tp_comm_overlap=tp > 1 and draw(st.booleans()),
                     framework=Framework.TORCHTITAN)


@settings(max_examples=60)
@given(torchtitan_plans())
def test_torchtitan_plan_translation_is_exact(plan):
    launch = TrainingLaunch("torchtitan", LLAMA8B, plan, plan.num_gpus, 1000)
    # 32 layers in pp x vpp even stages: ceil(32 / s) layers each must make exactly s stages (all s here divide 32)
    text = torchtitan.emit(launch)
    from gpuplan.validation_rules import load_toml_text

    cfg = load_toml_text(text, "emitted torchtitan TOML", "from")
    assert all(f"{s}.{k}" in torchtitan.T.options for s, sec in cfg.items() for k in sec)
    back = torchtitan.read(text)
    assert back.model == LLAMA8B and back.steps == 1000 and back.unmodelled == ()
    assert plan_dict(back.plan) == plan_dict(plan) and back.plan.framework is Framework.TORCHTITAN


@settings(max_examples=40)
@given(st.sampled_from([1, 2, 4, 8]), st.integers(1, 64), st.integers(1, 8), st.sampled_from([Sharding.NONE, Sharding.ZERO1,
       Sharding.ZERO2, Sharding.ZERO3]), st.sampled_from([Recompute.NONE, Recompute.FULL]),
       st.sampled_from([Precision.BF16, Precision.FP16, Precision.FP32]))
def test_deepspeed_plan_translation_is_exact(mb, dp, accum, sharding, recompute, precision):
    plan = TrainPlan(dp=dp, micro_batch=mb, global_batch=mb * dp * accum, seq_len=4096, sharding=sharding,
                     recompute=recompute, precision=precision, framework=Framework.DEEPSPEED)
    cfg = deepspeed.config(TrainingLaunch("deepspeed", LLAMA8B, plan, dp))
    flat = {f"{k}.{kk}" for k, v in cfg.items() if isinstance(v, dict) for kk in v} | {k for k, v in cfg.items()
                                                                                          if not isinstance(v, dict)}
    assert flat <= set(deepspeed.T.options)
    back = deepspeed.read(json.dumps(cfg), LLAMA8B, dp, 4096)
    assert plan_dict(back.plan) == plan_dict(plan) and back.unmodelled == ()


ENGINE_MODULES = {"vllm": vllm, "sglang": sglang, "tensorrt-llm": trtllm}
SCHEDULERS = {"vllm": [SchedulerKind.CHUNKED, SchedulerKind.CONTINUOUS],
              "sglang": [SchedulerKind.PREFILL_FIRST, SchedulerKind.CHUNKED],
              "tensorrt-llm": [SchedulerKind.CHUNKED, SchedulerKind.CONTINUOUS]}


@st.composite
def serving_launches(draw):
    engine = draw(st.sampled_from(list(ENGINE_MODULES)))
    moe = draw(st.booleans())
    model = MIXTRAL if moe else LLAMA8B
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    adp = 1
    ep = 1
    if moe and tp > 1:
        adp = draw(st.sampled_from([1, tp])) if engine != "sglang" else draw(st.sampled_from([1, 2, tp]))
        ep = draw(st.sampled_from([1, tp]))
    sizes = tuple(sorted(draw(st.sets(st.integers(1, 512), max_size=6))))
    profile = profile_for(engine, max_batch_seqs=draw(st.integers(1, 4096)), max_batch_tokens=draw(st.integers(64, 65536)),
                          memory_fraction=draw(st.sampled_from([0.5, 0.8, 0.85, 0.9, 0.95])),
                          block_size=draw(st.sampled_from([1, 16, 32, 64])) if engine != "vllm" else draw(
                              st.sampled_from([8, 16, 32])),
                          cuda_graph_batch_sizes=sizes, scheduler=draw(st.sampled_from(SCHEDULERS[engine])))
    w = draw(st.sampled_from(["bf16", "fp16", "fp8"] if engine != "tensorrt-llm" else ["bf16", "fp16"]))
    act = "fp16" if w == "fp16" else "bf16"
    kv = draw(st.sampled_from([act, "fp8"]))
    return ServingLaunch(engine, model, model_id(model), profile, tp=tp, pp=draw(st.sampled_from([1, 2])), ep=ep,
                         attention_dp=adp, weight_dtype=w, kv_dtype=kv)


@settings(max_examples=80)
@given(serving_launches())
def test_engine_translation_is_exact(launch):
    module = ENGINE_MODULES[launch.target]
    text = module.emit(launch)
    assert all(_known(module.T, w) for w in option_words(text))
    _, bodies = here_documents(text)
    for body in bodies.values():  # TensorRT-LLM's options file: every key recorded
        extra = json.loads(body)
        keys = {f"{k}.{kk}" for k, v in extra.items() if isinstance(v, dict) for kk in v} | {
            k for k, v in extra.items() if not isinstance(v, dict)}  # a null cuda_graph_config is the key itself
        assert keys <= set(module.T.options)
    back = module.read(text, launch.weight_dtype) if launch.target == "tensorrt-llm" else module.read(text)
    assert {k: v for k, v in vars(back).items() if v != vars(launch)[k]} == {}


def test_kubernetes_manifest_keys_and_documents():
    launch = ServingLaunch("vllm", LLAMA8B, model_id(LLAMA8B), profile_for("vllm"), tp=2)
    pools = [k8s.Pool("prefill", launch, 3), k8s.Pool("decode", launch, 5)]
    text = k8s.emit(pools, 8, lambda la, _f: vllm.command_words(la))
    docs = [d for d in yaml.safe_load_all(text) if d]
    assert [(d["kind"], d["spec"]["replicas"]) for d in docs] == [("Deployment", 3), ("Deployment", 5)]
    assert {d["apiVersion"] for d in docs} <= set(TABLES["k8s"].option("apiVersion").choices)
    cmd = docs[0]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert shlex.join(cmd) in re.sub(r"\s*\\\n\s*", " ", vllm.emit(launch))


def test_docs_list_every_recorded_option():
    from pathlib import Path

    from gpuplan.interfaces.deploy.options import TORCHRUN

    doc = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()
    for table in (TORCHRUN, *TABLES.values()):
        assert f"{table.program} {table.version}" in doc and table.source in doc, table.target
        for name in table.options:
            assert f"| `{name}`" in doc, (table.target, name)
