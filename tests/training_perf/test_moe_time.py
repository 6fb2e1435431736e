"""MoE training cost terms (`workloads/training/step/expert.py`): expert all-to-all bytes, tokens per
expert, the share of routed copies that leaves an NVLink domain, and the direction of the
inside-vs-across-domain cost. Expected values are derived by hand in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gpuplan import knobs
from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.specs import TrainPlan
from gpuplan.workloads.training.step import expert
from gpuplan.workloads.training.step.assembly import estimate_step_time

# DeepSeek-V3 (config.json): hidden 7168, 256 routed experts, top-8.
H, E, K = 7168, 256, 8


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_deepseek_v3_a2a_bytes_per_layer():
    # One micro-batch of 1 x 4096 tokens, tp 1 (t_local = 4096): one all-to-all sends every routed
    # copy, R = 4096 x 8 x 7168 x 2 B = 469,762,048 B; dispatch + combine, forward + backward = 4 R
    # = 1,879,048,192 B per MoE layer and GPU.
    assert expert.routed_bytes(4096, K, H) == 469_762_048
    assert expert.a2a_bytes_per_layer(4096, K, H) == 1_879_048_192


def test_deepseek_v3_tokens_per_expert():
    # ep 64: the 64 ranks of the group route 64 x 4096 tokens x 8 copies over 256 experts:
    # 64 x 4096 x 8 / 256 = 8192 tokens per expert, each rank holding 256 / 64 = 4 experts.
    assert expert.tokens_per_expert(64 * 4096, K, E) == 8192
    # one rank alone (ep 1): 4096 x 8 / 256 = 128 tokens per expert: a small-M grouped GEMM
    assert expert.tokens_per_expert(4096, K, E) == 128


def test_cross_domain_fraction_nvl8_vs_nvl72():
    # ep 64 with etp 1: on 8-GPU NVLink nodes 8 ranks share a domain -> 1 - 8/64 = 0.875 of the
    # routed copies leave it; in a 72-GPU GB200 NVL72 domain all 64 ranks fit -> 0.
    d8 = expert.ep_ranks_per_domain(64, 1, 8)
    d72 = expert.ep_ranks_per_domain(64, 1, 72)
    assert (d8, d72) == (8, 64)
    assert expert.cross_domain_fraction(64, d8) == pytest.approx(0.875, rel=1e-15)
    assert expert.cross_domain_fraction(64, d72) == 0.0
    # expert TP 2 spaces the EP ranks 2 apart: 4 of them per 8-GPU node
    assert expert.ep_ranks_per_domain(64, 2, 8) == 4


def test_network_bytes_one_copy_per_domain():
    # ep 64 over 8 nodes (n = 8 domains), top-8: a token's 8 copies reach on average
    # (n - 1)(1 - (1 - 1/n)^8) = 7 (1 - 0.875^8) = 7 x 0.656391 = 4.59474 other nodes.
    # DeepEP sends one copy per node: 4096 x 7168 x 2 x 4.59474 = 269,811,786 B; NCCL every copy
    # that leaves: R x 0.875 = 469,762,048 x 0.875 = 411,041,792 B.
    remote = expert.remote_domains_per_token(64, 8, K)
    assert remote == pytest.approx(7 * (1 - 0.875 ** 8), rel=1e-12)
    assert remote == pytest.approx(4.594738, rel=1e-6)
    per_domain = expert.network_bytes(4096, K, H, 64, 8, dedup=1.0)
    per_copy = expert.network_bytes(4096, K, H, 64, 8, dedup=0.0)
    assert per_domain == pytest.approx(4096 * 7168 * 2 * 4.594738, rel=1e-6)
    assert per_copy == pytest.approx(411_041_792, rel=1e-12)
    # inside one domain nothing crosses the network
    assert expert.network_bytes(4096, K, H, 8, 8, dedup=1.0) == 0.0


def test_a2a_inside_nvl72_is_cheaper_than_across_nvl8_nodes(catalog):
    # Same Blackwell GPU and NVLink rate (900 GB/s per direction on both systems); ep 64: inside one
    # GB200 NVL72 domain the all-to-all runs on NVLink only, on DGX B200 7/8 of the copies (or 4.6
    # of 8 with DeepEP) go over one 400 Gb/s NIC per GPU (50 GB/s): slower by several times.
    nvl72, b200 = catalog.system("gb200-nvl72"), catalog.system("dgx-b200")
    inside = float(expert.a2a_seconds(4096, K, H, 64, 1, nvl72, catalog.gpu(nvl72.gpu)))
    across = float(expert.a2a_seconds(4096, K, H, 64, 1, b200, catalog.gpu(b200.gpu)))
    assert across > 3.0 * inside
    # the network leg bounds it from below: 269.8 MB / 50 GB/s = 5.4 ms with one copy per node
    assert across >= 269.8e6 / 50e9
    # sending every copy (NCCL) instead of one per node moves more bytes and takes longer
    nccl = float(expert.a2a_seconds(4096, K, H, 64, 1, b200, catalog.gpu(b200.gpu), dedup=0.0))
    assert nccl > across


def test_overlap_hides_comm_behind_another_microbatch():
    # c = 10 ms of all-to-all beside w = 30 ms of layer compute, a = 1: hidden entirely, leaving the
    # SM share the communication kernels hold (20 of 132 SMs x 10 ms = 1.515 ms) + the fixed time.
    with knobs.overridden({"training.moe_a2a_overlap": 1.0, "training.moe_layer_overhead_s": 0.0,
                           "training.moe_expert_launch_s": 0.0}):
        hidden = float(expert.exposed_ep_seconds(0.010, 0.030, 132, True))
        alone = float(expert.exposed_ep_seconds(0.010, 0.030, 132, False))
    assert hidden == pytest.approx(20 / 132 * 0.010, rel=1e-12)
    assert alone == pytest.approx(0.010, rel=1e-12)  # one micro-batch, no pipeline: nothing to hide behind
    with knobs.overridden({"training.moe_a2a_overlap": 0.25, "training.moe_layer_overhead_s": 0.001,
                           "training.moe_expert_launch_s": 0.0005}):
        # a w = 7.5 ms hidden: 2.5 ms exposed + 20/132 x 7.5 ms + 1 ms + 4 local experts x 0.5 ms
        partial = float(expert.exposed_ep_seconds(0.010, 0.030, 132, True, local_experts=4))
    assert partial == pytest.approx(0.0025 + 20 / 132 * 0.0075 + 0.001 + 0.002, rel=1e-12)


def test_step_time_ep_term_grows_when_ep_leaves_the_domain(catalog):
    # DeepSeek-V3 on 256 B200, pp 8, MXFP8: the same plan with its ep 32 inside one NVL72 domain
    # (gb200-nvl72) or across 4 DGX B200 nodes. The GEMMs are the same shapes; the exposed EP time
    # is larger across nodes (network all-to-all), so is the step.
    model = load_model("deepseek-v3")
    plan = TrainPlan(tp=1, pp=8, dp=32, ep=32, vpp=2, micro_batch=1, global_batch=4096, seq_len=4096,
                     precision="mxfp8", sharding="zero1")
    res = {}
    for sid in ("gb200-nvl72", "dgx-b200"):
        system = catalog.system(sid)
        with knobs.overridden({"training.moe_a2a_overlap": 0.0}):
            res[sid] = estimate_step_time(model, system, plan, catalog.gpu(system.gpu)).breakdown_s["ep_comm_s"]
    assert res["dgx-b200"] > 2.0 * res["gb200-nvl72"]


def test_ep_regime_words():
    assert expert.ep_regime(1, 1, 8) == "no expert parallelism (experts local)"
    assert expert.ep_regime(64, 1, 72).startswith("EP 64 within one NVLink domain")
    # 64 / 8 = 8 domains, 1 - 8/64 = 87.5% -> "88%"
    assert expert.ep_regime(64, 1, 8) == "EP 64 across 8 NVLink domains (8 ranks per domain): 88% of routed copies cross the network"


@settings(max_examples=200, deadline=None)
@given(ep_exp=st.integers(0, 8), dom_exp=st.integers(0, 7), k=st.integers(1, 16))
def test_network_bytes_invariants(ep_exp, dom_exp, k):
    # For any power-of-two layout: the cross-domain share is in [0, 1), one copy per destination
    # domain never exceeds one per routed copy, and a token reaches at most min(k, n - 1) other domains.
    ep, dom = 2 ** ep_exp, 2 ** dom_exp
    ep_d = int(expert.ep_ranks_per_domain(ep, 1, dom))
    frac = float(expert.cross_domain_fraction(ep, ep_d))
    assert 0.0 <= frac < 1.0
    n = ep / ep_d
    remote = float(expert.remote_domains_per_token(ep, ep_d, k))
    assert -1e-12 <= remote <= min(k, n - 1) + 1e-9
    per_domain = float(expert.network_bytes(1000, k, 64, ep, ep_d, dedup=1.0))
    per_copy = float(expert.network_bytes(1000, k, 64, ep, ep_d, dedup=0.0))
    assert per_domain <= per_copy * (1 + 1e-12) + 1e-9
    assert math.isfinite(per_domain) and np.isfinite(per_copy)


def test_plan_search_reports_the_ep_regime_of_its_best_plan(catalog):
    # DeepSeek-V3 on 512 H100 (8-GPU NVLink nodes; pp 8 leaves dp 64), ep restricted to 64: 64 / 8 = 8 domains and
    # 1 - 8/64 = 87.5% of the routed copies cross the network; the same search on GB200 NVL72 with
    # ep 64 keeps the all-to-all inside one 72-GPU domain.
    from gpuplan.workloads.training.plan_search import SearchSpace, search_plans

    model = load_model("deepseek-v3")
    space = SearchSpace(seq_len=4096, global_batch=4608, tp=[1], pp=[8], cp=[1], ep=[64], vpp=[1], micro_batch=[1],
                        recompute=["full"], sharding=["zero1"], sequence_parallel=[False], precision="fp8")
    h100 = catalog.system("dgx-h100")
    res = search_plans(model, h100, catalog.gpu(h100.gpu), 512, space, top=1)
    assert res.best[0].plan.ep == 64
    assert "best plan: EP 64 across 8 NVLink domains (8 ranks per domain): 88% of routed copies cross the network" in res.notes
    nvl72 = catalog.system("gb200-nvl72")
    res72 = search_plans(model, nvl72, catalog.gpu(nvl72.gpu), 512, space, top=1)
    assert any(n.startswith("best plan: EP 64 within one NVLink domain (72 GPUs)") for n in res72.notes)


def test_validation_rows_of_moe_models_take_the_recipes_expert_tp():
    # training.csv has no etp column. Megatron-core's argument default is etp = tp, but every
    # Megatron-Bridge MoE performance recipe sets expert_tensor_parallel_size=1, so an MoE row with
    # tp 2 runs its experts unsplit (etp 1); a dense row keeps no expert TP setting at all.
    from gpuplan.interfaces.validation.training import plan_from_row

    base = {"tp": "2", "pp": "1", "dp": "64", "ep": "64", "num_gpus": "128", "micro_batch": "1",
            "global_batch": "128", "seq_len": "4096", "precision": "bf16", "framework": "megatron"}
    plan, notes = plan_from_row({**base, "moe_experts": "256"})
    assert plan.expert_tp == 1 and "etp=1 (published Megatron MoE recipes)" in notes
    dense, _ = plan_from_row({**base, "ep": "1"})
    assert dense.etp is None


def test_fp8_cast_elements_of_the_experts():
    # DeepSeek-V3, one micro-batch of 4096 tokens, tp = etp = 1: the routed copies into the experts'
    # up projection 4096 x 8 x 7168 and down projection 4096 x 8 x 2048, plus the shared expert's
    # inputs 4096 x (7168 + 2048): 234,881,024 + 67,108,864 + 37,748,736 = 339,738,624 elements.
    from types import SimpleNamespace

    moe = load_model("deepseek-v3").moe
    g = SimpleNamespace(t=4096.0, t_expert=4096.0, tp=1.0, etp=1.0)
    assert expert.expert_cast_elements(g, moe, H) == 339_738_624


def _mixtral_fixed_ep_seconds(catalog, system_id: str, **plan) -> float:
    """ep_comm_s of Mixtral 8x7B (32 MoE layers, 8 experts) on one GPU, ep 1, one micro-batch: no
    all-to-all, so the EP term is the MoE layers' fixed time alone, with o = 1 ms per layer and
    o_e = 0.5 ms per expert launch. (tp 1: Megatron-core runs MoE with tp > 1 only with sequence
    parallelism, whose expert-TP token gather would add to the EP term; plan_validity.)"""
    system = catalog.system(system_id)
    with knobs.overridden({"training.moe_layer_overhead_s": 0.001, "training.moe_expert_launch_s": 0.0005}):
        p = TrainPlan(tp=1, dp=1, ep=1, micro_batch=1, global_batch=1, seq_len=4096, **plan)
        return estimate_step_time(load_model("mixtral-8x7b"), system, p, catalog.gpu(system.gpu)).breakdown_s["ep_comm_s"]


@pytest.mark.parametrize(("system", "plan", "expected_s"), [
    # Megatron-core (TE GroupedLinear, one GEMM per local expert): 32 x (o + 8 o_e) = 32 x (1 + 8 x 0.5) ms
    ("dgx-h100", {"framework": "megatron"}, 0.160),
    # torchtitan (one torch._grouped_mm for all experts): 32 x o = 0.032 s
    ("dgx-h100", {"framework": "torchtitan"}, 0.032),
    # FP8 per-tensor on B200: GroupedLinear's loop, 0.160 s; MXFP8: one grouped kernel, 32 x o = 0.032 s
    ("dgx-b200", {"precision": "fp8"}, 0.160),
    ("dgx-b200", {"precision": "mxfp8"}, 0.032),
])
def test_per_expert_launch_time_only_where_experts_run_one_by_one(catalog, system, plan, expected_s):
    assert _mixtral_fixed_ep_seconds(catalog, system, **plan) == pytest.approx(expected_s, rel=1e-12)


def test_megatron_batch_overlap_needs_one_pipeline_stage_or_interleaving():
    # Megatron-core's combined forward-backward step (schedules.py) exists for pp 1 with two
    # micro-batches or more and for the interleaved schedule (vpp > 1), not for plain 1F1B with
    # pp > 1. `other` stacks (NeMo AutoModel, DeepSeek-V2's HAI-LLM) hide the all-to-all behind the
    # shared experts only, unless the plan runs DualPipe.
    from types import SimpleNamespace

    from gpuplan.specs.execution import Framework

    lc = SimpleNamespace(layer_fwd=1.0, layer_bwd=2.0)
    pp, vpp, m = np.array([1, 1, 4, 4]), np.array([1, 1, 1, 2]), np.array([1, 8, 8, 8])
    g = SimpleNamespace(pp=pp, vpp=vpp, m=m, dualpipe=np.zeros(4, dtype=bool))
    window, other = expert.overlap_window(SimpleNamespace(framework=Framework.MEGATRON), g, lc, None)
    assert window == 3.0 and other.tolist() == [False, True, False, True]
    assert Framework.OTHER not in expert.BATCH_OVERLAP_FRAMEWORKS
    no_shared = SimpleNamespace(framework=Framework.OTHER, ops=SimpleNamespace(moe_layer=SimpleNamespace(linears=[])))
    # no shared experts: nothing to hide behind (window 0) without DualPipe
    assert expert.overlap_window(no_shared, g, lc, None) == (0.0, True)
    # a plan that runs DualPipe (pp 4, vpp 1) overlaps in its F&B chunks whatever the stack
    g.dualpipe = np.array([False, False, True, False])
    _, dual = expert.overlap_window(SimpleNamespace(framework=Framework.MEGATRON), g, lc, None)
    assert dual.tolist() == [False, True, True, True]
    window_other, _ = expert.overlap_window(no_shared, g, lc, None)
    assert window_other.tolist() == [0.0, 0.0, 3.0, 0.0]


def test_expert_gemms_launch_per_expert_except_te_block_scaled_grouped_kernels():
    # TE GroupedLinear loops one GEMM (+ one quantize) per local expert in BF16 / FP8 per-tensor;
    # MXFP8 / NVFP4 run grouped quantize + grouped GEMM kernels (TE v2.13 #2586, v2.14 #2748), one
    # launch for all experts. torchtitan (torch._grouped_mm) never launches per expert; DeepSpeed-MoE
    # loops over its expert modules whatever the precision.
    from gpuplan.specs.execution import Framework
    from gpuplan.specs.plan import Precision

    launches = expert.per_expert_launches
    assert launches(Framework.MEGATRON, Precision.BF16, False)
    assert launches(Framework.MEGATRON, Precision.FP8, True)
    assert not launches(Framework.MEGATRON, Precision.MXFP8, True)
    assert not launches(Framework.MEGATRON, Precision.NVFP4, True)
    assert not launches(Framework.TORCHTITAN, Precision.BF16, False)
    assert launches(Framework.DEEPSPEED, Precision.MXFP8, True)


@pytest.mark.parametrize("sp_cell", ["", "false", "true"])
def test_megatron_moe_rows_with_tp_run_sequence_parallelism(sp_cell):
    # Megatron-core refuses EP with TP but without SP (TransformerConfig.__post_init__: "When using
    # expert parallelism and tensor parallelism, sequence parallelism must be used"), so a Megatron
    # MoE row with tp 2 runs SP whatever its cell says, even where a stated micro-batch marks a
    # complete launch configuration (where an empty cell otherwise means off). A dense row keeps
    # the cell; torchtitan has no such rule, but its own default turns SP on where the cell is empty
    # (`parallelism.enable_sequence_parallel = True`, torchtitan/config/configs.py).
    from gpuplan.interfaces.validation.training import plan_from_row

    base = {"tp": "2", "pp": "1", "dp": "64", "ep": "64", "num_gpus": "128", "micro_batch": "1",
            "global_batch": "128", "seq_len": "4096", "precision": "bf16", "framework": "megatron",
            "sequence_parallel": sp_cell}
    plan, notes = plan_from_row({**base, "moe_experts": "256"})
    assert plan.sequence_parallel
    assert ("sequence_parallel (Megatron requires it for MoE with tp > 1)" in notes) == (sp_cell != "true")
    dense, _ = plan_from_row({**base, "ep": "1"})
    assert dense.sequence_parallel == (sp_cell == "true")
    titan, _ = plan_from_row({**base, "moe_experts": "256", "framework": "torchtitan"})
    assert titan.sequence_parallel == (sp_cell != "false")
    assert not titan.tp_comm_overlap


def test_torchtitan_float8_rows_do_not_assume_transformer_engine_userbuffers():
    # An fp8 Megatron row with an empty SP cell is read as NeMo's TE recipe (SP + userbuffers TP
    # overlap); torchtitan's float8 is torchao's Float8Linear, with no userbuffers, and its vanilla
    # TP overlaps nothing (async TP is `enable_async_tensor_parallel`, default False).
    from gpuplan.interfaces.validation.training import plan_from_row

    base = {"tp": "8", "pp": "1", "dp": "32", "num_gpus": "256", "micro_batch": "16", "global_batch": "512",
            "seq_len": "8192", "precision": "fp8", "sharding": "fsdp", "sequence_parallel": ""}
    megatron, _ = plan_from_row({**base, "framework": "megatron"})
    assert megatron.sequence_parallel and megatron.tp_comm_overlap
    titan, notes = plan_from_row({**base, "framework": "torchtitan"})
    assert titan.sequence_parallel and not titan.tp_comm_overlap
    assert "sequence_parallel (torchtitan's default, unstated)" in notes


def test_plan_search_offers_megatron_moe_plans_with_tp_only_with_sequence_parallelism(catalog):
    # Mixtral 8x7B on 16 H100, tp in {1, 2}, SP on or off, everything else fixed: 4 grid points, of
    # which (tp 1, SP on) is rejected as always and (tp 2, SP off) because Megatron refuses MoE with
    # TP but without SP; torchtitan has no such rule, so there only the tp-1 SP plan is rejected.
    from gpuplan.workloads.training.plan_search import MOE_TP_NEEDS_SP_REASON, SearchSpace, search_plans

    model = load_model("mixtral-8x7b")
    system = catalog.system("dgx-h100")
    space = SearchSpace(seq_len=4096, global_batch=64, tp=[1, 2], pp=[4], cp=[1], ep=[2], vpp=[1], micro_batch=[1],
                        recompute=["full"], sharding=["zero1"], sequence_parallel=[False, True])
    res = search_plans(model, system, catalog.gpu(system.gpu), 16, space, top=10)
    assert res.rejected.get(MOE_TP_NEEDS_SP_REASON, 0) >= 1
    assert all(r.plan.sequence_parallel for r in res.best if r.plan.tp > 1)
    titan = search_plans(model, system, catalog.gpu(system.gpu), 16, space, top=10, framework="torchtitan")
    assert titan.rejected.get(MOE_TP_NEEDS_SP_REASON, 0) == 0
    assert any(r.plan.tp > 1 and not r.plan.sequence_parallel for r in titan.best)


def test_full_recompute_dispatches_and_combines_once_more(catalog):
    # Per MoE layer and micro-batch: dispatch + combine forward and backward = 4 all-to-alls; a fully
    # recomputed layer re-runs its forward (token dispatcher included) before its backward: 6. With
    # nothing hidden (moe_a2a_overlap 0) and no fixed time, the exposed EP time is the all-to-alls
    # alone, so full recompute gives exactly 6 / 4 = 1.5 x the EP time of the same plan without it.
    assert expert.collectives_per_layer(False) == 4.0 and expert.collectives_per_layer(True) == 6.0
    system = catalog.system("dgx-h100")
    model = load_model("mixtral-8x7b")
    out = {}
    with knobs.overridden({"training.moe_a2a_overlap": 0.0, "training.moe_layer_overhead_s": 0.0,
                           "training.moe_expert_launch_s": 0.0}):
        for rc in ("none", "full"):
            plan = TrainPlan(tp=1, pp=2, dp=8, ep=8, micro_batch=1, global_batch=64, seq_len=4096, recompute=rc)
            out[rc] = estimate_step_time(model, system, plan, catalog.gpu(system.gpu)).breakdown_s["ep_comm_s"]
    assert out["none"] > 0.0
    assert out["full"] == pytest.approx(1.5 * out["none"], rel=1e-12)
