"""KV-cache transfer of disaggregated serving: the bytes one request's prompt KV cache takes from a
prefill instance to a decode instance, and how long that takes over NVLink or the scale-out network.

Bytes (one copy of the prompt's cache, all layers; layers.kv_cache):

    kv_bytes_per_request = kv_cache_bytes_per_token(model, kv_dtype, context = L) x L

e.g. Llama-3-70B in bf16 (GQA, 8 KV heads x 128 x 80 layers x K and V x 2 B = 327,680 B per
token): a 2048-token prompt is 2048 x 327,680 = 671,088,640 B (640 MiB). MLA models move the
latent (DeepSeek-V3: 576 elements per token and layer); sliding-window layers only their window.

Who sends what: the KV is sharded the same way on both sides (GQA heads over the attention-TP
ranks; MLA's latent replicated on every attention-TP rank, Deployment.kv_shard_fraction), and each
rank moves its own shard at once, rank to rank (NIXL / Mooncake transfer engine: one RDMA write per
block of each layer, all ranks in parallel; vLLM NixlConnector, SGLang `--disaggregation-transfer-backend
mooncake|nixl`, NVIDIA Dynamo "Disaggregated serving" docs). The decode group must receive

    bytes_received = attention_tp_decode x kv_shard_fraction_decode x kv_bytes_per_request

(= kv_bytes_per_request for GQA with attention_tp <= kv_heads; attention_tp copies of the latent for
MLA), spread over attention_tp_prefill senders and attention_tp_decode receivers; the busiest GPU
link carries bytes_received / min(attention_tp_prefill, attention_tp_decode).

Time: one point-to-point send of that many bytes, `primitives.collectives.collective_time`
(SEND_RECV: NCCL's alpha + bytes / achievable link rate, Simple-protocol fill included), over

- NVLink (`KvLink.NVLINK`): both instances in one scale-up domain (an NVL72 rack, or a DGX node that
  holds both); the GPU's scale-up link at its achievable fraction;
- the scale-out network (`KvLink.NETWORK`): InfiniBand / RoCE, one NIC share per GPU (the catalog's
  scaleout_gbps_per_gpu at its achievable fraction); with different systems on the two sides the
  slower side sets the time.

Prefix caching (hit rate h, c = prefix_cache.cached_tokens(L) tokens of the prompt already cached):
the transfer carries only the KV the prefill computed, kv_bytes(L) - kv_bytes(c) (for global
attention (L - c) x KV bytes per token); the decode instance holds the cached prefix in its own
prefix cache. Source: vLLM NixlConnector (vllm/distributed/kv_transfer/kv_connector/v1/
nixl_connector.py, `update_state_after_alloc`: the decode side pulls only its "unhashed" blocks, and
a full prefix-cache hit on the decode worker transfers nothing); NVIDIA Dynamo's disaggregated
flow matches the decode worker's local prefix before it asks for a remote prefill. (Mooncake's
store instead moves whole caches through its pool: this model follows vLLM / Dynamo.)

Length distributions: a request's transfer time depends on its prompt. `transfer_stats` evaluates
the transfer at TRANSFER_QUANTILES equally spaced quantiles of the sampled prompt lengths and
returns the mean, the mean square (for the M/G/1 link wait below) and the time at the p90 prompt
(the TTFT's p90 term); fixed lengths give one time for all three (t, t^2, t).

The transfer starts when the prefill ends (vLLM and Dynamo read the finished blocks; Splitwise,
Patel et al. ISCA 2024 sec. 4.3, and Mooncake stream layer by layer and hide part of it: this model
does not, an upper bound). Successive requests of one prefill instance queue on its links: with
per-instance request rate r and transfer time t the link is busy rho = r x t, and a request waits
on average rho t / (2 (1 - rho)) before its own transfer (M/D/1, Pollaczek-Khinchine); rho >= 1 is
a link that cannot keep up. With transfer times that vary (length distributions, E[S], E[S^2]) the
same formula in its M/G/1 form: W = r E[S^2] / (2 (1 - r E[S])) (Kleinrock, Queueing Systems vol. 1,
eq. 5.65), which is rho t / (2 (1 - rho)) for E[S^2] = t^2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np

from gpuplan.errors import Infeasible, InputError
from gpuplan.layers import kv_cache_bytes_per_token
from gpuplan.primitives.collectives import Collective, collective_time
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.specs.dtypes import bytes_per_element


class KvLink(str, Enum):
    """The path the KV cache takes: the scale-up fabric or the scale-out network."""

    NVLINK = "nvlink"
    NETWORK = "network"


@dataclass(frozen=True)
class KvTransfer:
    """One request's KV move: bytes (one copy, and what the busiest GPU link carries), link, seconds."""

    link: KvLink
    kv_per_request_bytes: float
    bytes_per_link: float
    time_s: float


#: prompt-length quantiles a length distribution's transfer is evaluated at (`transfer_stats`)
TRANSFER_QUANTILES = 16


def kv_bytes_per_request(dep: Deployment, input_len: int, cached_tokens: int = 0) -> float:
    """One copy of the KV a prompt's prefill produces, bytes: kv_bytes(L) - kv_bytes(c), with
    kv_bytes(x) = kv_cache_bytes_per_token(context = x) x x and c the prefix-cached tokens (0: the
    whole prompt)."""
    if not isinstance(input_len, (int, np.integer)) or input_len < 1:
        raise InputError(f"input_len: must be an integer >= 1 token, got {input_len!r}", field="input_len")
    if not isinstance(cached_tokens, (int, np.integer)) or not 0 <= cached_tokens < input_len:
        raise InputError(f"cached_tokens: must be an integer in [0, input_len), got {cached_tokens!r}",
                         field="cached_tokens")

    def kv(x: int) -> float:
        return kv_cache_bytes_per_token(dep.model, bytes_per_element(dep.kv_dtype), context_len=int(x)) * int(x) if x else 0.0

    return kv(input_len) - kv(cached_tokens)


def link_bytes(prefill: Deployment, decode: Deployment, input_len: int, cached_tokens: int = 0) -> float:
    """Bytes the busiest GPU link carries for one request (module docstring):
    attention_tp_d x kv_shard_fraction_d x kv_bytes / min(attention_tp_p, attention_tp_d)."""
    received = decode.attention_tp * decode.kv_shard_fraction * kv_bytes_per_request(decode, input_len, cached_tokens)
    return received / min(prefill.attention_tp, decode.attention_tp)


def same_domain_possible(prefill: Deployment, decode: Deployment, gpus: int) -> bool:
    """True when `gpus` GPUs of both pools can sit in one scale-up domain of one system (NVLink path)."""
    return prefill.system.id == decode.system.id and gpus <= prefill.system.scaleup_domain_gpus


def kv_transfer(prefill: Deployment, decode: Deployment, input_len: int, link: KvLink,
                cached_tokens: int = 0) -> KvTransfer:
    """The KV move of one request from `prefill` to `decode` over `link` (module docstring);
    `cached_tokens` of the prompt were a prefix-cache hit and do not move.
    Infeasible when the link does not exist in the catalog (no NICs, or the two sides on different
    systems for NVLink)."""
    link = KvLink(link)
    if prefill.model.name != decode.model.name or prefill.kv_dtype != decode.kv_dtype:
        raise InputError("decode: prefill and decode instances must serve the same model with the same kv_dtype",
                         field="decode")
    size = link_bytes(prefill, decode, input_len, cached_tokens)
    if link is KvLink.NVLINK:
        if prefill.system.id != decode.system.id:
            raise Infeasible(f"kv link: NVLink needs both pools on one system ({prefill.system.id} vs {decode.system.id})")
        if prefill.system.scaleup_domain_gpus < 2:
            raise Infeasible(f"kv link: {prefill.system.id} has no scale-up fabric between GPUs")
        t = collective_time(Collective.SEND_RECV, size, prefill.system, 2, gpu=prefill.gpu).time_s
    else:
        times = []
        for dep in (prefill, decode):
            if dep.system.scaleout_gbps_per_gpu <= 0 or dep.system.nic_kind == "none":
                raise Infeasible(f"kv link: {dep.system.id} has no scale-out NICs in the catalog; "
                                 "its KV cache cannot leave the node")
            times.append(collective_time(Collective.SEND_RECV, size, dep.system, 2, gpu=dep.gpu,
                                         gpus_per_domain=1).time_s)
        t = max(times)
    return KvTransfer(link=link, kv_per_request_bytes=kv_bytes_per_request(decode, input_len, cached_tokens),
                      bytes_per_link=size, time_s=float(t))


@dataclass(frozen=True)
class KvTransferStats:
    """The KV move over a distribution of prompts: mean bytes (one copy), mean seconds, mean square
    seconds^2 (M/G/1 wait) and the seconds of the p90 prompt (module docstring)."""

    link: KvLink
    kv_per_request_bytes: float
    time_s: float
    time_sq_s2: float
    time_p90_s: float


def transfer_stats(prefill: Deployment, decode: Deployment, input_lens: np.ndarray, link: KvLink,
                   prefix_cache=None) -> KvTransferStats:
    """`kv_transfer` over sampled prompt lengths `input_lens` (all equal: exactly that one transfer):
    mean and mean square over TRANSFER_QUANTILES equally spaced quantiles (midpoints), p90 at the
    0.9 quantile; `prefix_cache` (prefix_cache.PrefixCache) removes each prompt's cached tokens."""
    lens = np.asarray(input_lens, dtype=np.int64)

    def one(length: int) -> KvTransfer:
        c = int(prefix_cache.cached_tokens(np.array([length]))[0]) if prefix_cache is not None else 0
        return kv_transfer(prefill, decode, int(length), link, cached_tokens=c)

    if lens.min() == lens.max():
        x = one(int(lens[0]))
        return KvTransferStats(x.link, x.kv_per_request_bytes, x.time_s, x.time_s ** 2, x.time_s)
    qs = (np.arange(TRANSFER_QUANTILES) + 0.5) / TRANSFER_QUANTILES
    pts = [one(int(max(1, round(v)))) for v in np.quantile(lens, qs)]
    times = np.array([p.time_s for p in pts])
    p90 = one(int(max(1, round(float(np.quantile(lens, 0.9))))))
    return KvTransferStats(KvLink(link), float(np.mean([p.kv_per_request_bytes for p in pts])), float(times.mean()),
                           float((times ** 2).mean()), p90.time_s)


def link_wait_s(rate_per_instance: float, transfer_s: float, transfer_sq_s2: float | None = None) -> float:
    """Mean wait for a busy KV link (M/G/1, Pollaczek-Khinchine): rate E[S^2] / (2 (1 - rho)),
    rho = rate x E[S]; E[S^2] = transfer_s^2 when not given (M/D/1: rho t / (2 (1 - rho)));
    inf when rho >= 1."""
    rho = rate_per_instance * transfer_s
    if rho >= 1.0:
        return math.inf
    sq = transfer_s ** 2 if transfer_sq_s2 is None else transfer_sq_s2
    return rate_per_instance * sq / (2.0 * (1.0 - rho))
