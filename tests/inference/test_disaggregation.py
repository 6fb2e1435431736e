"""Disaggregated prefill/decode serving: KV transfer bytes and time, the decode-only instance, the
P:D ratio search and the co-located vs disaggregated comparison (hand derivations in comments)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from gpuplan import api, knobs
from gpuplan.cli.main import app
from gpuplan.errors import InputError
from gpuplan.interfaces.api._common import resolve_gpu, resolve_model, widest_system
from gpuplan.workloads.inference.sim.decode_pool import simulate_decode
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.plan.disaggregation import ServingMode, parse_pd_ratio, plan_disaggregated
from gpuplan.workloads.inference.cost.kv_transfer import KvLink, kv_bytes_per_request, kv_transfer, link_bytes, link_wait_s
from gpuplan.workloads.inference.cost.memory import memory_plan
from gpuplan.workloads.inference.cost.operators import step_time_model

H100 = "h100-sxm5-80gb"


def _dep(model: str, tp: int = 1, gpu: str = H100, **kw) -> Deployment:
    g = resolve_gpu(gpu)
    return Deployment(resolve_model(model), g, widest_system(g), tp=tp, **kw)


def _hw(gpu: str = H100, price: float = 2.0):
    g = resolve_gpu(gpu)
    return [(g, widest_system(g), price)]


# ---------------------------------------------------------------------------------------- KV bytes
def test_kv_bytes_per_request_llama3_70b_gqa():
    # Llama-3-70B: 8 KV heads x 128 head_dim x 80 layers x 2 (K and V) x 2 B (bf16) = 327,680 B per token;
    # a 2048-token prompt: 2048 x 327,680 = 671,088,640 B (640 MiB)
    assert kv_bytes_per_request(_dep("llama-3-70b", tp=4), 2048) == 671_088_640


def test_kv_bytes_per_request_deepseek_v3_mla_fp8():
    # DeepSeek-V3 MLA latent: kv_lora_rank 512 + qk_rope_head_dim 64 = 576 elements x 61 layers x 1 B (fp8)
    # = 35,136 B per token; 1000 tokens: 35,136,000 B (about 1/20 of a GQA 70B's per-token bytes)
    dep = _dep("deepseek-v3", tp=8, gpu="h200-sxm-141gb", ep=8, attention_dp=8, weight_dtype="fp8", kv_dtype="fp8")
    assert kv_bytes_per_request(dep, 1000) == 35_136_000


def test_link_bytes_split_over_the_ranks():
    # GQA tp4 -> tp4: each of the 4 rank pairs moves 2 of the 8 KV heads: 671,088,640 / 4 = 167,772,160 B
    assert link_bytes(_dep("llama-3-70b", 4), _dep("llama-3-70b", 4), 2048) == 167_772_160
    # tp2 -> tp8: the 8 decode ranks receive 1 head each (8 x 1/8 = one copy), 2 senders: busiest link 1/2 of it
    assert link_bytes(_dep("llama-3-70b", 2), _dep("llama-3-70b", 8), 2048) == 671_088_640 / 2
    # MLA into attention-DP decode (DeepSeek-V3, fp8): the request lives in one attention group of ONE GPU,
    # which must receive the whole latent: 1000 tokens x 35,136 B = 35,136,000 B on one link, whatever
    # the prefill tp (each of its 8 ranks holds the full latent, one of them sends)
    pre = _dep("deepseek-v3", 8, gpu="h200-sxm-141gb", ep=8, weight_dtype="fp8", kv_dtype="fp8")
    dec = _dep("deepseek-v3", 8, gpu="h200-sxm-141gb", ep=8, attention_dp=8, weight_dtype="fp8", kv_dtype="fp8")
    assert link_bytes(pre, dec, 1000) == 35_136_000


def test_forced_network_link_is_slower_than_nvlink_on_one_node():
    common = dict(tps=(1,), rate=4, ttft_ms=3000, tpot_ms=10, input_len=8192, output_len=32)
    net = plan_disaggregated(resolve_model("llama-3-8b"), _hw(), kv_link="network", **common).best_disaggregated
    nvl = plan_disaggregated(resolve_model("llama-3-8b"), _hw(), kv_link="nvlink", **common).best_disaggregated
    assert (net.kv_link, nvl.kv_link) == ("network", "nvlink")
    # 1 GiB over one 50 GB/s NIC at 0.93 (>= 21 ms) vs one 450 GB/s NVLink at 0.8 (<= 4 ms incl. the 128 MiB fill)
    assert net.kv_transfer_ms > 21.0 > 4.0 > nvl.kv_transfer_ms


def test_transfer_time_over_infiniband_and_nvlink():
    p, d = _dep("llama-3-70b", 4), _dep("llama-3-70b", 4)
    with knobs.overridden({"collectives.nic_efficiency.infiniband": 1.0, "collectives.nvlink_efficiency": 1.0}):
        net = kv_transfer(p, d, 2048, KvLink.NETWORK)
        nvl = kv_transfer(p, d, 2048, KvLink.NVLINK)
    # network: DGX H100 has one 400 Gb/s (50 GB/s) NDR NIC per GPU; NCCL Simple fill across nodes =
    # 2 channels per NIC x 4 MiB (collectives docstring): (167,772,160 + 8,388,608) B / 50e9 B/s = 3.523 ms,
    # plus NCCL's latency (tens of us)
    assert net.time_s == pytest.approx(176_160_768 / 50e9, rel=0.02)
    assert net.time_s > 176_160_768 / 50e9
    # NVLink 4: 450 GB/s per direction per GPU, fill 32 channels x 4 MiB = 134,217,728 B:
    # (167,772,160 + 134,217,728) / 450e9 = 0.671 ms
    assert nvl.time_s == pytest.approx(301_989_888 / 450e9, rel=0.02)
    assert net.kv_per_request_bytes == 671_088_640


def test_transfer_needs_nics_to_leave_the_node():
    # an RTX 4090's only system is its PCIe box (catalog.pcie_box_system): no scale-out NICs, so its KV
    # cannot go over the network (the MI300X platform of this test before 2026-11-29 now has 8 x 400G NICs)
    p = _dep("llama-3-8b", 1, gpu="rtx-4090")
    with pytest.raises(Exception, match="no scale-out NICs"):
        kv_transfer(p, p, 1024, KvLink.NETWORK)


def test_link_wait_md1():
    # M/D/1 mean wait rho t / (2 (1 - rho)): 10 req/s x 0.05 s = rho 0.5 -> 0.5 x 0.05 / 1 = 0.025 s
    assert link_wait_s(10.0, 0.05) == pytest.approx(0.025)
    assert link_wait_s(0.0, 0.05) == 0.0
    assert math.isinf(link_wait_s(20.0, 0.05))  # rho = 1: the link never catches up


# ------------------------------------------------------------------------------- decode-only loop
def _decode_fixture():
    dep = _dep("llama-3-8b", 1)
    steps = step_time_model(dep)
    mem = memory_plan(dep, max_batch_tokens=256, max_batch_seqs=256)
    return dep, steps, mem


def test_decode_lone_request_matches_step_model():
    # one request, prompt 1000 tokens already cached, 4 output tokens: 4 decode steps at contexts
    # 1000, 1001, 1002, 1003 (oracle: StepTimeModel.decode_step_time, the co-located step pieces)
    _, steps, mem = _decode_fixture()
    run = simulate_decode(steps, mem, np.array([0.5]), np.array([1000]), np.array([4]), 256)
    step = [steps.decode_step_time(1, 1000 + i) for i in range(4)]
    assert run.first_token_delay_s[0] == pytest.approx(step[0], rel=1e-9)
    assert run.tpot_s[0] == pytest.approx(sum(step[1:]) / 3, rel=1e-9)


def test_decode_memory_full_queues_the_next_request():
    # a KV budget of exactly one 2048 + 64-token sequence: the second request (arriving at once) starts
    # only when the first finishes, so its first-token delay exceeds the first's whole generation
    _, steps, mem = _decode_fixture()
    one = mem.sequence_kv_bytes(2048 + 64)
    small = type(mem)(**{**mem.__dict__, "kv_budget_bytes": one * 1.5})
    run = simulate_decode(steps, small, np.array([0.0, 0.0]), np.array([2048, 2048]), np.array([64, 64]), 256)
    first_done = run.first_token_delay_s[0] + 63 * run.tpot_s[0]
    assert run.first_token_delay_s[1] > first_done
    # with room for both, they decode together: equal first-token delays
    both = simulate_decode(steps, mem, np.array([0.0, 0.0]), np.array([2048, 2048]), np.array([64, 64]), 256)
    assert both.first_token_delay_s[0] == both.first_token_delay_s[1]


# ------------------------------------------------------------------------------------ P:D ratio
def _pools(opt):
    return {p.role: p for p in opt.pools}


def test_prefill_heavy_traffic_wants_more_prefill_instances():
    # 8192-token prompts, 16 output tokens, 20 req/s, Llama-3-8B on one H100 per instance.
    # Prefill: >= 2 x 8.03e9 params x 8192 tokens / 989.4e12 FLOP/s = 0.133 s per request at 100% of
    # peak -> <= 7.5 req/s per instance -> n_p >= ceil(20 / 7.5) = 3. Decode of 16 tokens is short.
    plan = plan_disaggregated(resolve_model("llama-3-8b"), _hw(), tps=(1,), rate=20, ttft_ms=5000, tpot_ms=50,
                              input_len=8192, output_len=16)
    pools = _pools(plan.best_disaggregated)
    assert pools["prefill"].instances >= 3
    assert pools["prefill"].instances > pools["decode"].instances


def test_decode_heavy_traffic_wants_more_decode_instances():
    # 128-token prompts, 2048 output tokens, 20 req/s. Prefill: 2 x 8.03e9 x 128 / 989.4e12 = 2.1 ms per
    # request: one instance. Decode: KV budget <= 0.9 x 85.9 GB - 16.1 GB weights = 61.2 GB / (2176 tokens x
    # 131,072 B) = 214 sequences; a step at 214 reads 16.1 GB of weights + 214 x 1152 (mean context) x
    # 131,072 B = 32.3 GB at 3.35 TB/s = 14.4 ms -> <= 214 / (2048 x 14.4 ms) = 7.3 req/s per instance:
    # n_d >= ceil(20 / 7.3) = 3
    plan = plan_disaggregated(resolve_model("llama-3-8b"), _hw(), tps=(1,), rate=20, ttft_ms=5000, tpot_ms=50,
                              input_len=128, output_len=2048)
    pools = _pools(plan.best_disaggregated)
    assert pools["prefill"].instances == 1
    assert pools["decode"].instances >= 3


def test_fixed_pd_ratio_is_kept():
    plan = plan_disaggregated(resolve_model("llama-3-8b"), _hw(), tps=(1,), rate=20, ttft_ms=5000, tpot_ms=50,
                              input_len=8192, output_len=16, pd_ratio="1:1")
    pools = _pools(plan.best_disaggregated)
    assert pools["prefill"].instances == pools["decode"].instances
    assert plan.best_disaggregated.pd_ratio == "1:1"


# ------------------------------------------------------------------- co-located vs disaggregated
def test_low_rate_colocated_wins_by_half():
    # 0.5 req/s of 2048 in / 256 out on Llama-3-8B, one H100 per instance: one co-located GPU serves it
    # (prefill >= 33 ms, a decode step >= 4.8 ms; far below 2 s / 50 ms), while disaggregated serving needs at
    # least one prefill and one decode instance: 2 GPUs at the same price -> co-located is cheaper, the
    # disaggregated plan costs 100% more (saving -100%)
    plan = plan_disaggregated(resolve_model("llama-3-8b"), _hw(), tps=(1,), rate=0.5, ttft_ms=2000, tpot_ms=50,
                              input_len=2048, output_len=256)
    assert plan.best.mode is ServingMode.COLOCATED
    assert plan.best_colocated.gpus == 1 and plan.best_disaggregated.gpus == 2
    assert plan.disaggregated_saving_percent == pytest.approx(-100.0)
    assert plan.best_disaggregated.why_not_best == "costlier by 100%"
    # $/M output tokens: 1 GPU x $2/h / (3600 s x 0.5 req/s x 256 tokens) x 1e6 = $4.34
    assert plan.best_colocated.usd_per_million_output_tokens == pytest.approx(2.0 / (3600 * 0.5 * 256) * 1e6)


def test_tight_tpot_with_long_prompts_favours_disaggregation():
    # 8192 in / 32 out at 4 req/s, TPOT <= 10 ms, Llama-3-8B on H100s. A decode step reads >= 16.1 GB of
    # weights (>= 4.8 ms); a prompt costs >= 0.133 s of compute (2 x 8.03e9 x 8192 / 989.4e12). Co-located,
    # a request's 31 decode steps (~0.2-0.3 s) meet 10 ms only if no prompt chunk lands among them:
    # with Poisson arrivals at r per replica, P(no arrival in ~0.35 s) >= 0.9 needs r <~ 0.3 req/s, so
    # >= 4 / 0.3 = 13 replicas. Disaggregated: one prefill instance (4 x 0.133 = 53% of its compute at
    # peak) and one decode instance with no prompts in its steps: 2 GPUs.
    plan = plan_disaggregated(resolve_model("llama-3-8b"), _hw(), tps=(1,), rate=4, ttft_ms=3000, tpot_ms=10,
                              input_len=8192, output_len=32)
    assert plan.best.mode is ServingMode.DISAGGREGATED
    assert plan.best_disaggregated.gpus == 2
    assert plan.best_colocated.gpus >= 8
    assert plan.disaggregated_saving_percent >= 75.0
    assert plan.best_colocated.why_not_best.startswith("costlier by ")
    assert plan.best.simulated and plan.best.meets_slo
    assert plan.best.tpot_p90_ms <= 10.0 and plan.best.ttft_p90_ms <= 3000.0


def test_transfer_path_same_node_nvlink_else_network():
    # a tp1 prefill and a tp1 decode instance fit in one 8-GPU DGX H100 node: NVLink; with H100 prefill and
    # H200 decode (different systems) the KV goes over InfiniBand
    same = plan_disaggregated(resolve_model("llama-3-8b"), _hw(), tps=(1,), rate=4, ttft_ms=3000, tpot_ms=10,
                              input_len=8192, output_len=32)
    assert same.best_disaggregated.kv_link == "nvlink"
    mixed = plan_disaggregated(resolve_model("llama-3-8b"), _hw() + _hw("h200-sxm-141gb", 2.25), tps=(1,), rate=4,
                               ttft_ms=3000, tpot_ms=10, input_len=8192, output_len=32,
                               prefill_hardware=_hw(), decode_hardware=_hw("h200-sxm-141gb", 2.25))
    assert mixed.best_disaggregated.kv_link == "network"
    pools = _pools(mixed.best_disaggregated)
    assert pools["prefill"].gpu == H100 and pools["decode"].gpu == "h200-sxm-141gb"
    # 8192 tokens x 131,072 B (Llama-3-8B bf16: 8 KV heads x 128 x 32 layers x 2 x 2 B) = 1,073,741,824 B
    assert mixed.best_disaggregated.kv_per_request_bytes == 1_073_741_824


# ------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("text", ["0:1", "1:0", "2", "a:b", "1:2:3", "-1:1"])
def test_bad_pd_ratio(text):
    with pytest.raises(InputError) as e:
        parse_pd_ratio(text)
    assert e.value.field == "pd_ratio"


def test_rate_and_lengths_must_be_positive():
    with pytest.raises(InputError):
        plan_disaggregated(resolve_model("llama-3-8b"), _hw(), rate=0, ttft_ms=1000, tpot_ms=50, input_len=10, output_len=10)
    with pytest.raises(InputError):
        plan_disaggregated(resolve_model("llama-3-8b"), _hw(), rate=1, ttft_ms=1000, tpot_ms=50, input_len=10, output_len=1)


runner = CliRunner()


@pytest.mark.parametrize("args, field", [
    (["--pd-ratio", "0:1"], "pd_ratio"),
    (["--pd-ratio", "x"], "pd_ratio"),
    (["--gpu", "h999"], "gpu"),
    (["--kv-link", "carrier-pigeon"], "kv_link"),
    (["--plot", "/no/such/folder/p.png"], "plot"),
    (["--plot", "plan.txt"], "plot"),
])
def test_cli_bad_input_exits_2(args, field, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["serve", "plan", "llama-3-8b", "--disaggregated", *args])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert field.split("_")[0] in res.output.lower()
    assert list(tmp_path.iterdir()) == []  # nothing written half-way


def test_best_option_energy_sums_its_pools():
    args = dict(rate=4, ttft_ms=3000, tpot_ms=10, input_len=8192, output_len=32, tps=(1,))
    d = api.serve_plan_disaggregated("llama-3-8b", pue=1.5, **args).to_dict()
    pools = d["best_serving_day_per_pool"]
    assert [p["role"] for p in pools] == ["prefill", "decode"] and [p["gpus"] for p in pools] == [1, 1]
    assert d["assumptions"]["pue"] == 1.5
    # facility kWh per million output tokens = sum of the pools' facility kW / (4 req/s x 32 tokens x 3600 s/h) x 1e6
    kw = sum(p["facility_power_w"] for p in pools) / 1e3
    assert d["best_kwh_per_million_output_tokens"] == pytest.approx(kw / (4 * 32 * 3600) * 1e6)
    # PUE 1.5: facility power = 1.5 x IT power (the definition of PUE)
    assert pools[0]["facility_power_w"] == pytest.approx(1.5 * pools[0]["it_power_w"])


def test_cli_disaggregated_options_need_the_flag():
    res = runner.invoke(app, ["serve", "plan", "llama-3-8b", "--pd-ratio", "1:1"])
    assert res.exit_code == 2 and "--disaggregated" in res.output


def test_cli_json_equals_api_and_plot_is_written(tmp_path):
    png = tmp_path / "plan.png"
    args = dict(rate=4, ttft_ms=3000, tpot_ms=10, input_len=8192, output_len=32)
    res = runner.invoke(app, ["serve", "plan", "llama-3-8b", "--disaggregated", "--rate", "4", "--ttft-ms", "3000",
                              "--tpot-ms", "10", "--input-len", "8192", "--output-len", "32", "--json"])
    assert res.exit_code == 0, res.output
    cli = json.loads(res.output)
    lib = api.serve_plan("llama-3-8b", disaggregated=True, **args).to_dict()
    assert cli == lib
    for key in ("rate_requests_per_s", "ttft_slo_ms", "tpot_slo_ms", "best", "best_colocated", "best_disaggregated",
                "disaggregated_saving_percent", "options", "plot_file"):
        assert key in cli
    best = cli["best"]
    for key in ("mode", "layout", "pools", "gpus", "pd_ratio", "kv_link", "kv_per_request_bytes", "kv_transfer_ms",
                "ttft_p90_ms", "tpot_p90_ms", "usd_per_million_output_tokens", "why_not_best", "latency_curve"):
        assert key in best
    assert {"role", "gpu", "tp", "instances", "gpus", "instance_requests_per_s"} <= set(best["pools"][0])
    res = api.serve_plan("llama-3-8b", disaggregated=True, plot=str(png), **args)
    assert res.plot_file == str(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["plan.png"]  # no temporary file left


def test_plain_plan_and_frontier_plots(tmp_path):
    plan_png, front_png = tmp_path / "p.png", tmp_path / "f.svg"
    res = api.serve_plan("llama-3-8b", rate=2, input_len=512, output_len=64, plot=str(plan_png))
    assert res.to_dict()["plot_file"] == str(plan_png)
    assert plan_png.read_bytes()[:4] == b"\x89PNG"
    fr = api.serve_frontier("llama-3-8b", input_len=512, output_len=64, plot=str(front_png))
    assert fr.to_dict()["plot_file"] == str(front_png)
    assert b"<svg" in front_png.read_bytes()[:2000]


# ------------------------------------------------------------------------------------ properties
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 1_000_000))
def test_kv_bytes_linear_in_prompt_for_global_attention(length):
    # every Llama-3-8B layer is global: bytes = L x 131,072 exactly
    assert kv_bytes_per_request(_dep("llama-3-8b"), length) == length * 131_072


@settings(max_examples=60, deadline=None)
@given(st.floats(0, 100), st.floats(0, 100), st.floats(1e-4, 1.0))
def test_link_wait_is_monotone_and_finite_below_saturation(r1, r2, t):
    lo, hi = sorted((r1, r2))
    a, b = link_wait_s(lo, t), link_wait_s(hi, t)
    assert a <= b
    assert math.isfinite(a) == (lo * t < 1.0)


@settings(max_examples=60, deadline=None)
@given(st.integers(-5, 50), st.integers(-5, 50))
def test_pd_ratio_parses_exactly_the_positive_pairs(p, d):
    if p >= 1 and d >= 1:
        assert parse_pd_ratio(f"{p}:{d}") == (p, d)
        assert parse_pd_ratio(f" {p} : {d} ") == (p, d)
    else:
        with pytest.raises(InputError):
            parse_pd_ratio(f"{p}:{d}")


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 100_000), st.integers(1, 100_000))
def test_transfer_time_grows_with_the_prompt(a, b):
    p = _dep("llama-3-8b", 1)
    lo, hi = sorted((a, b))
    assert kv_transfer(p, p, lo, KvLink.NETWORK).time_s <= kv_transfer(p, p, hi, KvLink.NETWORK).time_s
