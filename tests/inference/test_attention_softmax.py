"""The softmax-exponential bound of the serving attention core (workloads.inference.cost.attention_softmax)
against hand derivations: where it binds (an fp8 core on Blackwell) and where it does not (16-bit
cores at head_dim 128 on Hopper)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan import knobs
from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.workloads.inference.cost.attention_softmax import attention_exp_per_s, softmax_bound_pair_flops
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.operators import step_time_model

#: FlashAttention-4 on B200: 1605 TFLOP/s BF16 forward at head_dim 128, 4 x 128 FLOPs per (pair, head),
#: 148 SMs -> 1605e12 / 512 / 148 = 2.1181e10 exponentials per SM per second
FA4_EXP_PER_SM_S = 1605e12 / 512 / 148


def _dep(model, system, **kw):
    cat = load_catalog()
    s = cat.system(system)
    return Deployment(load_model(model), cat.gpu(s.gpu), s, **kw)


def test_default_exponential_rate_per_sm_and_per_gpu():
    assert FA4_EXP_PER_SM_S == pytest.approx(2.1181e10, rel=1e-4)
    assert knobs.REGISTRY["efficiency.attention_exp_per_sm_s"].default == pytest.approx(FA4_EXP_PER_SM_S)
    cat = load_catalog()
    # B200: 148 SMs (catalog) -> 148 x 2.1181e10 = 3.135e12 exponentials/s (the FA4 measurement itself)
    assert attention_exp_per_s(cat.gpu("b200")) == pytest.approx(3.135e12, rel=1e-3)
    # H100 SXM: 132 SMs -> 2.796e12
    assert attention_exp_per_s(cat.gpu("h100-sxm5-80gb")) == pytest.approx(2.796e12, rel=1e-3)


def test_fp8_core_on_blackwell_is_exponential_bound():
    # Llama-3-70B (64 query heads, head_dim 128) at TP1 on B200 with an fp8 cache: the core runs fp8 at
    # 4500 x 0.71 x 0.8104 = 2589 TFLOP/s (test_moe_serving). Per pair: FLOPs 64 x 2 x (128 + 128) = 32,768;
    # exponentials 64 -> FLOP-equivalent 64 x 2589e12 / 3.135e12 = 52,855 > 32,768: the exponentials bind.
    dep = _dep("llama-3-70b", "aws-p6-b200", tp=1, weight_dtype="nvfp4", kv_dtype="fp8")
    model = step_time_model(dep, table_tokens=4)
    assert model.attention_flops_per_s == pytest.approx(2589e12, rel=1e-3)
    assert model.prefill_pair_flops == pytest.approx(52_855, rel=2e-3)
    assert model.decode_pair_flops == pytest.approx(52_855, rel=2e-3)


def test_bf16_core_on_hopper_stays_flop_bound():
    # Llama-3-8B (32 heads, head_dim 128) on H100 with a bf16 cache: 989.4 x 0.66 = 653.0 TFLOP/s;
    # FLOP-equivalent of the exponentials 32 x 653.0e12 / 2.796e12 = 7,474 < FLOPs 32 x 512 = 16,384.
    dep = _dep("llama-3-8b", "dgx-h100", tp=1, weight_dtype="bf16", kv_dtype="bf16")
    assert step_time_model(dep, table_tokens=4).prefill_pair_flops == pytest.approx(16_384)


def test_bound_scales_with_the_knob():
    # halving the exponential rate doubles the FLOP-equivalent where it binds (52,855 -> 105,710)
    dep = _dep("llama-3-70b", "aws-p6-b200", tp=1, weight_dtype="nvfp4", kv_dtype="fp8")
    with knobs.overridden({"efficiency.attention_exp_per_sm_s": FA4_EXP_PER_SM_S / 2}):
        assert step_time_model(dep, table_tokens=4).prefill_pair_flops == pytest.approx(105_710, rel=2e-3)


@settings(max_examples=200, deadline=None)
@given(pair_flops=st.floats(1.0, 1e7), heads=st.integers(0, 256), rate=st.floats(1e12, 1e16),
       exp_rate=st.floats(1e11, 1e14))
def test_bound_never_below_the_flops_and_monotone_in_heads(pair_flops, heads, rate, exp_rate):
    bound = softmax_bound_pair_flops(pair_flops, heads, rate, exp_rate)
    assert bound >= pair_flops
    assert softmax_bound_pair_flops(pair_flops, heads + 1, rate, exp_rate) >= bound
    # the time it gives is max(FLOPs / F, exps / X) for one pair
    assert bound / rate == pytest.approx(max(pair_flops / rate, heads / exp_rate), rel=1e-12)
