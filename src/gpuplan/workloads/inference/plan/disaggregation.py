"""Disaggregated prefill/decode serving, and the plan that compares it with co-located serving.

A disaggregated deployment has two pools (DistServe, Zhong et al. OSDI 2024; Splitwise, Patel et
al. ISCA 2024; NVIDIA Dynamo "disaggregated serving"; SGLang PD disaggregation; vLLM
disaggregated prefilling): n_p prefill instances and n_d decode instances, each pool with its own
GPU type and layout (tp, ep, attention_dp). A request is prefilled on one prefill instance, its
prompt KV cache moves to one decode instance (kv_transfer.py), which generates every output token
(decode_pool.py). Arrivals are Poisson at `rate` requests/s, split evenly (random routing keeps
each instance's stream Poisson at rate / n).

    TTFT_p90 = p90(prefill queue + prefill) at rate / n_p        (simulator.py, output_len = 1)
             + KV transfer of the p90 prompt + mean wait for the link (M/G/1;
               M/D/1 with fixed lengths)
             + p90(decode admission + first step) at rate / n_d   (decode_pool.py)
    TPOT_p90 = p90 TPOT of a decode instance at rate / n_d

(the sum of the phases' p90s bounds the p90 of the sum from above for these right-skewed delays:
conservative). Co-located serving, for the comparison, is `replicas` instances that each prefill
and decode (simulator.py, chunked prefill) at rate / replicas, p90 TTFT and TPOT from the same
simulation.

Search (DistServe sec. 4, Algorithm 1: per-phase goodput, then replicate to the rate):
1. Every candidate instance layout is simulated as a prefill instance, a decode instance and a
   co-located instance at a ladder of per-instance Poisson rates (LOAD_FRACTIONS of its saturated
   throughput), stopping once the p90 passes twice the objective: a curve rate -> p90 latency
   per role (computed once per layout and role, shared by every pairing).
2. Decode goodput r_d = the largest rate whose p90 TPOT meets the objective (linear interpolation
   between ladder points); n_d = ceil(rate / r_d), or up to DECODE_EXTRA more when their shorter
   admission queue lets the prefill pool shrink. The prefill's TTFT budget is the objective less
   the KV transfer, the link wait and the decode side's p90 first-token delay at rate / n_d;
   r_p = the largest rate meeting it; n_p = ceil(rate / r_p). The P:D ratio is n_p : n_d (with
   `pd_ratio` P:D fixed: the smallest k with k P >= n_p and k D >= n_d). Co-located: r = the
   largest rate meeting both objectives, replicas = ceil(rate / r).
3. Cost = sum over pools of instances x GPUs x $/GPU-hour / (3600 x rate x output_len) x 1e6 per
   million output tokens; options are ranked by it (then GPUs, then TTFT); options with a GPU
   that has no catalog price come after the priced ones, by GPUs. The VERIFY_TOP cheapest
   options of each mode are re-simulated at their actual per-instance rates (`simulated`); one
   whose simulation misses an objective gets one more instance in the pool that misses it (at
   most VERIFY_BUMPS times).

Serving features (the options `serve run` takes; docs/serving.md):
- length distributions (lengths.RequestLengths): every role's simulations draw their requests from
  it (prefill instances the input side with one output token, decode instances both sides: the
  prompt sets the context, the output the steps), the saturation ladders are simulated with it, the
  KV transfer is evaluated over the prompt distribution (kv_transfer.transfer_stats: its p90 prompt
  in the TTFT sum, its mean and mean square in the M/G/1 link wait) and the cost uses the mean output;
- prefix caching (prefix_cache.PrefixCache, hit rate h): the prefill instance computes only the
  uncached (1 - h) of each prompt (its prefix cache held once in its KV budget), the transfer carries
  only the KV it computed, and the decode instance keeps the prefix in its own cache and reserves
  only each request's private blocks (kv_transfer.py and decode_pool.py give the sources);
- speculative decoding (speculative.SpeculativeDecoding): decode and co-located instances run the
  draft and verify k + 1 positions per step (decode_pool.py, simulator.py); the prefill instance
  runs the target's prefill only (the draft's own prefill of the prompt, and the draft's KV that a
  draft model would also have to move, are left out: one MTP layer of DeepSeek-V3's 61 is < 2%;
  a separate draft model a larger share, this model's optimistic side).

KV path (`kv_link` None = automatic): NVLink when both pools are on one system whose scale-up
domain holds all their GPUs (an NVL72 rack; a DGX node holding one tp4 prefill and one tp4 decode
instance), else the scale-out network. Every instance is one pipeline stage (pp = 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum

import numpy as np

from gpuplan.errors import GpuplanError, Infeasible, InputError
from gpuplan.specs import Gpu, ModelSpec, System
from gpuplan.workloads.inference.engines import GENERIC, EngineProfile
from gpuplan.workloads.inference.cost.kv_transfer import KvLink, KvTransferStats, link_wait_s, same_domain_possible, transfer_stats
from gpuplan.workloads.inference.replica import ServingFeatures
from gpuplan.workloads.inference.sim.schedulers import SchedulerConfig
from gpuplan.workloads.inference.plan.token_costs import pools_token_costs, pools_usd_per_million_output_tokens
from gpuplan.workloads.inference.plan.instances import (
    PLAN_SEED, InstanceLayout, RoleCurve, _Instance, _ladder, candidate_layouts,
)

#: options re-simulated at their actual per-instance rates, and the extra instances tried for each
VERIFY_TOP = 4
VERIFY_BUMPS = 4
#: options that carry a latency-throughput curve (`latency_curve`, the --plot lines)
CURVE_OPTIONS = 6
#: a role's ladder stops once its p90 passes this multiple of the objective
CURVE_STOP_FACTOR = 2.0
#: decode instances tried beyond what the TPOT objective needs (to shorten their admission queue)
DECODE_EXTRA = 3
#: prompts drawn to evaluate the KV transfer over a length distribution
TRANSFER_SAMPLES = 4000


def mean_lengths(lengths) -> tuple[float, float]:
    """(mean input, mean output) tokens of a lengths.RequestLengths: the CSV's means for pairs, the
    specs' analytic means otherwise."""
    if lengths.pairs is not None:
        return float(lengths.pairs.inputs.mean()), float(lengths.pairs.outputs.mean())
    return float(lengths.input.mean), float(lengths.output.mean)


class ServingMode(str, Enum):
    COLOCATED = "colocated"
    DISAGGREGATED = "disaggregated"


# ---------------------------------------------------------------------------------------------- options
@dataclass(frozen=True)
class PoolChoice:
    """One pool of an option: `instances` instances of a layout, each offered instance_requests_per_s."""

    role: str  # "prefill", "decode" or "replica" (co-located)
    gpu: str
    tp: int
    ep: int
    attention_dp: int
    instances: int
    gpus: int
    instance_requests_per_s: float
    max_instance_requests_per_s: float  # the instance's goodput at the objectives
    usd_per_gpu_hour: float | None


@dataclass(frozen=True)
class CurvePoint:
    """A point of an option's latency-throughput curve at a multiple of the planned rate."""

    requests_per_s: float
    output_tokens_per_s_per_gpu: float
    ttft_p90_ms: float
    tpot_p90_ms: float


@dataclass(frozen=True)
class ServingOption:
    """One co-located or disaggregated way to serve the rate (None where it cannot)."""

    mode: ServingMode
    layout: str
    pools: tuple[PoolChoice, ...]
    gpus: int | None
    pd_ratio: str | None
    kv_link: str | None
    kv_per_request_bytes: float | None
    kv_transfer_ms: float | None
    kv_link_wait_ms: float | None
    ttft_p90_ms: float | None
    tpot_p90_ms: float | None
    output_tokens_per_s_per_gpu: float | None
    usd_per_million_output_tokens: float | None
    meets_slo: bool
    simulated: bool
    why_not_best: str = ""
    latency_curve: tuple[CurvePoint, ...] = field(default=())
    #: the KV transfer of the p90 prompt (the TTFT sum's term; = kv_transfer_ms with fixed lengths)
    kv_transfer_p90_ms: float | None = None
    #: the cost split between prefill and decode (token_costs.pools_token_costs)
    prefill_time_fraction: float | None = None
    usd_per_request: float | None = None
    usd_per_million_input_tokens: float | None = None
    usd_per_million_output_tokens_decode: float | None = None


@dataclass(frozen=True)
class DisaggregationPlan:
    """`serve plan --disaggregated`: the best option, the best of each mode, every option."""

    rate_requests_per_s: float
    ttft_slo_ms: float
    tpot_slo_ms: float
    input_len: int
    output_len: int
    best: ServingOption
    best_colocated: ServingOption | None
    best_disaggregated: ServingOption | None
    #: (co-located cost - disaggregated cost) / co-located cost x 100, by $/M output tokens (GPUs without prices)
    disaggregated_saving_percent: float | None
    options: tuple[ServingOption, ...]
    engine: str = GENERIC.name  # the serving engine whose defaults every instance ran (engines.py)


def parse_pd_ratio(text: str | tuple[int, int] | None) -> tuple[int, int] | None:
    """'P:D' (e.g. '2:1') as (P, D), both integers >= 1; InputError naming --pd-ratio otherwise."""
    if text is None:
        return None
    if isinstance(text, tuple):
        parts = list(text)
    else:
        parts = str(text).split(":")
    try:
        p, d = (int(str(x).strip()) for x in parts)
    except (ValueError, TypeError):
        raise InputError(f"pd_ratio: '{text}' is not P:D with two integers (e.g. 2:1)", field="pd_ratio",
                         allowed="P:D, integers >= 1") from None
    if p < 1 or d < 1:
        raise InputError(f"pd_ratio: both sides must be >= 1 instance, got {p}:{d}", field="pd_ratio",
                         allowed="P:D, integers >= 1")
    return p, d


def _pool(role: str, layout: InstanceLayout, instances: int, rate: float, goodput: float) -> PoolChoice:
    return PoolChoice(role, layout.gpu.id, layout.tp, layout.ep, layout.attention_dp, instances, instances * layout.tp,
                      rate / instances, goodput, layout.usd_per_gpu_hour)


def _infeasible(mode: ServingMode, label: str, why: str) -> ServingOption:
    return ServingOption(mode, label, (), None, None, None, None, None, None, None, None, None, None, False, False, why)


class _Search:
    """The plan's state: instances, their curves, and option evaluation (module docstring)."""

    def __init__(self, model, layouts, *, rate, ttft_s, tpot_s, input_len, output_len, weight_dtype, kv_dtype,
                 pd_ratio, kv_link, sched, features: ServingFeatures = ServingFeatures(), output_mean: float | None = None,
                 engine: EngineProfile = GENERIC):
        self.rate, self.ttft_s, self.tpot_s = rate, ttft_s, tpot_s
        self.input_len, self.output_len = input_len, output_len
        #: output tokens per request that price the plan (the distribution's mean)
        self.output_mean = float(output_mean if output_mean is not None else output_len)
        self.pd_ratio, self.kv_link = pd_ratio, kv_link
        self.features = features
        if features.lengths is not None:
            self.prompts = features.lengths.sample(np.random.default_rng(PLAN_SEED), TRANSFER_SAMPLES)[0]
        else:
            self.prompts = np.array([input_len], dtype=np.int64)
        self.instances: dict[InstanceLayout, _Instance] = {}
        self.unusable: list[ServingOption] = []
        for lay in layouts:
            try:
                self.instances[lay] = _Instance(lay, model, weight_dtype, kv_dtype, input_len, output_len, sched, features,
                                                engine)
            except InputError as exc:
                if exc.field not in ("tp", "ep", "attention_dp") or features.speculative is None:
                    raise
                # the layout suits the target (candidate_layouts) but not the draft model
                self.unusable.append(_infeasible(ServingMode.COLOCATED, lay.label, f"the draft cannot use this layout: {exc}"))
            except GpuplanError:
                self.unusable.append(_infeasible(ServingMode.COLOCATED, lay.label, "does not fit in GPU memory"))
        self._curves: dict[tuple[str, InstanceLayout], RoleCurve] = {}
        self.transfers: dict[tuple, KvTransferStats] = {}

    def _role_curve(self, role: str, lay: InstanceLayout) -> RoleCurve:
        """The layout's ladder in `role` (computed once), stopped once the p90 passes
        CURVE_STOP_FACTOR x its objective (the plot shows a little past the objective)."""
        key = (role, lay)
        if key not in self._curves:
            inst = self.instances[lay]
            t_stop, p_stop = CURVE_STOP_FACTOR * self.ttft_s, CURVE_STOP_FACTOR * self.tpot_s
            point, saturation, stop = {
                "prefill": (inst.prefill_point, inst.prefill_saturation, lambda p: p.ttft_p90_s > t_stop),
                "decode": (inst.decode_point, inst.decode_saturation, lambda p: p.tpot_p90_s > p_stop),
                "colocated": (inst.colocated_point, inst.colocated_saturation,
                              lambda p: p.ttft_p90_s > t_stop or p.tpot_p90_s > p_stop),
            }[role]
            try:
                curve = RoleCurve(lay, _ladder(point, saturation(), stop))
            except InputError:
                raise
            except GpuplanError as exc:
                curve = RoleCurve(lay, (), why_not=str(exc))
            self._curves[key] = curve
        return self._curves[key]

    def prefill_curve(self, lay: InstanceLayout) -> RoleCurve:
        return self._role_curve("prefill", lay)

    def decode_curve(self, lay: InstanceLayout) -> RoleCurve:
        return self._role_curve("decode", lay)

    def colocated_curve(self, lay: InstanceLayout) -> RoleCurve:
        return self._role_curve("colocated", lay)

    # -- co-located ---------------------------------------------------------------------------
    def colocated(self, lay: InstanceLayout, replicas: int | None = None) -> ServingOption:
        c = self.colocated_curve(lay)
        label = lay.label
        if not c.points:
            return _infeasible(ServingMode.COLOCATED, label, c.why_not)
        by_ttft, by_tpot = c.max_rate("ttft_p90_s", self.ttft_s), c.max_rate("tpot_p90_s", self.tpot_s)
        good = None if by_ttft is None or by_tpot is None else min(by_ttft, by_tpot)
        if good is None or good <= 0:
            p0 = c.points[0]
            missed = ("TTFT", p0.ttft_p90_s, self.ttft_s) if p0.ttft_p90_s > self.ttft_s else ("TPOT", p0.tpot_p90_s, self.tpot_s)
            return _infeasible(ServingMode.COLOCATED, label,
                               f"misses {missed[0]}: {missed[1] * 1e3:.0f} ms at {p0.rate:.2g} req/s")
        n = replicas or max(1, math.ceil(self.rate / good))
        r = self.rate / n
        pools = [_pool("replica", lay, n, self.rate, good)]
        gpus = n * lay.tp
        return ServingOption(
            ServingMode.COLOCATED, f"{n} x {label}", tuple(pools), gpus, None, None, None, None, None,
            c.at(r, "ttft_p90_s") * 1e3, c.at(r, "tpot_p90_s") * 1e3, self.rate * self.output_mean / gpus,
            pools_usd_per_million_output_tokens(pools, self.rate, self.output_mean), True, False)

    # -- disaggregated ------------------------------------------------------------------------
    def _transfer(self, p: InstanceLayout, d: InstanceLayout, link: KvLink) -> KvTransferStats:
        key = (p, d, KvLink(link))
        if key not in self.transfers:
            self.transfers[key] = transfer_stats(self.instances[p].dep, self.instances[d].dep, self.prompts, link,
                                                 self.features.prefix_cache)
        return self.transfers[key]

    def disaggregated(self, p: InstanceLayout, d: InstanceLayout, counts: tuple[int, int] | None = None,
                      link: KvLink | None = None) -> ServingOption:
        pc, dc = self.prefill_curve(p), self.decode_curve(d)
        label = f"P {p.label} + D {d.label}"
        if not pc.points:
            return _infeasible(ServingMode.DISAGGREGATED, label, f"prefill: {pc.why_not}")
        if not dc.points:
            return _infeasible(ServingMode.DISAGGREGATED, label, f"decode: {dc.why_not}")
        r_d = dc.max_rate("tpot_p90_s", self.tpot_s)
        if r_d is None or r_d <= 0:
            p0 = dc.points[0]
            return _infeasible(ServingMode.DISAGGREGATED, label,
                               f"misses TPOT: D {p0.tpot_p90_s * 1e3:.0f} ms at {p0.rate:.2g} req/s")
        pd, dd = self.instances[p].dep, self.instances[d].dep
        why = ""
        if link is None:
            link = self.kv_link
        auto = link is None
        if auto:
            link = KvLink.NVLINK if same_domain_possible(pd, dd, p.tp + d.tp) else KvLink.NETWORK
        try:
            xfer = self._transfer(p, d, link)
        except Infeasible as exc:
            return _infeasible(ServingMode.DISAGGREGATED, label, str(exc))
        if counts is None:
            # more decode instances than TPOT alone needs shorten their admission queue (the TTFT's
            # last term): try a few and keep the cheapest pair that meets the TTFT budget
            best = None
            base = max(1, math.ceil(self.rate / r_d))
            for n_d in range(base, base + DECODE_EXTRA + 1):
                sized = self._prefill_count(pc, dc, xfer, n_d)
                if isinstance(sized, str):
                    why = why or sized
                    continue
                n_p, r_p = sized
                if self.pd_ratio is not None:
                    k = max(math.ceil(n_p / self.pd_ratio[0]), math.ceil(n_d / self.pd_ratio[1]))
                    n_p, n_d = k * self.pd_ratio[0], k * self.pd_ratio[1]
                price = n_p * p.tp * (p.usd_per_gpu_hour or 1.0) + n_d * d.tp * (d.usd_per_gpu_hour or 1.0)
                if best is None or price < best[0]:
                    best = (price, n_p, n_d, r_p)
            if best is None:
                return _infeasible(ServingMode.DISAGGREGATED, label, why)
            _, n_p, n_d, r_p = best
        else:
            n_p, n_d = counts
            r_p = pc.max_rate("ttft_p90_s", self.ttft_s) or 0.0
        gpus = n_p * p.tp + n_d * d.tp
        if auto and link is KvLink.NVLINK and not same_domain_possible(pd, dd, gpus):
            return self.disaggregated(p, d, counts, KvLink.NETWORK)
        rp, rd = self.rate / n_p, self.rate / n_d
        wait = link_wait_s(rp, xfer.time_s, xfer.time_sq_s2)
        ttft = pc.at(rp, "ttft_p90_s") + xfer.time_p90_s + wait + dc.at(rd, "first_token_delay_p90_s")
        tpot = dc.at(rd, "tpot_p90_s")
        pools = [_pool("prefill", p, n_p, self.rate, r_p), _pool("decode", d, n_d, self.rate, r_d)]
        g = math.gcd(n_p, n_d)
        return ServingOption(
            ServingMode.DISAGGREGATED, f"{n_p}P {p.label} + {n_d}D {d.label}", tuple(pools), gpus,
            f"{n_p // g}:{n_d // g}", link.value, xfer.kv_per_request_bytes, xfer.time_s * 1e3,
            wait * 1e3 if math.isfinite(wait) else None, ttft * 1e3, tpot * 1e3, self.rate * self.output_mean / gpus,
            pools_usd_per_million_output_tokens(pools, self.rate, self.output_mean),
            ttft <= self.ttft_s and tpot <= self.tpot_s, False, kv_transfer_p90_ms=xfer.time_p90_s * 1e3)

    def _prefill_count(self, pc: RoleCurve, dc: RoleCurve, xfer: KvTransferStats, n_d: int) -> tuple[int, float] | str:
        """(n_p, prefill goodput) meeting the TTFT budget left by the KV transfer, its link wait and
        the decode side's p90 first-token delay at rate / n_d; a short reason when none does."""
        d90 = dc.at(self.rate / n_d, "first_token_delay_p90_s")
        budget = self.ttft_s - xfer.time_p90_s - d90
        r_p, wait = None, 0.0
        for _ in range(4):  # the link wait depends on the prefill rate it limits
            r_p = pc.max_rate("ttft_p90_s", budget - wait)
            if r_p is None or r_p <= 0:
                break
            r_p = min(r_p, 0.9 / xfer.time_s)
            wait = link_wait_s(r_p, xfer.time_s, xfer.time_sq_s2)
        if r_p is None or r_p <= 0:
            return (f"misses TTFT: P {pc.points[0].ttft_p90_s * 1e3:.0f} + KV {xfer.time_p90_s * 1e3:.1f} + "
                    f"D {d90 * 1e3:.0f} > {self.ttft_s * 1e3:g} ms")
        return max(1, math.ceil(self.rate / r_p)), r_p

    def token_costs(self, o: ServingOption) -> dict:
        """The option's cost split (token_costs.pools_token_costs); co-located: f from its curve."""
        if not o.pools or not o.gpus:
            return {}
        colocated = o.mode is ServingMode.COLOCATED
        f = self.colocated_curve(self._layout_of(o.pools[0])).at(self.rate / o.pools[0].instances,
                                                                 "prefill_time_fraction") if colocated else None
        split = pools_token_costs(o.pools, self.rate, self.input_len, self.output_mean, f)
        return {} if split is None else {k: v for k, v in split.to_dict().items() if k != "usd_per_million_output_tokens"}

    # -- verification by simulation at the actual rates -----------------------------------------
    def _layout_of(self, pool: PoolChoice) -> InstanceLayout:
        for lay in self.instances:
            if (lay.gpu.id, lay.tp, lay.ep, lay.attention_dp) == (pool.gpu, pool.tp, pool.ep, pool.attention_dp):
                return lay
        raise KeyError(pool)  # pragma: no cover - pools are built from the instances

    def simulate_option(self, opt: ServingOption) -> ServingOption:
        """Re-simulate `opt` at its per-instance rates; add an instance to the pool that misses an
        objective (at most VERIFY_BUMPS times). The figures become the simulated ones."""
        for _ in range(VERIFY_BUMPS + 1):
            if opt.mode is ServingMode.COLOCATED:
                pool = opt.pools[0]
                pt = self.instances[self._layout_of(pool)].colocated_point(self.rate / pool.instances)
                ttft, tpot = pt.ttft_p90_s, pt.tpot_p90_s
                ok = ttft <= self.ttft_s and tpot <= self.tpot_s
                new = replace(opt, ttft_p90_ms=ttft * 1e3, tpot_p90_ms=tpot * 1e3, meets_slo=ok, simulated=True)
                if ok:
                    return new
                opt = self.colocated(self._layout_of(pool), pool.instances + 1)
            else:
                pp, dp = opt.pools
                pl, dl = self._layout_of(pp), self._layout_of(dp)
                pre = self.instances[pl].prefill_point(self.rate / pp.instances)
                dec = self.instances[dl].decode_point(self.rate / dp.instances)
                wait = (opt.kv_link_wait_ms or 0.0) / 1e3
                ttft = pre.ttft_p90_s + opt.kv_transfer_p90_ms / 1e3 + wait + dec.first_token_delay_p90_s
                tpot = dec.tpot_p90_s
                ok = ttft <= self.ttft_s and tpot <= self.tpot_s and opt.kv_link_wait_ms is not None
                new = replace(opt, ttft_p90_ms=ttft * 1e3, tpot_p90_ms=tpot * 1e3, meets_slo=ok, simulated=True)
                if ok:
                    return new
                counts = (pp.instances + (0 if ttft <= self.ttft_s else 1), dp.instances + (0 if tpot <= self.tpot_s else 1))
                if self.pd_ratio is not None:
                    k = max(math.ceil(counts[0] / self.pd_ratio[0]), math.ceil(counts[1] / self.pd_ratio[1]))
                    k = max(k, pp.instances // self.pd_ratio[0] + 1)
                    counts = (k * self.pd_ratio[0], k * self.pd_ratio[1])
                opt = self.disaggregated(pl, dl, counts, KvLink(opt.kv_link))
        return new

    # -- latency-throughput curve of an option (from the role curves, no new simulation) ---------
    def curve(self, opt: ServingOption) -> tuple[CurvePoint, ...]:
        out = []
        for m in (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0):
            rate = m * self.rate
            if opt.mode is ServingMode.COLOCATED:
                pool = opt.pools[0]
                c = self.colocated_curve(self._layout_of(pool))
                r = rate / pool.instances
                if r > c.points[-1].rate:
                    break
                ttft, tpot = c.at(r, "ttft_p90_s"), c.at(r, "tpot_p90_s")
            else:
                pp, dp = opt.pools
                pc, dc = self.prefill_curve(self._layout_of(pp)), self.decode_curve(self._layout_of(dp))
                rp, rd = rate / pp.instances, rate / dp.instances
                if rp > pc.points[-1].rate or rd > dc.points[-1].rate:
                    break
                xfer = self._transfer(self._layout_of(pp), self._layout_of(dp), KvLink(opt.kv_link))
                wait = link_wait_s(rp, xfer.time_s, xfer.time_sq_s2)
                if not math.isfinite(wait):
                    break
                ttft = pc.at(rp, "ttft_p90_s") + xfer.time_p90_s + wait + dc.at(rd, "first_token_delay_p90_s")
                tpot = dc.at(rd, "tpot_p90_s")
            out.append(CurvePoint(rate, rate * self.output_mean / opt.gpus, ttft * 1e3, tpot * 1e3))
        return tuple(out)


def _rank_key(o: ServingOption):
    cost = o.usd_per_million_output_tokens
    return (not o.meets_slo, cost if cost is not None else math.inf, o.gpus if o.gpus is not None else 1 << 30,
            o.ttft_p90_ms if o.ttft_p90_ms is not None else math.inf)


def _why(o: ServingOption, best: ServingOption, ttft_ms: float, tpot_ms: float) -> str:
    if o is best:
        return "best"
    if o.why_not_best:
        return o.why_not_best
    if not o.meets_slo:
        missed = []
        if o.ttft_p90_ms is not None and o.ttft_p90_ms > ttft_ms:
            missed.append(f"TTFT {o.ttft_p90_ms:.0f} ms")
        if o.tpot_p90_ms is not None and o.tpot_p90_ms > tpot_ms:
            missed.append(f"TPOT {o.tpot_p90_ms:.1f} ms")
        return "misses " + (" and ".join(missed) if missed else "the objectives")
    a, b = o.usd_per_million_output_tokens, best.usd_per_million_output_tokens
    if a is None and b is not None:
        unpriced = sorted({p.gpu for p in o.pools if p.usd_per_gpu_hour is None})
        return f"no $/GPU-hour for {', '.join(unpriced)} ({o.gpus} GPUs vs {best.gpus})"
    if a is not None and b is not None and b > 0 and abs(a - b) <= 1e-9 * b:
        return "same cost, higher TTFT" if o.gpus == best.gpus else "same cost, more GPUs"
    if a is not None and b is not None and b > 0:
        return f"costlier by {(a / b - 1) * 100:.0f}%"
    return f"{o.gpus} GPUs vs {best.gpus}"


def plan_disaggregated(model: ModelSpec, hardware: list[tuple[Gpu, System, float | None]], *, rate: float,
                       ttft_ms: float, tpot_ms: float, input_len: int, output_len: int, weight_dtype: str = "bf16",
                       kv_dtype: str = "bf16", tps: tuple[int, ...] = (1, 2, 4, 8),
                       pd_ratio: str | tuple[int, int] | None = None, kv_link: str | KvLink | None = None,
                       prefill_hardware: list[tuple[Gpu, System, float | None]] | None = None,
                       decode_hardware: list[tuple[Gpu, System, float | None]] | None = None,
                       scheduler: SchedulerConfig | None = None, lengths=None, speculative=None,
                       prefix_cache=None, engine: EngineProfile | None = None) -> DisaggregationPlan:
    """The cheapest way to serve `rate` requests/s within p90 TTFT / TPOT, disaggregated or
    co-located (module docstring). `hardware`: (gpu, system, $/GPU-hour or None) candidates for every
    pool; `prefill_hardware` / `decode_hardware` restrict one pool's GPU types (default `hardware`).
    `lengths` (lengths.RequestLengths; then `input_len` / `output_len` are its rounded means, which
    set the saturation ladders' scale, and the cost uses its exact mean output), `speculative`
    (speculative.SpeculativeDecoding), `prefix_cache` (prefix_cache.PrefixCache): module docstring.
    `engine` (engines.py; default GENERIC): every instance runs its scheduler (unless `scheduler` is
    given), per-step limits, memory rule, TP all-reduce and (prefill and co-located instances)
    CUDA-graph padding."""
    engine = engine or GENERIC
    if not (isinstance(rate, (int, float)) and rate > 0 and math.isfinite(rate)):
        raise InputError(f"rate: must be > 0 requests/s, got {rate}", field="rate")
    if not (ttft_ms > 0 and tpot_ms > 0):
        raise InputError("ttft_ms / tpot_ms: objectives must be > 0 ms", field="ttft_ms")
    for name, v in (("input_len", input_len), ("output_len", output_len)):
        if not isinstance(v, int) or v < 1:
            raise InputError(f"{name}: must be an integer >= 1 token, got {v!r}", field=name)
    if output_len < 2 and lengths is None:
        raise InputError("output_len: disaggregated serving needs >= 2 output tokens (TPOT is undefined for 1)",
                         field="output_len")
    ratio = parse_pd_ratio(pd_ratio)
    link = KvLink(kv_link) if kv_link is not None else None
    sched = scheduler  # None: each instance's Replica takes the engine's limits on its GPU
    all_hw = list(hardware) + [h for h in (prefill_hardware or []) + (decode_hardware or [])
                               if all(h[0].id != x[0].id for x in hardware)]
    layouts = candidate_layouts(model, all_hw, tps)
    if not layouts:
        raise Infeasible(f"no layout of {model.name} with tp in {tps} fits the candidates' scale-up domains")
    features = ServingFeatures(lengths, speculative, prefix_cache)
    s = _Search(model, layouts, rate=float(rate), ttft_s=ttft_ms / 1e3, tpot_s=tpot_ms / 1e3, input_len=input_len,
                output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype, pd_ratio=ratio, kv_link=link,
                sched=sched, features=features,
                output_mean=mean_lengths(lengths)[1] if lengths is not None else None, engine=engine)
    ids = {h[0].id for h in hardware}
    p_ids = {h[0].id for h in prefill_hardware} if prefill_hardware else ids
    d_ids = {h[0].id for h in decode_hardware} if decode_hardware else ids
    options: list[ServingOption] = list(s.unusable)
    for lay in s.instances:
        if lay.gpu.id in ids:
            options.append(s.colocated(lay))
    for p in s.instances:
        if p.gpu.id not in p_ids:
            continue
        for d in s.instances:
            if d.gpu.id in d_ids:
                options.append(s.disaggregated(p, d))
    options.sort(key=_rank_key)
    # re-simulate the cheapest of each mode at their actual rates, then rank again
    for mode in ServingMode:
        picked = [i for i, o in enumerate(options) if o.mode is mode and o.meets_slo][:VERIFY_TOP]
        for i in picked:
            options[i] = s.simulate_option(options[i])
    options.sort(key=_rank_key)
    feasible = [o for o in options if o.meets_slo]
    if not feasible:
        reasons = "; ".join(f"{o.layout}: {o.why_not_best or 'misses the objectives'}" for o in options[:4])
        raise Infeasible(f"no co-located or disaggregated layout meets TTFT <= {ttft_ms:g} ms and TPOT <= {tpot_ms:g} ms "
                         f"(p90) at {rate:g} requests/s: {reasons}")
    best = feasible[0]
    shown = 0
    out = []
    for o in options:
        if o.meets_slo and (shown < CURVE_OPTIONS or o is best):
            o = replace(o, latency_curve=s.curve(o))
            shown += 1
        out.append(o)
    best = next(o for o in out if o.meets_slo)
    out = [replace(o, why_not_best=_why(o, best, ttft_ms, tpot_ms), **s.token_costs(o)) for o in out]
    best = out[[i for i, o in enumerate(out) if o.meets_slo][0]]
    best_c = next((o for o in out if o.mode is ServingMode.COLOCATED and o.meets_slo), None)
    best_d = next((o for o in out if o.mode is ServingMode.DISAGGREGATED and o.meets_slo), None)
    saving = None
    if best_c is not None and best_d is not None:
        a, b = best_c.usd_per_million_output_tokens, best_d.usd_per_million_output_tokens
        if a is not None and b is not None and a > 0:
            saving = (a - b) / a * 100.0
        elif best_c.gpus:
            saving = (best_c.gpus - best_d.gpus) / best_c.gpus * 100.0
    return DisaggregationPlan(float(rate), float(ttft_ms), float(tpot_ms), input_len, output_len, best, best_c, best_d,
                              saving, tuple(out), engine.name)


def colocated_latency_curves(model: ModelSpec, picks: list[tuple[InstanceLayout, int]], *, rate: float, ttft_ms: float,
                             tpot_ms: float, input_len: int, output_len: int, weight_dtype: str = "bf16",
                             kv_dtype: str = "bf16", scheduler: SchedulerConfig | None = None, lengths=None,
                             speculative=None, prefix_cache=None, engine: EngineProfile | None = None) -> list[ServingOption]:
    """Co-located options with their latency-throughput curves, `replicas` fixed per layout (the
    plain `serve plan --plot`: the capacity plan's candidates under Poisson arrivals; `lengths`,
    `speculative`, `prefix_cache` as plan_disaggregated)."""
    s = _Search(model, [lay for lay, _ in picks], rate=float(rate), ttft_s=ttft_ms / 1e3, tpot_s=tpot_ms / 1e3,
                input_len=input_len, output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                pd_ratio=None, kv_link=None, sched=scheduler,
                features=ServingFeatures(lengths, speculative, prefix_cache),
                output_mean=mean_lengths(lengths)[1] if lengths is not None else None, engine=engine or GENERIC)
    out = []
    for lay, replicas in picks:
        if lay not in s.instances:
            continue
        o = s.colocated(lay, replicas)
        if o.gpus is not None:
            o = replace(o, latency_curve=s.curve(o))
        out.append(o)
    return out
