"""Goodput of a training run: the days it is expected to take with failures, restarts and checkpoints.

A run of ideal (failure-free) time T on N GPUs is interrupted at a rate lambda N (lambda: unexpected
interruptions per GPU-hour, the assumption `gpu_interruptions_per_gpu_hour`), so its mean time between
interruptions is M = 1 / (lambda N). It writes a checkpoint of C bytes every tau seconds, stalling
delta = C / B_write (B_write = `storage_write_gbps_per_gpu` x N: a parallel file system's sustained
write bandwidth, in proportion to the cluster); after each interruption it restarts (R = the
assumption `restart_s` plus reading the checkpoint back at `storage_read_gbps_per_gpu` x N) and
redoes on average half an interval of work. Daly's first-order model of the expected wall time:

    W = T (1 + delta / tau) / (1 - (R + (tau + delta) / 2) / M)        goodput = T / W

with the optimal interval (Daly, FGCS 22(3) 2006, higher-order form; Young, CACM 1974, to first order
sqrt(2 delta M)):

    tau = sqrt(2 delta M) [1 + (1/3) sqrt(delta / (2M)) + (1/9) (delta / (2M))] - delta    (delta < 2M)
    tau = M                                                                                 (delta >= 2M)

The checkpoint is what a restart needs: the bf16 weights and the fp32 master weights and two Adam
moments (2 + 4 + 4 + 4 = 14 bytes per parameter; Megatron-core's distributed checkpoint saves the model
and the distributed optimizer's state). Sources of the assumptions: Llama 3 report sec. 3.3.4 (419
unexpected interruptions in 54 days on 16,384 H100: 1.97e-5 per GPU-hour) and sec. 3.3.1 (Tectonic:
2 TB/s sustained, 7 TB/s peak for that cluster); ../shared/reference/wave3-facts.md section 7.
A run whose M is shorter than R + tau / 2 never finishes (`expected_days` is infinite, goodput 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuplan.facilities.assumptions import DEFAULT_ASSUMPTIONS, Assumptions

#: bytes per parameter a training checkpoint holds (module docstring): bf16 weights + fp32 master + Adam m, v
CHECKPOINT_BYTES_PER_PARAM = 2 + 4 + 4 + 4


@dataclass(frozen=True)
class Goodput:
    """Expected time of a training run with interruptions and checkpoints (module docstring)."""

    ideal_s: float
    expected_s: float
    mtbf_s: float  # mean time between interruptions of the whole job
    checkpoint_bytes: float
    checkpoint_stall_s: float  # delta
    checkpoint_interval_s: float  # tau (Daly)
    restart_s: float  # R: restart plus reading the checkpoint back
    expected_interruptions: float

    @property
    def goodput_pct(self) -> float:
        return 100.0 * self.ideal_s / self.expected_s if math.isfinite(self.expected_s) else 0.0

    def to_dict(self) -> dict:
        finite = math.isfinite(self.expected_s)
        return {
            "ideal_days": self.ideal_s / 86400.0,
            "expected_days": self.expected_s / 86400.0 if finite else None,
            "goodput_pct": self.goodput_pct,
            "mtbf_hours": self.mtbf_s / 3600.0,
            "expected_interruptions": self.expected_interruptions if finite else None,
            "checkpoint_gib": self.checkpoint_bytes / 2**30,
            "checkpoint_stall_s": self.checkpoint_stall_s,
            "checkpoint_interval_s": self.checkpoint_interval_s,
            "restart_s": self.restart_s,
        }


def daly_interval_s(stall_s: float, mtbf_s: float) -> float:
    """Daly's optimal checkpoint interval (module docstring): higher-order form for delta < 2M, else M."""
    if stall_s >= 2.0 * mtbf_s:
        return mtbf_s
    x = stall_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * stall_s * mtbf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - stall_s


def expected_wall_s(ideal_s: float, stall_s: float, interval_s: float, restart_s: float, mtbf_s: float) -> float:
    """W = T (1 + delta / tau) / (1 - (R + (tau + delta) / 2) / M); infinite when the bracket is <= 0."""
    lost = 1.0 - (restart_s + 0.5 * (interval_s + stall_s)) / mtbf_s
    if lost <= 0.0:
        return math.inf
    return ideal_s * (1.0 + stall_s / interval_s) / lost


def training_goodput(ideal_s: float, num_gpus: int, params: float, assumptions: Assumptions | None = None) -> Goodput:
    """Goodput of a run of `ideal_s` seconds on `num_gpus` GPUs training `params` parameters."""
    a = assumptions or DEFAULT_ASSUMPTIONS
    rate = a.gpu_interruptions_per_gpu_hour * num_gpus / 3600.0  # per second, whole job
    mtbf = 1.0 / rate if rate > 0 else math.inf
    ckpt = CHECKPOINT_BYTES_PER_PARAM * params
    stall = ckpt / (a.storage_write_gbps_per_gpu * 1e9 * num_gpus)
    restart = a.restart_s + ckpt / (a.storage_read_gbps_per_gpu * 1e9 * num_gpus)
    if not math.isfinite(mtbf):
        return Goodput(ideal_s, ideal_s, mtbf, ckpt, stall, math.inf, restart, 0.0)
    tau = daly_interval_s(stall, mtbf)
    wall = expected_wall_s(ideal_s, stall, tau, restart, mtbf)
    return Goodput(ideal_s, wall, mtbf, ckpt, stall, tau, restart, wall / mtbf if math.isfinite(wall) else math.inf)


__all__ = ["CHECKPOINT_BYTES_PER_PARAM", "Goodput", "daly_interval_s", "expected_wall_s", "training_goodput"]
