"""The default global batch (plan_search.default_global_batch): one rule for the plan search, the API
and the CLI; each plan of a search with no batch gets its own, ranked by time per token; a given
batch changes nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuplan import api
from gpuplan.cli.main import app
from gpuplan.models import load_model
from gpuplan.workloads.training.plan_search import (
    DEFAULT_BATCH_REASON, MAX_DEFAULT_BATCH_TOKENS, OVERSIZED_BATCH_REASON, SearchSpace, default_global_batch,
    search_plans,
)
from gpuplan.workloads.training.step_time import estimate_step_time

runner = CliRunner()


@pytest.fixture(scope="module")
def llama70b_default(h100):
    # llama-3-70b on 3072 H100s at seq 4096, no batch given (the command)
    system, gpu = h100
    return search_plans(load_model("llama-3-70b"), system, gpu, 3072, SearchSpace(seq_len=4096), top=5)


@pytest.mark.parametrize("seq_len, dp, mb, want", [
    (4096, 384, 1, 1152),  # 2^22 / 4096 = 1024 sequences; 1024 / 384 = 2.67 -> 3 x 384 = 1152
    (4096, 128, 1, 1024),  # 1024 / 128 = 8 exactly: the old fixed batch
    (4096, 384, 2, 768),  # unit 768: 1024 / 768 = 1.33 -> 1 x 768
    (4096, 384, 4, 1536),  # unit 1536: 1024 / 1536 = 0.67 -> 1 (at least one micro-batch per rank)
    (4096, 1536, 1, 1536),  # dp past 1024 sequences: one sequence per rank, 1536 x 4096 = 6.3M tokens
    (2048, 16, 2, 2048),  # 2^22 / 2048 = 2048 sequences = 64 x (2 x 16)
    (2048, 112, 1, 2016),  # 2048 / 112 = 18.29 -> 18 x 112 = 2016
    (8192, 3, 1, 513),  # 2^22 / 8192 = 512 sequences; 512 / 3 = 170.67 -> 171 x 3 = 513
    (3000, 7, 1, 1400),  # 2^22 / 3000 = 1398.1 sequences; / 7 = 199.7 -> 200 x 7 = 1400
])
def test_default_global_batch_by_hand(seq_len, dp, mb, want):
    got = default_global_batch(seq_len, dp, mb)
    assert got == want and isinstance(got, int)


def test_default_global_batch_on_arrays_is_the_scalar_rule():
    dp = np.array([[128.0], [384.0], [1536.0]])
    mb = np.array([[1, 2, 4]])
    got = default_global_batch(4096, dp, mb)
    assert got.shape == (3, 3)
    assert got.tolist() == [[default_global_batch(4096, int(d), int(m)) for m in (1, 2, 4)] for d in (128, 384, 1536)]
    assert got.tolist() == [[1024, 1024, 1024], [1152, 768, 1536], [1536, 3072, 6144]]  # by hand as above


@settings(max_examples=300, deadline=None)
@given(seq_len=st.integers(1, 2**17), dp=st.integers(1, 10**5), mb=st.integers(1, 64))
def test_default_global_batch_is_the_nearest_multiple(seq_len, dp, mb):
    # a whole number (>= 1) of micro-batches per rank, and no other such multiple lies nearer 2^22 tokens
    unit = mb * dp
    batch = default_global_batch(seq_len, dp, mb)
    k, rest = divmod(batch, unit)
    assert rest == 0 and k >= 1
    target = 2**22 / seq_len
    for other in (k - 1, k + 1):
        if other >= 1:
            assert abs(k * unit - target) <= abs(other * unit - target) + 1e-9 * target


def test_llama3_70b_on_3072_gpus_picks_no_pipeline(llama70b_default):
    # the issue: with one fixed 1024-sequence batch, tp 8 pp 1 (dp 384) could not split it (1024 % 384 != 0),
    # so the search fell to pp 3 (dp 128) and its bubble at 30% MFU. With a batch per dp, pp 1 wins.
    best = llama70b_default.best[0]
    assert best.plan.pp == 1
    assert llama70b_default.default_batch and llama70b_default.global_batch == best.plan.global_batch
    dp, mb = best.plan.dp, best.plan.micro_batch
    assert best.plan.global_batch == default_global_batch(4096, dp, mb)
    assert best.plan.global_batch % (mb * dp) == 0
    # ranked by time per token: step time / (batch x 4096) ascending down the list
    per_token = [r.step.step_time_s / r.step.tokens_per_step for r in llama70b_default.best]
    assert per_token == sorted(per_token)
    assert llama70b_default.notes[0].startswith(f"global batch {best.plan.global_batch:,} sequences")


def test_llama3_70b_tp8_gets_the_1152_sequence_batch(h100):
    # tp 8 (one NVLink domain): dp = 3072 / 8 = 384 at pp 1; 1024 sequences round to 3 x 384 = 1152
    system, gpu = h100
    model = load_model("llama-3-70b")
    result = search_plans(model, system, gpu, 3072, SearchSpace(seq_len=4096, tp=[8]), top=3)
    best = result.best[0]
    assert (best.plan.tp, best.plan.pp, best.plan.dp, best.plan.global_batch) == (8, 1, 384, 1152)
    assert best.step.tokens_per_step == 1152 * 4096  # 4,718,592 tokens
    assert best.step.step_time_s == pytest.approx(estimate_step_time(model, system, best.plan, gpu).step_time_s, rel=1e-9)
    assert result.notes[0] == ("global batch 1,152 sequences (4.72M tokens): the multiple of dp x micro-batch "
                               "nearest 2^22 = 4.19M tokens (set --global-batch to fix it)")
    # every plan offered has a micro-batch dividing dp 384's share, 1152 / 384 = 3
    assert all(r.plan.micro_batch in (1, 3) and r.plan.global_batch == 1152 for r in result.best if r.plan.dp == 384)
    assert result.rejected[DEFAULT_BATCH_REASON] > 0


def test_a_given_batch_brings_the_old_plan_back(h100):
    # --global-batch 1024: one batch for every plan, ranked by step time: tp 8 pp 3 dp 128 (1024 = 8 x 128)
    system, gpu = h100
    result = search_plans(load_model("llama-3-70b"), system, gpu, 3072, SearchSpace(seq_len=4096, global_batch=1024))
    best = result.best[0]
    assert (best.plan.tp, best.plan.pp, best.plan.dp, best.plan.global_batch) == (8, 3, 128, 1024)
    assert not result.default_batch and result.global_batch == 1024
    assert all(r.plan.global_batch == 1024 for r in result.best)
    steps = [r.step.step_time_s for r in result.best]
    assert steps == sorted(steps)
    assert DEFAULT_BATCH_REASON not in result.rejected and OVERSIZED_BATCH_REASON not in result.rejected
    assert not any("global batch" in n for n in result.notes)
    assert all("% step time" in line for line in result.why_others_lose if "+" in line)


def test_a_dp_past_the_batch_cap_is_not_offered(h100):
    # gpt3-125m (12 heads: tp 1, 2 or 4) on 8,192 GPUs at seq 2048, pp 1: dp 8,192 / 4,096 / 2,048 ranks
    # need at least 2^24 / 2^23 / 2^22 tokens; the cap is 2 x 2^22 = 2^23, so dp 8,192 (tp 1) is not offered
    assert MAX_DEFAULT_BATCH_TOKENS == 2**23
    assert OVERSIZED_BATCH_REASON.startswith("dp needs a default global batch over 2^23 tokens")
    system, gpu = h100
    space = SearchSpace(seq_len=2048, tp=[1, 2, 4], pp=[1], cp=[1], vpp=[1], micro_batch=[1])
    result = search_plans(load_model("gpt3-125m"), system, gpu, 8192, space, top=5)
    # recompute (3) x sharding (4) x sequence parallelism (2) = 24 grid points have tp 1; the batch rule is
    # checked before "sequence parallelism needs tp > 1", so it claims all 24
    assert result.rejected[OVERSIZED_BATCH_REASON] == 3 * 4 * 2
    assert {r.plan.dp for r in result.best} <= {4096, 2048}
    assert all(r.plan.global_batch * 2048 <= MAX_DEFAULT_BATCH_TOKENS for r in result.best)


def test_api_and_cli_agree_on_the_batch():
    # the search (CLI, no degrees) and the API's one-plan default (--tp 8 --pp 1) both use
    # default_global_batch: dp 384 -> 1152 sequences
    # --seq-len 4096 given: Llama 3's published recipe (8,192 tokens, catalog.recipes) would set it otherwise
    cli = json.loads(runner.invoke(app, ["train", "llama-3-70b", "--gpus", "3072", "--seq-len", "4096", "--json"]).stdout)
    assert cli["global_batch_sequences"] == cli["best_plan"]["global_batch"]
    assert cli["tokens_per_step"] == cli["global_batch_sequences"] * 4096
    assert cli["global_batch_default"] and cli["global_batch_note"].startswith(
        f"global batch {cli['global_batch_sequences']:,} sequences")
    assert cli["best_plan"]["pp"] == 1
    assert api.train("llama-3-70b", "dgx-h100", 3072, seq_len=4096).to_dict()["best_plan"] == cli["best_plan"]
    one = api.train("llama-3-70b", "dgx-h100", 3072, seq_len=4096, tp=8, pp=1, sharding="zero2").to_dict()
    assert (one["best_plan"]["dp"], one["global_batch_sequences"], one["tokens_per_step"]) == (384, 1152, 1152 * 4096)
    assert one["global_batch_default"] and "1,152 sequences" in one["global_batch_note"]
    given = api.train("llama-3-70b", "dgx-h100", 3072, seq_len=4096, tp=8, pp=1, sharding="zero2",
                      global_batch=1536).to_dict()
    assert given["global_batch_sequences"] == 1536 and not given["global_batch_default"]


def test_train_text_states_the_batch():
    out = runner.invoke(app, ["train", "llama-3-70b", "--gpus", "3072", "--seq-len", "4096", "--tp", "8", "--pp", "1",
                              "--sharding", "zero2"]).stdout
    assert "global batch sequences" in out and "1,152" in out
    assert "note: global batch 1,152 sequences (4.72M tokens): the multiple of dp x micro-batch" in out
    searched = runner.invoke(app, ["train", "llama-3-70b", "--gpus", "3072", "--seq-len", "4096"]).stdout
    assert "global batch per plan: the multiple of dp x micro-batch nearest 2^22 tokens; ranked by time per token" in searched
    assert "batch seqs" in searched and "note: global batch " in searched


def test_bad_global_batch_is_a_one_line_error():
    result = runner.invoke(app, ["train", "gpt3-125m", "--gpus", "8", "--global-batch", "0"])
    assert result.exit_code == 2
    assert "--global-batch" in result.output and "Traceback" not in result.output


def test_validation_rows_state_their_batch(validation_dir):
    # the harness never falls back on the search's default batch: each row's plan has its own (the
    # row's global_batch, or one sequence per GPU: validation_training docstring), whole micro-batches per rank
    import csv

    from gpuplan.interfaces.validation.training import plan_from_row
    from gpuplan.interfaces.row_types import SkipRow

    planned = 0
    for row in csv.DictReader(open(validation_dir / "training.csv", encoding="utf-8")):
        try:
            plan, _ = plan_from_row(row)
        except SkipRow:
            continue
        planned += 1
        assert plan.global_batch is not None and plan.global_batch % (plan.micro_batch * plan.dp) == 0, row["id"]
    assert planned > 200
