"""`gpuplan plan` GPU counts in whole nodes (interfaces/plan.py `_smallest_cluster`, `roundest_between`)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpuplan import api
from gpuplan.cli.main import app
from gpuplan.interfaces.planning.plan import roundest_between

runner = CliRunner()


@pytest.mark.parametrize("lo, hi, want", [
    (256, 512, 384),  # 384 = 3 x 128: the only count in between divisible by 128
    (384, 512, 448),  # 7 x 64
    (256, 384, 320),  # 5 x 64
    (0, 8, 4),
    (4, 8, 6),
    (6, 8, 7),
    (7, 8, None),  # no integer strictly between
    (1000, 1024, 1008),  # 63 x 16; 1016 = 127 x 8 has fewer factors of two
])
def test_roundest_between(lo, hi, want):
    assert roundest_between(lo, hi) == want


def test_roundest_between_is_arithmetic_for_huge_ranges():
    # no loop over the range: a 2^62-wide bracket answers at once with the power of two inside it
    assert roundest_between(0, 2**62) == 2**61


def test_plan_finds_a_whole_node_count_between_powers_of_two():
    # gpt3-125m, 300B tokens at a 1,536-sequence batch (2^9 x 3, so dp = 96 divides it): 64 GPUs take
    # 0.168 days, 96 take 0.112 and 128 take 0.084 (`train`, after the Hopper sustained-GEMM ratio), so
    # a 0.12-day target lies between the ladder's 64 and 128 and 96 meets it
    args = ["plan", "gpt3-125m", "--tokens", "300B", "--days", "0.12", "--global-batch", "1536", "--json"]
    d = json.loads(runner.invoke(app, args).stdout)
    gpus, days = d["gpus"], d["days"]
    tried = [int(x.replace(",", "")) for x in d["workload_details"]["gpu_counts_tried"].split(", ")]
    assert gpus % 8 == 0 and 64 < gpus < 128 and days <= 0.12
    assert tried[:3] == [64, 128, 96] and gpus in tried  # 96 = roundest_between(8, 16) nodes x 8
    # every smaller count the search tried misses the target (the answer is the smallest tried that meets it)
    for n in sorted(t for t in tried if t < gpus):
        assert api.train("gpt3-125m", "dgx-h100", n, tokens="300B", global_batch=1536).to_dict()["days"] > 0.12


def test_plan_keeps_the_power_of_two_when_no_count_between_is_faster():
    # a given 2,048-sequence batch has no factor 3 (nor 7, 13): 96, 104 and 112 GPUs cannot use pure dp and
    # are slower than 64, so no count between 64 and 128 meets 0.1 days and the answer stays 128
    args = ["plan", "gpt3-125m", "--tokens", "300B", "--days", "0.1", "--global-batch", "2048", "--json"]
    d = json.loads(runner.invoke(app, args).stdout)
    assert d["gpus"] == 128 and d["days"] <= 0.1
    assert d["workload_details"]["global_batch_sequences"] == 2048 and not d["workload_details"]["global_batch_default"]


def test_plan_with_the_default_batch_uses_a_count_between_powers_of_two():
    # no --global-batch: each dp gets its own batch, the multiple of dp nearest 2^22 / 2048 = 2048
    # sequences. 112 GPUs = 14 nodes run pure dp = 112 on 2048 / 112 = 18.3 -> 18 x 112 = 2016 sequences
    # (4,128,768 tokens) and meet 0.1 days, which the fixed 2,048-sequence batch could not (test above)
    d = json.loads(runner.invoke(app, ["plan", "gpt3-125m", "--tokens", "300B", "--days", "0.1", "--json"]).stdout)
    details = d["workload_details"]
    assert d["gpus"] == 112 and d["days"] <= 0.1
    assert details["plan"].startswith("tp=1 pp=1 dp=112 ")
    assert details["global_batch_sequences"] == 2016 and details["tokens_per_step"] == 2016 * 2048
    assert details["global_batch_default"]
    assert any(n.startswith("global batch 2,016 sequences (4.13M tokens): the multiple of dp x micro-batch") for n in d["notes"])


def test_plan_with_gpus_given_uses_them():
    d = json.loads(runner.invoke(app, ["plan", "gpt3-125m", "--tokens", "1B", "--gpus", "24", "--json"]).stdout)
    assert d["gpus"] == 24 and "gpu_counts_tried" not in d["workload_details"]
