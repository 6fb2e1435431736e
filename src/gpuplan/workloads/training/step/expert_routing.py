"""Node-limited expert routing: how many scale-up domains one token's routed copies reach.

DeepSeek-V3 (arXiv 2412.19437 sec. 2.1.2, "Node-Limited Routing") sends each token to at most M
nodes: the routed experts form G groups of consecutive experts (HF config `n_group`, 8), the router
keeps the `topk_group` = s groups (4) with the highest affinity sums and takes the token's top_k
experts inside them (modeling_deepseek.py MoEGate, `noaux_tc`). With the experts laid out
contiguously over the EP ranks (Megatron-core / DeepEP: rank r holds experts r E/ep .. (r+1) E/ep - 1)
and n = ep / ep_d scale-up domains, a group covers n / G domains (G <= n) or a domain holds G / n
groups (G > n). Under balanced routing (the force-balanced / benchmark routers, and the uniform
assumption of `step.expert`), per token:

    reachable domains     M = s n / G                               (G <= n: DeepSeek-V3, EP 64 on 8 nodes: 4)
                          M = n (1 - prod_{i<s} (G - g - i)/(G - i)) (G > n, g = G / n: the domains s of
                                                                     the G groups cover, drawn without
                                                                     replacement)
    distinct domains hit  D = M (1 - (1 - 1/M)^k)                   (k copies, uniform over the M)
    remote domains        D (n - 1) / n                             (each hit domain is the sender's own
                                                                     with probability 1 / n)

Without a limit (s = G, or no groups) M = n and the remote count is (n - 1)(1 - (1 - 1/n)^k), the
unlimited formula of `step.expert.remote_domains_per_token`. Only the one-copy-per-domain (DeepEP /
HybridEP) network bytes depend on it: a per-copy (NCCL) all-to-all sends every copy that leaves the
domain, whose share stays (n - 1) / n.

Round-robin routing (`MoeSpec.round_robin_routing`: NeMo AutoModel's `FakeBalancedGate`, every rank
sending its token i to experts (i k + j) mod E, j < k) is not random: a token's k experts are
consecutive, so they lie in as few domains as a run of k experts can. With c = E / n experts per
domain (E / ep per rank x ep_d ranks) and the runs starting at s = i k mod E, the multiples of
g = gcd(E, k), each start equally often:

    distinct domains hit  D = mean over s of min(n, 1 + floor((s + k - 1) / c) - floor(s / c))
    remote domains        D (n - 1) / n                             (the destinations do not depend
                                                                     on the sending rank)

(DeepSeek-V3 under that gate, k 8, E 256, EP 64 on 8 nodes: c = 32 is a multiple of k, every run stays
in one node, D = 1 against 4.6 under uniform routing.)
"""

from __future__ import annotations

from math import gcd

import numpy as np


def reachable_domains(domains, groups: int | None = None, groups_per_token: int | None = None):
    """M, the expected scale-up domains a token's experts may lie in (module docstring): n without a
    routing limit; s n / G where a group spans n / G domains (G <= n); the expected domains s of G
    groups cover where a domain holds g = G / n groups (G > n)."""
    n = np.asarray(domains, dtype=np.float64)
    if groups is None or groups_per_token is None or groups_per_token >= groups:
        return n
    big_g, s = float(groups), int(groups_per_token)
    spans = np.minimum(n, s * n / big_g)
    per_domain = big_g / n
    missed = np.ones_like(n)
    for i in range(s):  # probability that none of the s groups drawn lies in a given domain
        missed = missed * np.clip((big_g - per_domain - i) / (big_g - i), 0.0, 1.0)
    return np.where(n >= big_g, spans, n * (1.0 - missed))


def distinct_domains_hit(reachable, top_k):
    """D = M (1 - (1 - 1/M)^k): expected distinct domains k uniform copies over M domains reach."""
    m = np.maximum(np.asarray(reachable, dtype=np.float64), 1.0)
    return m * (1.0 - (1.0 - 1.0 / m) ** float(top_k))


def round_robin_domains_hit(num_experts: int, top_k: int, domains):
    """D, the mean distinct domains of a run of k consecutive experts (i k + j) mod E over the n
    domains of c = E / n experts each, averaged over the run starts s = multiples of gcd(E, k)
    (module docstring); at most n. Exact: the run's unwrapped domain indices are consecutive, so
    they are distinct modulo n while they number n or fewer."""
    n = np.asarray(domains, dtype=np.float64)
    per_domain = float(num_experts) / n
    starts = np.arange(0, num_experts, gcd(num_experts, top_k), dtype=np.float64)
    c = per_domain[..., None]
    # the run covers the consecutive domain indices floor(s / c) .. floor((s + k - 1) / c) (unwrapped):
    # distinct modulo n while there are at most n of them
    spanned = 1.0 + np.floor((starts + top_k - 1) / c) - np.floor(starts / c)
    return np.minimum(n[..., None], spanned).mean(axis=-1)


__all__ = ["distinct_domains_hit", "reachable_domains", "round_robin_domains_hit"]
