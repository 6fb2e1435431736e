"""Published layouts of the bundled models are accepted and costed (issue "Plans a practitioner would
sign", partial constraints), and the search given part of Meta's 405B layout lands on it or on one it
shows to be faster."""

from __future__ import annotations

import pytest

from gpuplan import api

# (model, system, GPUs, the published degrees, extra inputs) -- each from its source:
PUBLISHED = [
    # Narayanan et al. 2021 (Megatron-LM, SC21) Table 1: GPT-3 175B on 1,024 A100, t=8, p=16, batch 1536
    ("gpt3-175b", "dgx-a100-80gb", 1024, dict(tp=8, pp=16, dp=8), {}),
    # DeepSeek-V3 technical report sec. 3.2: 2,048 H800, 16-way PP, 64-way EP over 8 nodes, ZeRO-1 DP, no TP
    ("deepseek-v3", "hgx-h800", 2048, dict(tp=1, pp=16, ep=64, dp=128), {}),
    # Llama 3 report (Dubey et al. 2024) Table 4: 16,384 H100, TP 8, CP 1, PP 16, DP 128, 8k sequences
    ("llama-3.1-405b", "dgx-h100", 16384, dict(tp=8, pp=16, cp=1, dp=128), dict(seq_len=8192)),
]


@pytest.mark.parametrize("model, system, gpus, degrees, extra", PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_published_layout_is_accepted_and_costed(model, system, gpus, degrees, extra):
    d = api.train(model, system, gpus, **degrees, **extra).to_dict()
    assert {k: d["best_plan"][k] for k in degrees} == degrees  # the given axes are kept
    # tp x pp x cp x dp = the GPU count (ep lives inside dp x tp for the experts)
    p = d["best_plan"]
    assert p["tp"] * p["pp"] * p["cp"] * p["dp"] == gpus
    assert 0 < d["mfu_pct"] < 100 and d["days"] > 0 and d["gpu_hours"] > 0
    assert d["cost_usd"] is None or d["cost_usd"] > 0  # the catalog has no rental price for H800


def test_405b_search_lands_on_metas_layout_or_shows_a_faster_one():
    # `train llama-3.1-405b --system dgx-h100 --gpus 16384 --tp 8 --pp 16 --seq-len 8192`: the rest searched
    searched = api.train("llama-3.1-405b", "dgx-h100", 16384, tp=8, pp=16, seq_len=8192).to_dict()
    meta = api.train("llama-3.1-405b", "dgx-h100", 16384, tp=8, pp=16, cp=1, dp=128, seq_len=8192).to_dict()
    best = searched["best_plan"]
    assert (best["tp"], best["pp"]) == (8, 16)
    assert searched["global_batch_sequences"] == meta["global_batch_sequences"] == 2048  # one batch: step times compare
    if (best["cp"], best["dp"]) != (1, 128):
        # not Meta's layout: it must be faster, and the search says by how much cp=1 loses
        assert searched["step_time_s"] < meta["step_time_s"]
        lines = [w for w in searched["search"]["why_others_lose"] if w.startswith("cp=1:")]
        assert len(lines) == 1
        slower = meta["step_time_s"] / searched["step_time_s"] - 1
        assert f"{100 * slower:+.1f}%" in lines[0]
