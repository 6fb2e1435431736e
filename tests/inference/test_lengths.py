"""Request-length distributions (workloads/inference/lengths.py) and the catalog datasets
(catalog/data/datasets.toml): hand-derived means, truncation, seeding, CSV pairs, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gpuplan import knobs
from gpuplan.catalog.datasets import find_dataset_in_text, get_dataset, requests_in_text
from gpuplan.errors import InputError
from gpuplan.workloads.inference.sim.lengths import (
    LengthSpec, dataset_lengths, length_stats, load_pairs, parse_length_spec, request_lengths,
)


def test_parse_specs():
    assert parse_length_spec("512") == LengthSpec("fixed", 512.0)
    assert parse_length_spec("fixed:64") == LengthSpec("fixed", 64.0)
    assert parse_length_spec("uniform:100:300") == LengthSpec("uniform", 100.0, 300.0)
    assert parse_length_spec("lognormal:512:1:max=2048") == LengthSpec("lognormal", 512.0, 1.0, 2048)
    # a zero spread is the fixed length itself
    assert parse_length_spec("normal:200:0") == LengthSpec("fixed", 200.0)


def test_uniform_100_300_has_mean_200():
    # integers uniform on [100, 300]: mean (100 + 300) / 2 = 200; std sqrt((201^2 - 1) / 12) = 58.0,
    # so the mean of 200,000 draws is within 0.6 (4.6 standard errors of 0.13) of 200
    spec = parse_length_spec("uniform:100:300")
    assert spec.mean == 200.0
    x = spec.sample(np.random.default_rng(1), 200_000)
    assert x.min() == 100 and x.max() == 300
    assert abs(x.mean() - 200.0) < 0.6
    st_ = length_stats(x)
    # p50 of the uniform is its midpoint 200, p90 = 100 + 0.9 x 200 = 280, p99 = 298
    assert abs(st_.p50 - 200) <= 1 and abs(st_.p90 - 280) <= 1 and abs(st_.p99 - 298) <= 1


def test_lognormal_mean_and_cv():
    # lognormal with mean 512 and CV 1: sigma^2 = ln 2, mu = ln 512 - ln 2 / 2; its median is
    # 512 / sqrt(2) = 362.0. 400,000 draws: the mean's standard error is 512 / 632 = 0.81
    x = parse_length_spec("lognormal:512:1").sample(np.random.default_rng(2), 400_000)
    assert abs(x.mean() - 512) < 4.0
    assert abs(np.median(x) - 512 / np.sqrt(2)) < 2.0
    assert abs(x.std() / x.mean() - 1.0) < 0.03


def test_normal_is_truncated_at_one_token():
    x = parse_length_spec("normal:2:5").sample(np.random.default_rng(3), 50_000)
    assert x.min() >= 1
    # redrawing below 0.5 keeps only the part of N(2, 5) above 0.5: its mean is
    # 2 + 5 phi(z) / (1 - Phi(z)) at z = -0.3: 2 + 5 x 0.3814 / 0.6179 = 5.09
    assert abs(x.mean() - 5.09) < 0.1


def test_cap_and_fixed_draws_nothing():
    x = parse_length_spec("lognormal:1000:2:max=1500").sample(np.random.default_rng(4), 10_000)
    assert x.max() == 1500
    rng = np.random.default_rng(5)
    before = rng.bit_generator.state
    assert (parse_length_spec("77").sample(rng, 10) == 77).all()
    assert rng.bit_generator.state == before  # fixed lengths leave the seeded stream untouched


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["uniform", "normal", "lognormal"]), a=st.integers(1, 5000), b=st.floats(0.01, 3.0),
       cap=st.one_of(st.none(), st.integers(1, 8000)), seed=st.integers(0, 2**31))
def test_samples_are_whole_tokens_within_bounds(kind, a, b, cap, seed):
    text = f"uniform:{a}:{a + int(b * 100)}" if kind == "uniform" else f"{kind}:{a}:{b * (a if kind == 'normal' else 1)}"
    if cap is not None:
        text += f":max={cap}"
    x = parse_length_spec(text).sample(np.random.default_rng(seed), 500)
    assert x.dtype == np.int64 and x.min() >= 1
    if cap is not None:
        assert x.max() <= cap
    # same seed, same draws
    assert (parse_length_spec(text).sample(np.random.default_rng(seed), 500) == x).all()


@pytest.mark.parametrize("bad", ["", "weird:3", "uniform:300:100", "fixed:0", "fixed:2.5", "lognormal:-5:1",
                                 "normal:abc:1", "normal:10:-1", "uniform:1", "lognormal:10:1:max=0", "nan", "inf"])
def test_bad_specs_name_the_field(bad):
    with pytest.raises(InputError) as exc:
        parse_length_spec(bad, "input_dist")
    assert str(exc.value).startswith("input_dist:") and "\n" not in str(exc.value)


def test_csv_pairs(tmp_path):
    f = tmp_path / "pairs.csv"
    f.write_text("input_len,output_len\n100,10\n300,30\n", encoding="utf-8")
    lens = request_lengths(1, 1, lengths=str(f))
    ins, outs = lens.sample(np.random.default_rng(6), 1000)
    # every request is one of the file's rows, input and output together
    assert set(zip(ins.tolist(), outs.tolist())) == {(100, 10), (300, 30)}
    for text, msg in (("input,output\n5,x\n", "non-numeric"), ("a,b\n1,2\n", "header"), ("input,output\n0,3\n", ">= 1")):
        bad = tmp_path / "bad.csv"
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(InputError, match=msg):
            load_pairs(bad)
    with pytest.raises(InputError, match="not found"):
        load_pairs(tmp_path / "missing.csv")
    with pytest.raises(InputError, match="not both"):
        request_lengths(1, 1, input_dist="10", lengths=str(f))


def test_dataset_means_are_the_cited_figures():
    # mlcommons/inference language/llama2-70b/README.md "Tokens per sample: 294.45"; 24,576 samples
    orca = get_dataset("openorca-mlperf")
    assert parse_length_spec(orca.output).mean == 294 and orca.requests == 24576
    assert "294.45" in orca.output_source
    # vllm-project/vllm PR #18566: 229,711 input and 203,068 output tokens over 1,000 ShareGPT requests
    share = get_dataset("sharegpt")
    assert (parse_length_spec(share.input).mean, parse_length_spec(share.output).mean) == (230, 203)
    # mean-only sides are drawn lognormal at the cited mean with the knob's CV, capped at the sampler's bounds
    lens = dataset_lengths(share)
    assert lens.input == LengthSpec("lognormal", 230.0, knobs.value("serving.lengths.mean_only_cv"), 1024)
    with knobs.overridden({"serving.lengths.mean_only_cv": 0.0}):
        assert dataset_lengths(share).input.kind == "fixed"
    with pytest.raises(InputError, match="known dataset"):
        get_dataset("no-such-set")


def test_datasets_found_in_row_text():
    assert find_dataset_in_text("benchmark_throughput on 200 ShareGPT prompts").id == "sharegpt-vllm"
    assert find_dataset_in_text("OpenOrca 24,576 samples, input/output < 1024").id == "openorca-mlperf"
    assert find_dataset_in_text("CNN-DailyMail inputs") is None
    assert find_dataset_in_text("sharegptx") is None  # whole words only
    share, orca = get_dataset("sharegpt"), get_dataset("openorca")
    assert requests_in_text("benchmark_throughput on 200 ShareGPT prompts", share) == 200
    assert requests_in_text("ShareGPT 200 prompts (variable lengths)", share) == 200
    assert requests_in_text("OpenOrca 24,576 samples", orca) == 24576
    assert requests_in_text("ShareGPT prompts", share) is None


@pytest.mark.parametrize("spec, side_limit, message", [
    # validation_rules: MAX_INPUT_TOKENS = 2^20 = 1,048,576 prompt tokens, MAX_OUTPUT_TOKENS = 32,768
    ("9223372036854775807", 2**20, "length must be <= 1,048,576 tokens"),
    ("uniform:1:2000000", 2**20, "HI must be <= 1,048,576 tokens"),
    ("lognormal:40000:1", 32_768, "mean must be <= 32,768 tokens"),
    ("100:max=40000", 32_768, "max must be <= 32,768 tokens"),
    ("lognormal:100:1e300", 2**20, "lognormal cv must be <= 100"),
])
def test_lengths_beyond_the_simulator_bounds_are_refused(spec, side_limit, message):
    with pytest.raises(InputError, match=message):
        parse_length_spec(spec, "input_dist", side_limit)


def test_draws_are_capped_at_the_side_limit():
    # normal:100:1e300: half the draws are astronomically large; each is capped at the limit before
    # the integer cast (no int64 wrap-around to negative lengths), the rest redrawn until >= 1 token
    out = parse_length_spec("normal:100:1e300", "output_dist", 32_768).sample(np.random.default_rng(0), 1000)
    assert out.min() >= 1 and out.max() == 32_768
