"""DeepSeek-V3-class MoE training at scale: DualPipe's bubble and memory, pipeline schedule runs per
step (bubble and FSDP2 gradient sync per run), node-limited routing from the model config, and the
validation rules that read them from a row's notes. Expected values are derived by hand in the
comments from the sources the code cites (DeepSeek-V3 report arXiv 2412.19437 sec. 2.1.2, 3.2.1
Table 2; deepseek-ai/DualPipe; torch/distributed/pipelining/stage.py; NeMo AutoModel)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from gpuplan.catalog import load_catalog
from gpuplan.cli.main import app
from gpuplan.interfaces.validation.training import stated_pipeline_flushes, stated_pipeline_schedule
from gpuplan.models import load_model
from gpuplan.models.hf_config import model_from_hf_config, read_config_file
from gpuplan.specs import MoeSpec, TrainPlan
from gpuplan.specs.execution import Framework, PipelineSchedule
from gpuplan.workloads.training.memory import rank_params, training_memory
from gpuplan.workloads.training.plan_codes import RecomputeCode, ShardingCode
from gpuplan.workloads.training.step import expert
from gpuplan.workloads.training.step.assembly import step_time_arrays
from gpuplan.workloads.training.step.data import fsdp2_pipeline_syncs
from gpuplan.workloads.training.step.expert_routing import distinct_domains_hit, reachable_domains
from gpuplan.workloads.training.step.inputs import StepContext
from gpuplan.workloads.training.step.pipeline import dualpipe_bubble_seconds


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


# ---- DualPipe ------------------------------------------------------------------------------------

def test_dualpipe_bubble_formula():
    # (pp/2 - 1)(F&B + B - 3W), DeepSeek-V3 report Table 2: pp 16, F&B 3 s, B 2 s, W 1 s
    # -> (8 - 1)(3 + 2 - 3) = 14 s; pp 2 -> (1 - 1)(...) = 0 (no bubble term at two ranks)
    assert float(dualpipe_bubble_seconds(16, 3.0, 2.0, 1.0)) == pytest.approx(14.0, rel=1e-15)
    assert float(dualpipe_bubble_seconds(2, 3.0, 2.0, 1.0)) == 0.0
    # 3W above F&B + B (a weight-heavy chunk) cannot give a negative idle time: 0
    assert float(dualpipe_bubble_seconds(8, 1.0, 1.0, 1.0)) == 0.0


def test_dualpipe_bubble_below_1f1b_for_deepseek_v3(catalog):
    # DeepSeek-V3 on 2048 H800 (the report's layout: pp 16, dp 128, ep 64, 120 micro-batches of 4096
    # tokens). With B ~ 2F and W ~ F (weight gradients = forward GEMM FLOPs), 1F1B idles (pp - 1)(F + B)
    # ~ 15 x 3F = 45F, DualPipe (pp/2 - 1)(F&B + B - 3W) ~ 7 (3F + 2F - 3F) = 14F: well under half.
    model = load_model("deepseek-ai--DeepSeek-V3")
    system = catalog.system("hgx-h800")
    ctx = StepContext.build(model, system, catalog.gpu(system.gpu), 4096, "fp8", Framework.OTHER)
    args = (1, 16, 128, 1, 64, 1, 1, 120, RecomputeCode.SELECTIVE, False, ShardingCode.ZERO1)
    one_f_one_b = float(step_time_arrays(ctx, *args).bubble_s)
    dual = float(step_time_arrays(ctx, *args, dualpipe=True).bubble_s)
    assert 0.0 < dual < 0.6 * one_f_one_b
    # the steady state is the same micro-batches on the same stage: only the bubble and the exposed
    # expert all-to-all move (DualPipe's F&B chunks hide it, report sec. 3.2.1; 1F1B on an `other`
    # stack hides it behind the shared expert only)
    a, b = step_time_arrays(ctx, *args).parts(), step_time_arrays(ctx, *args, dualpipe=True).parts()
    moved = ("bubble_s", "ep_comm_s")
    assert {k: v for k, v in a.items() if k not in moved} == {k: v for k, v in b.items() if k not in moved}
    assert float(b["ep_comm_s"]) < float(a["ep_comm_s"])


def test_dualpipe_plan_rules():
    # deepseek-ai/DualPipe `DualPipe.step`: even ranks, an even number of chunks >= 2 x ranks
    ok = TrainPlan(pp=16, dp=128, ep=64, global_batch=15360, pipeline_schedule="dualpipe")
    assert ok.grad_accum_steps == 120  # 15360 / 128
    with pytest.raises(ValueError, match="even pp"):
        TrainPlan(pp=15, dp=8, global_batch=240, pipeline_schedule="dualpipe")
    with pytest.raises(ValueError, match="vpp"):
        TrainPlan(pp=4, vpp=2, dp=8, global_batch=64, pipeline_schedule="dualpipe")
    with pytest.raises(ValueError, match="at least 2 x pp = 32"):  # 16 micro-batches < 2 x 16
        TrainPlan(pp=16, dp=8, global_batch=128, pipeline_schedule="dualpipe")
    with pytest.raises(ValueError, match="pipeline_flushes"):  # 8 micro-batches do not split into 3 runs
        TrainPlan(pp=4, dp=8, global_batch=64, pipeline_flushes=3)


def test_new_plan_fields_leave_old_dumps_unchanged():
    # plans written before the fields existed dump (and hash) as before: defaults are left out
    dump = TrainPlan(pp=4, dp=8, global_batch=64).model_dump()
    assert "pipeline_schedule" not in dump and "pipeline_flushes" not in dump
    set_ = TrainPlan(pp=4, dp=8, global_batch=128, pipeline_flushes=2, pipeline_schedule="dualpipe").model_dump()
    assert (set_["pipeline_schedule"], set_["pipeline_flushes"]) == (PipelineSchedule.DUALPIPE, 2)
    assert TrainPlan.model_validate(set_).pipeline_flushes == 2


def test_dualpipe_rank_holds_two_stages_of_parameters():
    # DeepSeek-V3 report Table 2, "Parameter 2x": rank 0 holds stage 0 (embedding + layers 0-7 of a
    # 32-layer model at pp 4) and its mirror stage 3 (layers 24-31, final norm, output head).
    model = load_model("meta-llama--Llama-2-7b-hf")
    one = TrainPlan(pp=4, dp=2, global_batch=16)
    dual = one.model_copy(update={"pipeline_schedule": PipelineSchedule.DUALPIPE})
    first = rank_params(model, one, list(range(0, 8)), True, False)
    last = rank_params(model, one, list(range(24, 32)), False, True)
    assert training_memory(model, dual).params_per_gpu == round(sum(first) + sum(last))
    # pp + 1 stage-chunks of activations in flight = (pp + 1) / 2 rank-layers' worth of micro-batches
    assert training_memory(model, dual).microbatches_in_flight == pytest.approx(2.5, rel=1e-15)


# ---- schedule runs per step (gradient accumulation outside the schedule) ----------------------------

def test_bubble_and_fsdp2_sync_per_schedule_run(catalog):
    # NeMo AutoModel's benchmark loop calls `schedule.step()` GA times per optimizer step
    # (recipes/llm/benchmark.py); each run fills and drains the pipeline and torch's pipelining stage
    # reduce-scatters and reshards once after its last backward (stage.py `backward_maybe_with_nosync`):
    # 4 runs -> 4 x the bubble and 4 x the gather + reduce-scatter of one run.
    assert tuple(map(float, fsdp2_pipeline_syncs(4))) == (4.0, 4.0)
    model = load_model("deepseek-ai--DeepSeek-V3")
    system = catalog.system("dgx-h100")
    ctx = StepContext.build(model, system, catalog.gpu(system.gpu), 4096, "bf16", Framework.OTHER)
    args = (1, 4, 256, 1, 64, 8, 1, 32, RecomputeCode.FULL, False, ShardingCode.ZERO3)
    once = step_time_arrays(ctx, *args, pipeline_flushes=1)
    four = step_time_arrays(ctx, *args, pipeline_flushes=4)
    assert float(four.bubble_s) == pytest.approx(4.0 * float(once.bubble_s), rel=1e-12)
    assert float(four.dp_comm_s) == pytest.approx(4.0 * float(once.dp_comm_s), rel=1e-12)
    assert float(four.compute_s) == float(once.compute_s)


@settings(max_examples=40, deadline=None)
@given(pp=st.sampled_from([2, 4, 8]), runs=st.sampled_from([1, 2, 4]), vpp=st.sampled_from([1, 2]))
def test_bubble_scales_with_runs(catalog, pp, runs, vpp):
    model = load_model("meta-llama--Llama-2-7b-hf")
    system = catalog.system("dgx-h100")
    ctx = StepContext.build(model, system, catalog.gpu(system.gpu), 4096)
    args = (1, pp, 2, 1, 1, vpp, 1, 8, RecomputeCode.NONE, False, ShardingCode.ZERO1)
    base = float(step_time_arrays(ctx, *args).bubble_s)
    assert float(step_time_arrays(ctx, *args, pipeline_flushes=runs).bubble_s) == pytest.approx(runs * base, rel=1e-12)


# ---- node-limited routing --------------------------------------------------------------------------

def test_deepseek_v3_config_reads_node_limit():
    # DeepSeek-V3 config.json: n_group 8, topk_group 4, topk_method noaux_tc
    moe = load_model("deepseek-ai--DeepSeek-V3").moe
    assert (moe.expert_groups, moe.groups_per_token) == (8, 4)


def test_greedy_topk_has_no_node_limit():
    # DeepSeek-V2 modeling_deepseek.py MoEGate: `greedy` ignores n_group / topk_group
    import gpuplan.catalog

    path = Path(gpuplan.catalog.__file__).parent / "data" / "models" / "deepseek-ai--DeepSeek-V3.json"
    cfg = read_config_file(path)
    assert model_from_hf_config(cfg, "v3").moe.expert_groups == 8
    assert model_from_hf_config({**cfg, "topk_method": "greedy"}, "v3-greedy").moe.expert_groups is None


def test_moe_spec_group_fields_checked():
    with pytest.raises(ValueError, match="both or neither"):
        MoeSpec(num_experts=256, top_k=8, expert_ffn=2048, expert_groups=8)
    with pytest.raises(ValueError, match="exceeds expert_groups"):
        MoeSpec(num_experts=256, top_k=8, expert_ffn=2048, expert_groups=8, groups_per_token=9)
    with pytest.raises(ValueError, match="must divide num_experts"):
        MoeSpec(num_experts=256, top_k=8, expert_ffn=2048, expert_groups=6, groups_per_token=2)
    assert "expert_groups" not in MoeSpec(num_experts=8, top_k=2, expert_ffn=64).model_dump()


def test_reachable_domains():
    # EP 64 over 8 nodes, 8 groups of 32 experts = one node each: 4 groups per token -> 4 nodes (M = 4)
    assert float(reachable_domains(8, 8, 4)) == 4.0
    # EP 128 over 16 nodes: a group spans 2 nodes -> 4 x 16 / 8 = 8
    assert float(reachable_domains(16, 8, 4)) == 8.0
    # EP 32 over 4 nodes: 2 groups per node; 4 of 8 groups drawn miss a given node with probability
    # C(6,4)/C(8,4) = (6 5 4 3)/(8 7 6 5) = 360/1680 -> 4 (1 - 3/14) = 22/7 = 3.142857
    assert float(reachable_domains(4, 8, 4)) == pytest.approx(22.0 / 7.0, rel=1e-12)
    # no limit, or a limit as wide as the groups: every domain
    assert float(reachable_domains(8)) == 8.0 and float(reachable_domains(8, 8, 8)) == 8.0


def test_deepseek_v3_remote_nodes_per_token():
    # Unlimited (n = 8, k = 8): 7 (1 - (7/8)^8) = 7 x 0.6563911 = 4.594738 other nodes per token.
    # Node-limited to M = 4: distinct nodes hit 4 (1 - (3/4)^8) = 4 x 0.899887 = 3.599548, of which
    # 7/8 are another node: 3.149605 (31% fewer IB bytes under DeepEP's one copy per node).
    assert float(expert.remote_domains_per_token(64, 8, 8)) == pytest.approx(4.594738, rel=1e-6)
    assert float(expert.remote_domains_per_token(64, 8, 8, 8, 4)) == pytest.approx(3.149605, rel=1e-6)
    assert float(distinct_domains_hit(4, 8)) == pytest.approx(3.599548, rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(domains=st.sampled_from([1, 2, 4, 8, 16, 32]), groups=st.sampled_from([1, 2, 4, 8, 16]),
       pick=st.integers(1, 16), k=st.integers(1, 16))
def test_node_limit_never_adds_remote_domains(domains, groups, pick, k):
    s = min(pick, groups)
    limited = float(expert.remote_domains_per_token(8 * domains, 8, k, groups, s))
    unlimited = float(expert.remote_domains_per_token(8 * domains, 8, k))
    assert 0.0 <= limited <= unlimited + 1e-12
    assert limited <= domains - 1 + 1e-12


# ---- validation rows: what the notes state -----------------------------------------------------------

def test_rows_state_dualpipe_and_local_batch():
    dsv3 = {"notes": "FP8 mixed-precision training, DualPipe, 16-way PP"}
    assert stated_pipeline_schedule(dsv3, 16) is PipelineSchedule.DUALPIPE
    assert stated_pipeline_schedule(dsv3, 1) is PipelineSchedule.ONE_F_ONE_B  # no pipeline, no schedule
    automodel = {"notes": "LBS 8 per DP rank, GA 4, MBS 1; FSDP 256."}
    # global batch 8192 over dp 256 in local batches of 8: 8192 / (8 x 256) = 4 schedule runs
    assert stated_pipeline_flushes(automodel, 4, 256, 8192) == 4
    assert stated_pipeline_flushes(automodel, 4, 64, 512) == 1  # 512 / (8 x 64)
    assert stated_pipeline_flushes(automodel, 1, 256, 8192) == 1  # pp 1: no schedule to repeat
    assert stated_pipeline_flushes({"notes": "1F1B"}, 4, 256, 8192) == 1


# ---- CLI ---------------------------------------------------------------------------------------------

_PLAN = ["Qwen--Qwen3-30B-A3B", "--system", "dgx-h100", "--gpus", "32", "--tp", "1", "--pp", "4", "--dp", "8", "--ep",
         "8", "--vpp", "1", "--micro-batch", "1", "--recompute", "full", "--sharding", "zero1", "--global-batch", "256",
         "--seq-len", "4096"]


def test_cli_pipeline_options():
    runner = CliRunner()
    out = runner.invoke(app, ["train", *_PLAN, "--pipeline-schedule", "dualpipe", "--pipeline-flushes", "2", "--json"])
    assert out.exit_code == 0, out.output
    best = json.loads(out.output)["best_plan"]
    assert (best["pipeline_schedule"], best["pipeline_flushes"]) == ("dualpipe", 2)
    plain = json.loads(runner.invoke(app, ["train", *_PLAN, "--json"]).output)["best_plan"]
    assert (plain["pipeline_schedule"], plain["pipeline_flushes"]) == ("1f1b", 1)


@pytest.mark.parametrize("extra, field", [
    (["--pipeline-schedule", "zb"], "pipeline-schedule"),
    (["--pipeline-flushes", "3"], "pipeline-flushes"),  # 32 micro-batches do not split into 3 runs
    (["--pipeline-flushes", "0"], "pipeline-flushes"),
])
def test_cli_pipeline_options_bad_input(extra, field):
    out = CliRunner().invoke(app, ["train", *_PLAN, *extra])
    assert out.exit_code == 2
    assert f"--{field}" in out.output and "Traceback" not in out.output


def test_cli_pipeline_options_need_one_plan():
    out = CliRunner().invoke(app, ["train", "gpt3-125m", "--gpus", "8", "--pipeline-schedule", "dualpipe"])
    assert out.exit_code == 2 and "applies to one plan" in out.output
