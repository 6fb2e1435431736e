"""The engine's KV-cache dtype when none is stated (EngineProfile.default_kv_dtype).

Source of the TensorRT-LLM rule (workloads/inference/engines.py, comment above its profile):
KvCacheConfig.dtype defaults to "auto" (tensorrt_llm/llmapi/llm_args.py; API reference "Use 'auto'
to follow checkpoint metadata"); ModelLoader._update_from_hf_quant_config (tensorrt_llm/llmapi/
llm_utils.py) copies hf_quant_config.json's `kv_cache_quant_algo` into the run when the user set none;
ModelOpt's hf_ptq.py exports NVFP4 / FP8 checkpoints with `--kv_cache_qformat` default "fp8". OpenAI's
MXFP4 gpt-oss checkpoints carry `quant_method: mxfp4` in config.json, which sets no KV algorithm.
So: tensorrt-llm + fp8 / nvfp4 weights + no KV dtype -> fp8 KV; mxfp4 and 16-bit weights -> no
engine choice; every other engine (and gpuplan's generic default) never picks one.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuplan.cli.main import app
from gpuplan.interfaces.validation.inference import predict_row
from gpuplan.workloads.inference.engines import ENGINES, GENERIC

TRTLLM = ENGINES["tensorrt-llm"]
FORMATS = ("fp32", "tf32", "fp16", "bf16", "fp8", "mxfp8", "int8", "mxfp6", "int4", "mxfp4", "nvfp4")


def test_trtllm_follows_modelopt_checkpoint_fp8_kv():
    # hf_quant_config.json of a ModelOpt FP8 / NVFP4 export: kv_cache_quant_algo FP8 (hf_ptq default)
    assert TRTLLM.default_kv_dtype("nvfp4") == "fp8"
    assert TRTLLM.default_kv_dtype("fp8") == "fp8"
    assert TRTLLM.default_kv_dtype(" NVFP4 ") == "fp8"
    # gpt-oss MXFP4 (config.json quant_method mxfp4: no KV algorithm) and unquantized checkpoints: none
    for fmt in ("mxfp4", "bf16", "fp16", "int4"):
        assert TRTLLM.default_kv_dtype(fmt) is None


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(FORMATS), st.sampled_from(sorted(set(ENGINES) - {"tensorrt-llm"})))
def test_other_engines_never_pick_a_kv_dtype(fmt, name):
    # vLLM / SGLang / lmdeploy / TGI and the generic default keep the caller's default (bf16 in serve run)
    assert ENGINES[name].default_kv_dtype(fmt) is None
    assert GENERIC.default_kv_dtype(fmt) is None


def _row(**cells) -> dict[str, str]:
    """A trtllm-bench-like TPOT row: Llama-2-7B (MHA, so KV reads weigh) on one B200, static batch 64."""
    row = {"id": "t-1", "source": "NVIDIA/TensorRT-LLM perf-overview (v1.0)", "confidence": "high", "notes": "",
           "model": "Llama-2-7B", "layers": "32", "hidden": "4096", "heads": "32", "kv_heads": "32", "ffn": "11008",
           "ffn_kind": "swiglu", "hf_config": "", "vocab": "32000", "system": "aws-p6-b200", "num_gpus": "1",
           "tp": "1", "pp": "1", "weight_dtype": "nvfp4", "kv_dtype": "", "engine": "tensorrt-llm", "batch": "64",
           "concurrency": "", "max_load": "", "request_rate": "", "input_len": "2048", "output_len": "128",
           "metric": "tpot_ms", "value": "10"}
    row.update(cells)
    return row


def test_row_reader_applies_the_engine_rule():
    # empty kv_dtype on a tensorrt-llm nvfp4 row = the same row stating fp8
    empty = predict_row(_row())
    assert empty.value == pytest.approx(predict_row(_row(kv_dtype="fp8")).value, rel=1e-12)
    assert "engine default: tensorrt-llm" in empty.notes
    # an explicit kv_dtype wins: bf16 KV reads 2x the bytes, so the decode step is slower
    assert predict_row(_row(kv_dtype="bf16")).value > empty.value
    # mxfp4 weights: no engine choice, the reader's old default (bf16 for 4-bit weights)
    mx = predict_row(_row(weight_dtype="mxfp4"))
    assert mx.value == pytest.approx(predict_row(_row(weight_dtype="mxfp4", kv_dtype="bf16")).value, rel=1e-12)
    # another engine: unchanged (bf16 KV for 4-bit weights)
    vl = predict_row(_row(engine="vllm"))
    assert vl.value == pytest.approx(predict_row(_row(engine="vllm", kv_dtype="bf16")).value, rel=1e-12)


def _serve(*args: str) -> dict:
    res = CliRunner().invoke(app, ["serve", "run", "qwen3-30b-a3b", "--gpu", "b200", "--concurrency", "8",
                                   "--input-len", "512", "--output-len", "64", "--json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_serve_run_kv_dtype_default_follows_engine():
    assert _serve("--engine", "tensorrt-llm", "--weight-dtype", "nvfp4")["kv_dtype"] == "fp8"
    assert _serve("--engine", "tensorrt-llm", "--weight-dtype", "fp8")["kv_dtype"] == "fp8"
    assert _serve("--engine", "tensorrt-llm", "--weight-dtype", "mxfp4")["kv_dtype"] == "bf16"
    # an explicit --kv-dtype is kept; no --engine (generic) keeps the bf16 default
    assert _serve("--engine", "tensorrt-llm", "--weight-dtype", "nvfp4", "--kv-dtype", "bf16")["kv_dtype"] == "bf16"
    assert _serve("--weight-dtype", "nvfp4")["kv_dtype"] == "bf16"
    assert _serve("--engine", "vllm", "--weight-dtype", "fp8")["kv_dtype"] == "bf16"


# ---- one rule for every serving entry point (EngineProfile.kv_dtype_for) ----

@settings(max_examples=50, deadline=None)
@given(st.sampled_from(FORMATS), st.sampled_from(sorted(ENGINES)), st.sampled_from((None, "", " ", *FORMATS)))
def test_kv_dtype_for_states_wins_else_engine_else_bf16(fmt, name, stated):
    prof = ENGINES[name]
    got = prof.kv_dtype_for(fmt, stated)
    if stated is not None:  # a stated KV dtype is never replaced (a malformed one fails its format check later)
        assert got == stated
    else:  # unset: the engine's choice (fp8 for tensorrt-llm fp8 / nvfp4 checkpoints), else bf16
        assert got == (prof.default_kv_dtype(fmt) or "bf16")


def _cli(*args: str) -> dict:
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


# a small dense model keeps the plan search short; the rule does not depend on the model
_PLAN = ("serve", "plan", "llama-3-8b", "--gpu", "b200", "--rate", "2", "--input-len", "512", "--output-len", "64",
         "--engine", "tensorrt-llm", "--weight-dtype", "nvfp4")


def test_serve_plan_and_run_agree_on_the_engine_kv_default():
    plan = _cli(*_PLAN)
    assert plan["kv_dtype"] == "fp8"  # tensorrt-llm + nvfp4 checkpoint -> FP8 KV (module docstring)
    best = plan["best"]
    run = _cli("serve", "run", "llama-3-8b", "--gpu", "b200", "--tp", str(best["tp"]), "--concurrency", "8",
               "--input-len", "512", "--output-len", "64", "--engine", "tensorrt-llm", "--weight-dtype", "nvfp4")
    assert run["kv_dtype"] == plan["kv_dtype"]
    # the unset plan is the plan stating fp8: same best layout and GPU count
    stated = _cli(*_PLAN, "--kv-dtype", "fp8")
    assert (stated["best"]["gpus"], stated["best"]["tp"]) == (best["gpus"], best["tp"])
    # an explicit --kv-dtype is kept, and the generic engine keeps bf16
    assert _cli(*_PLAN, "--kv-dtype", "bf16")["kv_dtype"] == "bf16"
    generic = [a for a in _PLAN if a not in ("--engine", "tensorrt-llm")]
    assert _cli(*generic)["kv_dtype"] == "bf16"


def test_disaggregated_plan_takes_the_engine_kv_default():
    from gpuplan.interfaces import api

    res = api.serve_plan_disaggregated("llama-3-8b", "b200", rate=2, input_len=512, output_len=64,
                                       engine="tensorrt-llm", weight_dtype="nvfp4", tps=(1,))
    assert res.kv_dtype == "fp8"
    assert res.json_data()["kv_dtype"] == "fp8"


def test_serve_frontier_takes_the_engine_kv_default():
    from gpuplan.interfaces import api

    kw = dict(gpu="b200", input_len=128, output_len=16, weight_dtype="nvfp4", engine="tensorrt-llm")
    unset = api.serve_frontier("gpt3-125m", **kw).points
    fp8 = api.serve_frontier("gpt3-125m", kv_dtype="fp8", **kw).points
    bf16 = api.serve_frontier("gpt3-125m", kv_dtype="bf16", **kw).points
    assert unset == fp8
    assert unset != bf16  # half the KV bytes per token: a different frontier


def test_emitted_trtllm_config_states_the_fp8_kv_it_was_planned_with():
    res = CliRunner().invoke(app, ["serve", "plan", *_PLAN[2:], "--emit", "trtllm"])
    assert res.exit_code == 0, res.output
    assert '"dtype": "fp8"' in res.output  # kv_cache_config.dtype in the extra-llm-api-options file


def test_read_trtllm_command_auto_kv_follows_the_checkpoint():
    from gpuplan.interfaces.deploy import trtllm

    cmd = "trtllm-serve meta-llama/Meta-Llama-3-8B --tp_size 1"
    # kv_cache_config.dtype unset ("auto"): an nvfp4 checkpoint runs FP8 KV, a bf16 one bf16
    assert trtllm.read(cmd, weight_dtype="nvfp4").kv_dtype == "fp8"
    assert trtllm.read(cmd, weight_dtype="bf16").kv_dtype == "bf16"
