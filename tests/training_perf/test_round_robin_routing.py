"""Round-robin expert routing (NeMo AutoModel's FakeBalancedGate: token i -> experts (i k + j) mod E, j < k):
how many scale-up domains a token's copies reach (workloads.training.step.expert_routing
.round_robin_domains_hit), the network bytes it leaves, and the row rule that reads it from the notes
(interfaces.validation.router_row). Expected values enumerated by hand in the comments."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.interfaces.validation.router_row import model_with_stated_router
from gpuplan.models import load_model
from gpuplan.workloads.training.step import expert
from gpuplan.workloads.training.step.expert_routing import round_robin_domains_hit


@pytest.mark.parametrize(("experts", "top_k", "domains", "expected"), [
    # DeepSeek-V3 (E 256, k 8), EP 64 on 8 nodes: 32 experts per node, runs start at multiples of 8 -> 1 node
    (256, 8, 8, 1.0),
    # the same over 64 one-GPU domains of 4 experts: an aligned run of 8 covers exactly 2 of them
    (256, 8, 64, 2.0),
    # Kimi-K2 (E 384, k 8), EP 32 on 4 nodes: 96 experts per node, a multiple of 8 -> 1
    (384, 8, 4, 1.0),
    # E 16, k 2, 4 domains of 4: runs start at even experts (gcd 2) and never cross a boundary -> 1
    (16, 2, 4, 1.0),
    # E 16, k 3, 4 domains of 4: starts 0..15 (gcd 1); a run crosses where s mod 4 is 2 or 3 -> mean 1.5
    (16, 3, 4, 1.5),
    # E 6, k 4, 3 domains of 2: starts 0, 2, 4 -> {0,1}, {1,2}, {2,0} (wraps) -> 2
    (6, 4, 3, 2.0),
    # k = E: every domain
    (8, 8, 4, 4.0),
    # one domain
    (256, 8, 1, 1.0),
])
def test_domains_hit_by_hand(experts, top_k, domains, expected):
    assert float(round_robin_domains_hit(experts, top_k, domains)) == pytest.approx(expected, rel=1e-15)


def test_domains_hit_is_vectorised_over_plans():
    assert round_robin_domains_hit(256, 8, np.array([1, 8, 64])).tolist() == [1.0, 1.0, 2.0]


@given(experts_exp=st.integers(3, 9), top_k=st.integers(1, 16), domains_exp=st.integers(0, 6))
def test_domains_hit_bounds(experts_exp, top_k, domains_exp):
    experts, domains = 2 ** experts_exp, 2 ** min(domains_exp, experts_exp)
    k = min(top_k, experts)
    d = float(round_robin_domains_hit(experts, k, domains))
    per_domain = experts / domains
    # at least one domain, at most every domain, and no more than a run of k can span
    assert 1.0 <= d <= min(domains, np.ceil(k / per_domain) + 1) + 1e-12


def test_network_bytes_of_deepseek_v3_under_the_fake_gate():
    # DeepSeek-V3, 4096 tokens per rank, h 7168, bf16, EP 64 over 8 nodes, one copy per node (DeepEP):
    # uniform routing reaches 7 (1 - (7/8)^8) = 4.594 other nodes per token, round-robin 1 x 7/8
    t, h, ep, ep_d = 4096, 7168, 64, 8
    uniform = float(expert.network_bytes(t, 8, h, ep, ep_d, dedup=1.0))
    robin = float(expert.network_bytes(t, 8, h, ep, ep_d, dedup=1.0, round_robin_experts=256))
    assert uniform == pytest.approx(t * h * 2 * 7 * (1 - (7 / 8) ** 8), rel=1e-12)
    assert robin == pytest.approx(t * h * 2 * 7 / 8, rel=1e-12)
    # NCCL's per-copy all-to-all sends every copy that leaves the node either way: 7/8 of t k h b
    per_copy = t * 8 * h * 2 * 7 / 8
    assert float(expert.network_bytes(t, 8, h, ep, ep_d, dedup=0.0, round_robin_experts=256)) == pytest.approx(per_copy)


ROW = {"notes": "NeMo AutoModel (PyTorch FSDP2 backend, TE kernels, DeepEP dispatch, fake balanced gate, mock data)"}


def test_row_rule_reads_the_fake_gate():
    v3 = load_model("deepseek-ai--DeepSeek-V3")
    assert model_with_stated_router(ROW, v3).moe.round_robin_routing
    assert not model_with_stated_router({"notes": "force-balanced router"}, v3).moe.round_robin_routing
    dense = load_model("meta-llama--Llama-2-7b-hf")
    assert model_with_stated_router(ROW, dense) is dense


def test_learned_router_dumps_as_before():
    # models written before the field existed dump (and hash) unchanged; the flag is kept where set
    moe = load_model("deepseek-ai--DeepSeek-V3").moe
    assert "round_robin_routing" not in moe.model_dump()
    assert moe.model_copy(update={"round_robin_routing": True}).model_dump()["round_robin_routing"] is True
