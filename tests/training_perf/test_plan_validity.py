"""Plan validity written once (`workloads.training.plan_validity`): the scalar check and the plan
search apply the same rules. Three checks: (1) the rules against a literal transcription of the
conditions the frameworks check (Megatron-LM / Megatron-core / torchtitan, cited per line), on
random plans; (2) brute force: on random grid points, `check_plan` accepts exactly the points the
search's validity masks accept (the search's own policy and duplicate rules aside); (3) named cases
derived by hand, through the API and the CLI."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from gpuplan.catalog import load_catalog
from gpuplan.cli.main import app
from gpuplan.errors import InputError
from gpuplan.models import load_model
from gpuplan.specs.execution import AttentionKernel, DeepSpeedRelease, Framework
from gpuplan.specs.plan import Recompute, Sharding, TrainPlan
from gpuplan.workloads.training.plan_codes import ExpertTpCode, RecomputeCode, ShardingCode
from gpuplan.workloads.training.plan_search import (
    AXES, SP_WITHOUT_TP_REASON, SearchSpace, grid_validity, plan_at, search_plans,
)
from gpuplan.workloads.training.plan_validity import RULES, check_plan

runner = CliRunner()

#: dense MHA (gpt3-1.3b: 16 heads), GQA (llama-3-8b: 32 heads, 8 KV heads), MoE with GQA
#: (mixtral-8x7b: 8 experts; qwen3-30b-a3b: 128 experts, 4 KV heads), MLA MoE (deepseek-v3)
MODELS = ("gpt3-1.3b", "llama-3-8b", "mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3")
FRAMEWORKS = (Framework.MEGATRON, Framework.TORCHTITAN, Framework.DEEPSPEED)


def oracle_fields(model, plan: TrainPlan, num_gpus: int | None) -> list[str]:
    """The fields of every condition the plan breaks, transcribed from the frameworks' own checks
    (not from plan_validity): each line names its file and condition."""
    tp, pp, dp, cp, ep, vpp = plan.tp, plan.pp, plan.dp, plan.cp, plan.ep, plan.vpp
    broken = []
    # Megatron-LM arguments.py: world_size % (tp * pp * cp) == 0, dp = world_size // (tp * pp * cp)
    if num_gpus is not None and (num_gpus % (tp * pp * cp) or num_gpus // (tp * pp * cp) != dp):
        broken.append("dp")
    # transformer_config.py: num_attention_heads % tensor_model_parallel_size != 0 -> ValueError
    if model.heads % tp != 0:
        broken.append("tp")
    if plan.framework is Framework.TORCHTITAN:
        # torchtitan models/common/decoder.py: n_kv_heads % tp != 0 -> ValueError
        if model.kv_heads % tp != 0:
            broken.append("tp")
    # transformer_config.py: num_query_groups % tp != 0 and tp % num_query_groups != 0 -> ValueError
    elif model.kv_heads % tp != 0 and tp % model.kv_heads != 0:
        broken.append("tp")
    # every one of the pp x vpp model chunks holds a layer
    if pp * vpp > model.layers:
        broken.append("pp")
    if vpp > 1:
        # arguments.py (overlap_p2p_comm, the default): interleaved schedule needs pp > 1
        if pp <= 1:
            broken.append("vpp")
        elif plan.global_batch is not None:
            # schedules.py forward_backward_pipelining_with_interleaving, group size = pp (default)
            m = plan.global_batch // (plan.micro_batch * dp)
            group = pp
            if group > m or group < pp or 0 < m % group < pp:
                broken.append("vpp")
    # moe_layer.py MoELayer.forward: training with attn TP > 1 and no sequence parallelism -> ValueError
    if model.moe is not None and plan.framework is Framework.MEGATRON and tp > 1 and not plan.sequence_parallel:
        broken.append("sequence_parallel")
    # arguments.py: expert_model_parallel_size > 1 needs num_experts, num_experts % ep == 0
    if ep > 1 and model.moe is None:
        broken.append("ep")
    if model.moe is not None and model.moe.num_experts % ep != 0:
        broken.append("ep")
    # parallel_state.py: world_size % (expert_tensor_parallel_size * ep * pp) != 0 -> RuntimeError
    if model.moe is not None and (tp * pp * dp * cp) % (plan.expert_tp * ep * pp) != 0:
        broken.append("ep")
    # arguments.py: seq_length % (context_parallel_size * 2) == 0 when cp > 1
    if cp > 1 and plan.seq_len % (cp * 2) != 0:
        broken.append("seq_len")
    return broken


def _random_plan(rng: np.random.Generator, model) -> TrainPlan:
    pick = lambda values: values[int(rng.integers(len(values)))]  # noqa: E731
    tp, dp, mb = pick((1, 2, 3, 4, 8, 16)), pick((1, 2, 3, 4, 6, 8)), pick((1, 2))
    return TrainPlan(
        tp=tp, pp=pick((1, 2, 3, 4, 8)), dp=dp, cp=pick((1, 2, 3, 4)), ep=pick((1, 2, 3, 4, 8, 16)),
        etp=pick((None, 1, 2)), vpp=pick((1, 2, 3)), micro_batch=mb,
        global_batch=pick((None, mb * dp * int(rng.integers(1, 13)))), seq_len=pick((2048, 4098, 4100, 8192)),
        sequence_parallel=bool(rng.integers(2)), framework=pick(FRAMEWORKS),
    )


def test_rules_match_the_frameworks_checks_on_random_plans():
    # 3,000 seeded random plans over five models and three frameworks: check_plan raises exactly when
    # the transcription finds a broken condition, and names the field of the first one
    rng = np.random.default_rng(2026)
    models = [load_model(name) for name in MODELS]
    counts = {"ok": 0, "broken": 0}
    for _ in range(3000):
        model = models[int(rng.integers(len(models)))]
        plan = _random_plan(rng, model)
        num_gpus = plan.num_gpus + (1 if rng.random() < 0.1 else 0)
        expected = oracle_fields(model, plan, num_gpus)
        if expected:
            with pytest.raises(InputError) as err:
                check_plan(model, plan, num_gpus)
            assert err.value.field == expected[0], (model.name, plan, expected)
            counts["broken"] += 1
        else:
            check_plan(model, plan, num_gpus)
            counts["ok"] += 1
    assert counts["ok"] > 300 and counts["broken"] > 300  # both sides exercised


#: (model, GPUs, framework, sequence length, given global batch) of the brute-force comparison
SEARCH_CASES = [
    ("llama-3-8b", 48, Framework.MEGATRON, 4100, 96),
    ("llama-3-8b", 64, Framework.TORCHTITAN, 4096, None),
    ("mixtral-8x7b", 32, Framework.MEGATRON, 8192, 64),
    ("qwen3-30b-a3b", 24, Framework.TORCHTITAN, 4096, None),
    ("gpt3-1.3b", 12, Framework.DEEPSPEED, 2048, 36),
]


@pytest.mark.parametrize(("name", "num_gpus", "framework", "seq_len", "batch"), SEARCH_CASES)
def test_check_plan_accepts_exactly_the_plans_the_search_finds_valid(name, num_gpus, framework, seq_len, batch):
    # 2,000 random grid points per case, scored by the search's own validity code (grid_validity)
    # and turned into TrainPlans the way the search does (plan_at): check_plan accepts a point exactly
    # when no validity rule rejects it; the search's own rules (default-batch policy, duplicate points)
    # reject only plans check_plan accepts.
    model = load_model(name)
    rng = np.random.default_rng(hash((name, num_gpus)) % 2**32)
    n = 2000
    # ep > 1 is refused on a dense model: mostly 1 there, so that valid points stay common
    eps = (1, 2, 3, 4, 8) if model.moe is not None else (1, 1, 1, 2)
    values = {"tp": (1, 2, 3, 4, 8, 16), "pp": (1, 2, 3, 4, 6, 8), "cp": (1, 2, 4), "ep": eps,
              "vpp": (1, 2, 3, 4), "mb": (1, 2, 3, 4), "rc": tuple(RecomputeCode), "sh": tuple(ShardingCode),
              "sp": (False, True), "et": tuple(ExpertTpCode) if model.moe is not None else (ExpertTpCode.TP,)}
    g = {a: np.array(values[a])[rng.integers(len(values[a]), size=n)] for a in AXES}
    dp, m, gb, reasons = grid_validity(model, framework, seq_len, g, num_gpus, batch)
    validity = np.zeros(n, dtype=bool)
    for rule in RULES:
        validity |= np.broadcast_to(reasons[rule.reason], (n,))
    searched = np.zeros(n, dtype=bool)
    for mask in reasons.values():
        searched |= np.broadcast_to(mask, (n,))
    space = SearchSpace(global_batch=batch, seq_len=seq_len)
    ctx = SimpleNamespace(framework=framework, attention_kernel=AttentionKernel.FLASH,
                          deepspeed_release=DeepSpeedRelease.CURRENT)
    accepted = np.zeros(n, dtype=bool)
    for i in range(n):
        point = {a: g[a][i] for a in AXES} | {"dp": np.broadcast_to(dp, (n,))[i], "gb": np.broadcast_to(gb, (n,))[i]}
        try:
            check_plan(model, plan_at(model, space, ctx, point), num_gpus)
            accepted[i] = True
        except (InputError, ValueError):  # ValueError: TrainPlan's own batch check (the same rule)
            pass
    assert np.array_equal(accepted, ~validity)
    assert not np.any(~accepted & ~searched)  # every point check_plan refuses, the search refuses
    assert 0 < np.count_nonzero(~searched) < np.count_nonzero(accepted) < n


def test_torchtitan_refuses_tp_beyond_the_kv_heads_megatron_replicates_them():
    # Llama 3 8B: 32 heads, 8 KV heads. tp 16: Megatron-core replicates each KV head on 16 / 8 = 2 ranks
    # (16 % 8 == 0 passes transformer_config.py); torchtitan shards wk / wv by head: 8 % 16 != 0.
    model = load_model("llama-3-8b")
    plan = TrainPlan(tp=16, dp=1, seq_len=4096)
    check_plan(model, plan)
    with pytest.raises(InputError, match=r"tp \(16\) must divide kv_heads \(8\) under torchtitan") as err:
        check_plan(model, plan.model_copy(update={"framework": Framework.TORCHTITAN}))
    assert err.value.field == "tp"


def test_interleaving_needs_whole_groups_of_pp_micro_batches():
    # GPT-3 175B, pp 8, vpp 2, dp 1, micro-batch 1: global batch 12 -> m = 12, 12 % 8 = 4 (schedules.py
    # raises); global batch 16 -> m = 16 = 2 x 8 passes; no global batch -> m unknown, not checked
    model = load_model("gpt3-175b")
    base = TrainPlan(tp=8, pp=8, vpp=2, dp=1, micro_batch=1, seq_len=2048)
    check_plan(model, base)
    check_plan(model, base.model_copy(update={"global_batch": 16}))
    with pytest.raises(InputError, match=r"global_batch / \(micro_batch x dp\) = 12, to be a multiple of pp \(8\)"):
        check_plan(model, base.model_copy(update={"global_batch": 12}))


def test_context_parallel_needs_two_chunks_per_rank():
    # seq 4100 = 4 x 1025: cp 2 splits it into 2 x 2 = 4 chunks of 1025; cp 4 needs 8 chunks: 4100 % 8 = 4
    model = load_model("llama-3-8b")
    check_plan(model, TrainPlan(cp=2, seq_len=4100))
    with pytest.raises(InputError, match=r"seq_len \(4100\) must be a multiple of 2 x cp \(8\)") as err:
        check_plan(model, TrainPlan(cp=4, seq_len=4100))
    assert err.value.field == "seq_len"


def test_search_reports_the_kv_head_rule_under_torchtitan():
    # torchtitan, Llama 3 8B on 64 H100: tp 16 > 8 KV heads is refused (decoder.py), so no plan of
    # tp 16 is ranked and the rule's reason counts the grid points it removed
    c = load_catalog()
    system = c.system("dgx-h100")
    space = SearchSpace(seq_len=4096, global_batch=256, tp=[8, 16], pp=[1], cp=[1], vpp=[1], micro_batch=[1],
                        recompute=["full"], sharding=["zero1"], sequence_parallel=[True])
    res = search_plans(load_model("llama-3-8b"), system, c.gpu(system.gpu), 64, space, framework="torchtitan")
    assert res.rejected["tp and the KV heads do not divide one another"] == 1
    assert {r.plan.tp for r in res.best} == {8}
    assert res.rejected[SP_WITHOUT_TP_REASON] == 0


def test_api_refuses_a_megatron_moe_plan_with_tp_and_no_sequence_parallelism():
    from gpuplan import api

    # every axis named: the one plan is checked (a subset of the axes would be searched instead)
    with pytest.raises(InputError, match="needs sequence parallelism") as err:
        api.train("mixtral-8x7b", "dgx-h100", 16, tp=2, pp=1, dp=8, ep=1, vpp=1, micro_batch=1, recompute="full",
                  sharding="zero1", sequence_parallel=False)
    assert err.value.field == "sequence_parallel"


def test_cli_reports_a_broken_rule_in_one_line_exit_2():
    result = runner.invoke(app, ["train", "gpt3-175b", "--gpus", "64", "--tp", "8", "--pp", "8", "--dp", "1", "--vpp", "2",
                                 "--micro-batch", "1", "--recompute", "none", "--sharding", "none", "--sequence-parallel",
                                 "--global-batch", "12", "--json"])
    assert result.exit_code == 2
    error = json.loads(result.output)["error"]
    assert error["field"] == "vpp" and "multiple of pp (8)" in error["message"]
    assert "Traceback" not in result.output


@settings(max_examples=200, deadline=None)
@given(tp=st.integers(1, 64), pp=st.integers(1, 64), vpp=st.integers(1, 8), cp=st.integers(1, 16),
       ep=st.integers(1, 64), seq=st.integers(1, 1 << 16), framework=st.sampled_from(list(Framework)),
       sp=st.booleans(), name=st.sampled_from(["llama-3-8b", "mixtral-8x7b"]))
def test_check_plan_either_passes_or_names_a_field_in_one_line(tp, pp, vpp, cp, ep, seq, framework, sp, name):
    # bad input: one InputError naming a field the plan has, one line, never another exception
    model = load_model(name)
    plan = TrainPlan(tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep, seq_len=seq, framework=framework, sequence_parallel=sp,
                     recompute=Recompute.NONE, sharding=Sharding.NONE)
    try:
        check_plan(model, plan, plan.num_gpus)
    except InputError as exc:
        assert exc.field in {rule.field for rule in RULES} and "\n" not in str(exc)


def test_huge_degrees_are_compared_exactly():
    # one plan's rules run on Python ints: 2 x (2^63 - 1) is not wrapped to -2 (int64), so pp x vpp
    # exceeds GPT-3 125M's 12 layers and the plan is refused by name (found by tests/fuzz)
    model = load_model("gpt3-125m")
    with pytest.raises(InputError, match="exceeds the number of layers") as err:
        check_plan(model, TrainPlan(pp=2, vpp=2**63 - 1))
    assert err.value.field == "pp"
