"""Serving engine profiles as a product feature: `gpuplan serve run|plan --engine NAME`
(workloads.inference.engines). Each engine's defaults reach the simulation (scheduler, per-step
limits, KV memory rule / fraction / block size, CUDA-graph padding, TP all-reduce); no --engine
keeps gpuplan's own `generic` defaults; explicit --scheduler / --memory-fraction override; bad
names fail in one line, exit 2."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuplan import api
from gpuplan.catalog import load_catalog
from gpuplan.cli.main import app
from gpuplan.errors import InputError
from gpuplan.models import load_model
from gpuplan.workloads.inference import replica as replica_module
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.engines import (
    ENGINE_NAMES, ENGINES, GENERIC, TRTLLM_CUDA_GRAPH_BATCH_SIZES, engine_profile,
)
from gpuplan.workloads.inference.cost.memory import KvBudgetRule, memory_plan
from gpuplan.workloads.inference.sim.schedulers import SchedulerConfig, SchedulerKind
from gpuplan.workloads.inference.cost.tp_allreduce import TpAllReduce

GIB = 2**30
# Llama-3-8B bf16 on one H100 SXM5 80GB, by hand (memory.memory_plan's terms):
T = 85_899_345_920  # 80 GiB (catalog h100-sxm5-80gb memory_bytes)
W = 16_060_522_496  # weights: 8,030,261,248 parameters (HF safetensors total) x 2 B
# activation workspace of 8192 tokens: (QKV (32 + 2 x 8) x 128 = 6144 + 3 x FFN 14336 + 4 x hidden 4096)
# = 65,536 elements x 2 B x 8192 tokens = 1 GiB, + sequences x vocab 128,256 x 4 B of fp32 logits
A_TOKENS = 65_536 * 2 * 8192  # 1,073,741,824
LOGITS = 128_256 * 4  # 513,024 B per sequence
R = 1 * GIB  # serving.memory.runtime_reserve_bytes (no NCCL buffers at tp 1)
KV_PER_TOKEN = 131_072  # 32 layers x 2 (K, V) x 8 KV heads x 128 x 2 B


def _run(**kw) -> dict:
    base = dict(input_len=128, output_len=128)
    return api.serve_run("llama-3-8b", **{**base, **kw}).to_dict()


@pytest.fixture
def captured(monkeypatch):
    """What service.serve_estimate hands the simulator: the scheduler, the memory plan and the
    CUDA-graph batch sizes (the real simulate still runs)."""
    seen: dict = {}
    real = replica_module.simulate

    def spy(steps, mem, wl, sched, **kw):
        seen.update(sched=sched, mem=mem, graphs=tuple(kw.get("cuda_graph_batch_sizes", ())), dep=steps.dep)
        return real(steps, mem, wl, sched, **kw)

    monkeypatch.setattr(replica_module, "simulate", spy)  # the one path: replica.py
    return seen


def test_every_engine_is_named_and_generic_is_the_default():
    assert ENGINE_NAMES == ("generic", "tensorrt-llm", "vllm", "sglang", "lmdeploy", "tgi")
    assert api.SERVING_ENGINES == ENGINE_NAMES and api.DEFAULT_ENGINE == "generic"
    for name in ENGINE_NAMES:
        assert engine_profile(name).name == name
    assert engine_profile(None) is GENERIC and engine_profile(" vLLM ") is ENGINES["vllm"]


def test_generic_is_todays_serve_default():
    """GENERIC runs exactly what `serve` ran before --engine existed: SchedulerConfig()'s defaults
    and memory_plan's defaults (total-memory rule at the memory.usable_fraction knob, 16-token
    blocks), Deployment's default TP all-reduce, no CUDA-graph padding."""
    assert GENERIC.scheduler_config() == SchedulerConfig()
    cat = load_catalog()
    dep = Deployment(load_model("llama-3-8b"), cat.gpu("h100-sxm5-80gb"), cat.system("dgx-h100"),
                     **GENERIC.deployment_options())
    assert dep.tp_allreduce is Deployment(dep.model, dep.gpu, dep.system).tp_allreduce
    assert GENERIC.memory_plan(dep, max_batch_tokens=8192, max_batch_seqs=256) == memory_plan(dep)
    assert GENERIC.cuda_graph_batch_sizes == ()
    assert _run(concurrency=8) == _run(concurrency=8, engine="generic")
    assert _run(concurrency=8)["engine"] == "generic"


def test_vllm_max_num_seqs_256_caps_a_closed_loop_of_512(captured):
    """vLLM max_num_seqs 256 on an A100 (vllm_batch_limits; 1024 on an H100): of 512 closed-loop
    clients only 256 run, the rest queue. 1,757 sequences of 256 tokens fit in the KV of an 80 GB
    part, so memory does not bind; the cap does."""
    a100 = dict(gpu="a100-sxm4-80gb")
    at512 = _run(concurrency=512, engine="vllm", **a100)
    assert captured["sched"].max_batch_seqs == 256 and captured["sched"].kind is SchedulerKind.CHUNKED
    at256 = _run(concurrency=256, engine="vllm", **a100)
    # the same 256 running sequences: the same throughput (within 2%)
    assert at512["requests_per_s"] == pytest.approx(at256["requests_per_s"], rel=0.02)
    # Little's law: 256 queued clients at lambda requests/s wait 256 / lambda before admission; the
    # TTFT is that wait plus the un-queued run's TTFT, within 5%
    wait_s = 256 / at512["requests_per_s"]
    assert at512["ttft_ms"] == pytest.approx(1e3 * wait_s + at256["ttft_ms"], rel=0.05)
    # TensorRT-LLM's max_batch_size 2048 admits all 512: more requests/s than vLLM's 256
    trt = _run(concurrency=512, engine="tensorrt-llm", **a100)
    assert captured["sched"].max_batch_seqs == 2048
    assert trt["requests_per_s"] > 1.1 * at512["requests_per_s"]


def test_sglang_runs_the_prefill_first_scheduler(captured):
    d = _run(rate=10, engine="sglang", input_len=2048)
    assert captured["sched"].kind is SchedulerKind.PREFILL_FIRST and d["scheduler"] == "prefill-first"
    # SGLang page size 1, chunked_prefill_size 8192, cuda-graph max batch 512 (server_args.py)
    assert captured["mem"].block_size == 1 and captured["sched"].max_batch_tokens == 8192
    assert captured["sched"].max_batch_seqs == 512
    # prefill-first stalls the running decodes for each prompt batch and runs waiting prompts first
    # (schedulers.py), so against the same engine with chunked prefill (decodes first, prompts beside
    # them) under the same Poisson load (10 req/s, below the ~15 req/s it saturates at): higher TPOT,
    # lower TTFT (here 19.4 vs 16.8 ms mean TPOT, 80 vs 86 ms mean TTFT)
    chunked = _run(rate=10, engine="sglang", input_len=2048, scheduler="chunked")
    assert chunked["scheduler"] == "chunked" and chunked["engine"] == "sglang"
    assert d["tpot_ms"] > 1.1 * chunked["tpot_ms"] and d["tpot_p90_ms"] > chunked["tpot_p90_ms"]
    assert d["ttft_ms"] < chunked["ttft_ms"]


def test_trtllm_free_memory_rule_gives_more_kv_than_vllm_total_memory_rule(captured):
    """Same GPU and model, by hand (module constants):
    vLLM, 0.9 of total memory:  0.9 T - W - A - R, A = 1 GiB + 1024 x LOGITS (its max_num_seqs on
    an H100: vllm_batch_limits) = 1,599,078,400
        = 77,309,411,328 - 16,060,522,496 - 1,599,078,400 - 1,073,741,824 = 58,576,068,608 B (54.55 GiB)
    TensorRT-LLM, 0.95 of free: 0.95 (T - W - A' - R), A' = 1 GiB + 2048 x LOGITS (max_batch_size 2048)
        = 0.95 x (85,899,345,920 - 16,060,522,496 - 2,124,414,976 - 1,073,741,824) = 63,308,633,292.8 B (58.96 GiB)."""
    vllm = _run(concurrency=8, engine="vllm")
    assert captured["mem"].block_size == 16
    vllm_budget = 0.9 * T - W - (A_TOKENS + 1024 * LOGITS) - R
    assert vllm_budget == pytest.approx(58_576_068_608)
    assert vllm["kv_cache_gib_per_gpu"] * GIB == pytest.approx(vllm_budget, rel=1e-9)
    trt = _run(concurrency=8, engine="tensorrt-llm")
    assert captured["mem"].block_size == 64
    trt_budget = 0.95 * (T - W - (A_TOKENS + 2048 * LOGITS) - R)
    assert trt_budget == pytest.approx(63_308_633_292.8)
    assert trt["kv_cache_gib_per_gpu"] * GIB == pytest.approx(trt_budget, rel=1e-9)
    assert trt["kv_cache_gib_per_gpu"] > vllm["kv_cache_gib_per_gpu"]
    # sequences of 128 + 128 tokens: 16 blocks of 16 (vLLM) or 4 of 64 (TensorRT-LLM), 256 tokens x
    # 131,072 B = 33,554,432 B each: floor(58,576,068,608 / 33,554,432) = 1745, floor(63,308,633,292.8 / ...) = 1886
    assert vllm["max_concurrent_sequences"] == 58_576_068_608 // (256 * KV_PER_TOKEN) == 1745
    assert trt["max_concurrent_sequences"] == int(trt_budget // (256 * KV_PER_TOKEN)) == 1886


def test_lmdeploy_and_memory_fraction_override(captured):
    """lmdeploy: continuous batching, cache_max_entry_count 0.8 of free memory, 64-token blocks;
    --memory-fraction 0.5 replaces the engine's fraction under the engine's own rule."""
    d = _run(concurrency=8, engine="lmdeploy")
    assert captured["sched"].kind is SchedulerKind.CONTINUOUS and captured["mem"].block_size == 64
    assert d["kv_cache_gib_per_gpu"] * GIB == pytest.approx(0.8 * (T - W - (A_TOKENS + 256 * LOGITS) - R), rel=1e-9)
    half = _run(concurrency=8, engine="vllm", memory_fraction=0.5)
    # 0.5 x 85,899,345,920 - 16,060,522,496 - 1,599,078,400 (vLLM's 1024 sequences on an H100) -
    # 1,073,741,824 = 24,216,330,240 B
    assert half["kv_cache_gib_per_gpu"] * GIB == pytest.approx(24_216_330_240, rel=1e-9)
    assert half["engine"] == "vllm"


def test_tensorrt_llm_pads_generation_steps_to_its_cuda_graphs_but_not_a_static_batch(captured):
    _run(concurrency=8, engine="tensorrt-llm")
    assert captured["graphs"] == TRTLLM_CUDA_GRAPH_BATCH_SIZES
    _run(batch=8, engine="tensorrt-llm")
    assert captured["graphs"] == () and captured["sched"].kind is SchedulerKind.STATIC
    _run(concurrency=8, engine="vllm")
    assert captured["graphs"] == ()


def test_each_engine_runs_its_own_tp_allreduce(captured):
    expect = {"generic": TpAllReduce.TENSORRT_LLM, "tensorrt-llm": TpAllReduce.TENSORRT_LLM, "vllm": TpAllReduce.VLLM,
              "sglang": TpAllReduce.VLLM, "lmdeploy": TpAllReduce.NCCL, "tgi": TpAllReduce.NCCL}
    for name, algo in expect.items():
        _run(concurrency=4, tp=2, engine=name)
        assert captured["dep"].tp_allreduce is algo, name
    # at tp 4 and 4 sequences NCCL's latency is above vLLM's one-shot custom kernel, so TGI's TPOT
    # is higher (TGI's CUDA graphs hold 4 sequences exactly: no padding)
    kw = dict(tp=4, concurrency=4, input_len=512)
    assert api.serve_run("llama-3-70b", engine="tgi", **kw).report.tpot_ms > \
        api.serve_run("llama-3-70b", engine="vllm", **kw).report.tpot_ms


def test_tgi_runs_its_own_launcher_defaults(captured):
    # text-generation-inference launcher/src/main.rs @009c4e0: --max-concurrent-requests 128,
    # --max-batch-prefill-tokens = max_input_tokens (min(max_position_embeddings - 1, 4095)) + 50 =
    # 4145, --cuda-graphs "1,2,4,8,16,32"; flashinfer's one-token pages (models/globals.py BLOCK_SIZE)
    tgi = ENGINES["tgi"]
    assert (tgi.max_batch_seqs, tgi.max_batch_tokens, tgi.block_size) == (128, 4145, 1)
    assert tgi.cuda_graph_batch_sizes == (1, 2, 4, 8, 16, 32)
    assert tgi.python_step_loop and tgi.tp_allreduce is TpAllReduce.NCCL
    _run(concurrency=8, engine="tgi")
    assert captured["graphs"] == (1, 2, 4, 8, 16, 32)
    assert (captured["sched"].max_batch_seqs, captured["sched"].max_batch_tokens) == (128, 4145)
    # the rest of its profile is vLLM's: the total-memory KV rule at 0.9, chunked prefill, no eviction guard
    vllm = ENGINES["vllm"]
    assert (tgi.rule, tgi.memory_fraction, tgi.scheduler, tgi.no_evict) == \
        (vllm.rule, vllm.memory_fraction, vllm.scheduler, vllm.no_evict)


def test_serve_plan_runs_the_engine_on_every_layout(monkeypatch):
    seen = []
    real = replica_module.simulate

    def spy(steps, mem, wl, sched, **kw):
        seen.append((sched.kind, sched.max_batch_seqs, mem.block_size, steps.dep.tp_allreduce))
        return real(steps, mem, wl, sched, **kw)

    monkeypatch.setattr(replica_module, "simulate", spy)  # the one path: replica.py
    d = api.serve_plan("llama-3-8b", rate=2, input_len=256, output_len=32, engine="sglang").to_dict()
    assert d["engine"] == "sglang"
    assert seen and set(seen) == {(SchedulerKind.PREFILL_FIRST, 512, 1, TpAllReduce.VLLM)}


def test_serve_plan_disaggregated_runs_the_engine(monkeypatch):
    seen = set()
    real = replica_module.simulate

    def spy(steps, mem, wl, sched, **kw):
        seen.add((sched.max_batch_seqs, mem.block_size, tuple(kw.get("cuda_graph_batch_sizes", ())), steps.dep.tp_allreduce))
        return real(steps, mem, wl, sched, **kw)

    monkeypatch.setattr(replica_module, "simulate", spy)  # the one path: replica.py
    d = api.serve_plan("llama-3-8b", rate=2, ttft_ms=3000, tpot_ms=20, input_len=2048, output_len=32, disaggregated=True,
                       pd_ratio="1:1", engine="tensorrt-llm").to_dict()
    assert d["engine"] == "tensorrt-llm"
    assert seen == {(2048, 64, TRTLLM_CUDA_GRAPH_BATCH_SIZES, TpAllReduce.TENSORRT_LLM)}


def test_engine_memory_plan_follows_its_rule():
    cat = load_catalog()
    dep = Deployment(load_model("llama-3-8b"), cat.gpu("h100-sxm5-80gb"), cat.system("dgx-h100"))
    for name, prof in ENGINES.items():
        mem = prof.memory_plan(dep, max_batch_tokens=8192, max_batch_seqs=256)
        a = A_TOKENS + 256 * LOGITS
        want = prof.memory_fraction * T - W - a - R if prof.rule is KvBudgetRule.TOTAL else \
            prof.memory_fraction * (T - W - a - R)
        assert mem.kv_budget_bytes == pytest.approx(want, rel=1e-9), name


# ---- bad input ------------------------------------------------------------------------------------

runner = CliRunner()


@pytest.mark.parametrize("words", [["serve", "run", "llama-3-8b"], ["serve", "plan", "llama-3-8b"],
                                   ["serve", "plan", "llama-3-8b", "--disaggregated"]])
def test_bad_engine_is_one_line_exit_2(words):
    res = runner.invoke(app, [*words, "--engine", "triton"])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.strip().splitlines() if ln.strip()]
    assert lines == ["error: --engine: unknown engine 'triton'; allowed: generic, tensorrt-llm, vllm, sglang, lmdeploy, tgi"]
    res = runner.invoke(app, [*words, "--engine", "triton", "--json"])
    assert res.exit_code == 2
    err = json.loads(res.stdout)["error"]
    assert err["field"] == "engine" and err["allowed"] == "generic, tensorrt-llm, vllm, sglang, lmdeploy, tgi"


@pytest.mark.parametrize("fraction", [0, -0.1, 1.01, float("nan"), float("inf")])
def test_bad_memory_fraction_names_the_field(fraction):
    with pytest.raises(InputError) as exc:
        api.serve_run("llama-3-8b", engine="vllm", memory_fraction=fraction)
    assert exc.value.field == "memory_fraction" and str(exc.value).startswith("--memory-fraction: must be")
    res = runner.invoke(app, ["serve", "run", "llama-3-8b", "--memory-fraction", str(fraction)])
    assert res.exit_code == 2 and res.output.startswith("error: --memory-fraction: must be")
    assert len(res.output.strip().splitlines()) == 1


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=1, max_size=20))
def test_any_other_engine_name_is_refused(name):
    if name.strip().lower() in ENGINE_NAMES:
        assert engine_profile(name).name == name.strip().lower()
        return
    with pytest.raises(InputError) as exc:
        engine_profile(name)
    assert exc.value.field == "engine" and "allowed: generic, tensorrt-llm" in str(exc.value)


def test_cli_json_equals_api_json_with_an_engine():
    args = ["serve", "run", "llama-3-8b", "--tp", "2", "--input-len", "256", "--output-len", "32", "--concurrency", "16",
            "--engine", "tensorrt-llm", "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    want = api.serve_run("llama-3-8b", tp=2, input_len=256, output_len=32, concurrency=16, engine="tensorrt-llm").to_dict()
    assert json.loads(res.stdout) == json.loads(json.dumps(want))
    assert want["engine"] == "tensorrt-llm" and want["scheduler"] == "chunked"


@pytest.mark.parametrize("engine, cells, expected", [
    # the aliases read a version written beside the engine's name (the public rows' own wording)
    ("vllm", {"notes": "User-measured, vLLM 0.6.6 --num-scheduler-steps 10"}, (0, 6)),
    ("sglang", {"notes": "Measured 2026-03-25, SGLang 0.5.9, attention TP8"}, (0, 5)),
    ("tgi", {"source": "text-generation-inference v3.0.1 benchmark"}, (3, 0)),
    ("vllm", {"notes": "vLLM version/date not shown in the excerpt read"}, None),
    ("vllm", {"engine_version": "0.10.1", "notes": "vLLM 0.6.6"}, (0, 10)),  # the column wins
])
def test_python_engines_read_a_stated_version(engine, cells, expected):
    from gpuplan.interfaces.validation.inference import stated_engine_version

    assert stated_engine_version(cells, ENGINES[engine]) == expected


def test_a_row_without_an_engine_profile_says_which_it_assumed(record_rows):
    from gpuplan.interfaces.validation.inference import FALLBACK_ENGINE, predict_row

    # nim-1 (NVIDIA NIM, engine `other`) runs as vLLM and its notes say so; vllmci-1 names vLLM: no note
    rows = {r["id"]: r for r in record_rows("inference")}
    assert FALLBACK_ENGINE == "vllm"
    assert "engine 'other' has no profile: assumed engine vllm" in predict_row(rows["nim-1"]).notes
    assert "assumed engine" not in predict_row(rows["vllmci-1"]).notes


def test_vllm_per_step_limits_follow_the_gpu_and_the_mode():
    # vllm/engine/arg_utils.py get_batch_defaults (PRs #17073, #17885): >= 70 GiB and not an A100:
    # LLM class (offline) 1024 sequences / 16384 tokens, API server 1024 / 8192; else 256 / 8192
    # offline and 256 / 2048 serving
    cat = load_catalog()
    vllm = ENGINES["vllm"]
    h100, a100, mi300x, l4 = (cat.gpu(g) for g in ("h100-sxm5-80gb", "a100-sxm4-80gb", "mi300x", "l4"))
    assert (vllm.for_gpu(h100).max_batch_seqs, vllm.for_gpu(h100).max_batch_tokens) == (1024, 8192)
    assert (vllm.for_gpu(h100, offline=True).max_batch_seqs, vllm.for_gpu(h100, offline=True).max_batch_tokens) \
        == (1024, 16384)
    assert vllm.for_gpu(mi300x, offline=True).max_batch_tokens == 16384
    assert (vllm.for_gpu(a100).max_batch_seqs, vllm.for_gpu(a100).max_batch_tokens) == (256, 2048)
    assert (vllm.for_gpu(a100, offline=True).max_batch_seqs, vllm.for_gpu(a100, offline=True).max_batch_tokens) \
        == (256, 8192)
    assert vllm.for_gpu(l4).max_batch_tokens == 2048  # 24 GB
    # before v0.9 the profile's own 256 / 8192; a resolved profile keeps its limits on a second call
    old = vllm.for_gpu(h100, version=(0, 8))
    assert (old.max_batch_seqs, old.max_batch_tokens) == (256, 8192)
    resolved = vllm.for_gpu(h100, offline=True)
    assert resolved.for_gpu(a100) is resolved
    # the other engines have no such rule, but SGLang (below)
    for name in ("tensorrt-llm", "lmdeploy", "tgi"):
        assert ENGINES[name].for_gpu(h100) is ENGINES[name]


def test_sglang_prefill_chunk_follows_the_gpu_memory():
    # python/sglang/srt/server_args.py _handle_chunked_prefill_size (gpu_mem in MiB): < 35 GiB 2048,
    # < 160 GiB 8192 (H100 80 GB, H200 141 GB), else 16384 (MI300X 192 GB, MI355X 288 GB)
    cat = load_catalog()
    sglang = ENGINES["sglang"]
    chunk = {g: sglang.for_gpu(cat.gpu(g)).max_batch_tokens for g in ("l4", "h100-sxm5-80gb", "mi300x", "mi355x")}
    assert chunk == {"l4": 2048, "h100-sxm5-80gb": 8192, "mi300x": 16384, "mi355x": 16384}
    assert sglang.for_gpu(cat.gpu("mi300x")).max_batch_seqs == 512


def test_serve_run_reports_the_limits_it_ran(captured):
    # vLLM on an H100 serves up to 1024 sequences with 8192-token steps (above); the report says so
    out = api.serve_run("llama-3-8b", gpu="h100-sxm5-80gb", engine="vllm", concurrency=8, input_len=128,
                        output_len=16).to_dict()
    assert (out["max_batch_seqs"], out["max_batch_tokens"]) == (1024, 8192)
    assert (captured["sched"].max_batch_seqs, captured["sched"].max_batch_tokens) == (1024, 8192)
    out = api.serve_run("llama-3-8b", gpu="a100-sxm4-80gb", engine="vllm", concurrency=8, input_len=128,
                        output_len=16).to_dict()
    assert (out["max_batch_seqs"], out["max_batch_tokens"]) == (256, 2048)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=400), st.integers(min_value=1, max_value=400), st.booleans())
def test_engine_limits_never_shrink_with_memory(gib_a, gib_b, offline):
    # vLLM's and SGLang's per-step limits are thresholds on the part's memory (vllm_batch_limits,
    # sglang_batch_limits): a part with more memory (not an A100) never gets smaller limits, and a
    # resolved profile keeps them
    from types import SimpleNamespace

    from gpuplan.workloads.inference.engines import sglang_batch_limits, vllm_batch_limits

    small, large = sorted((gib_a, gib_b))
    part = lambda gib: SimpleNamespace(id="x", name="x", memory_bytes=gib * 2**30)  # noqa: E731
    for rule in (vllm_batch_limits, sglang_batch_limits):
        lo, hi = rule(part(small), offline), rule(part(large), offline)
        assert lo[0] <= hi[0] and lo[1] <= hi[1] and lo[0] >= 1 and lo[1] >= 1
    resolved = ENGINES["vllm"].for_gpu(part(large), offline=offline)
    assert resolved.for_gpu(part(small)) is resolved
