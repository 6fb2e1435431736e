"""What serving costs per request, per million input tokens and per million output tokens.

A pool of G GPUs rented at P $/GPU-hour serves R requests/s of I prompt and O output tokens on
average. It costs C = G x P / 3600 $ per second, whatever it does in that second, so

    usd_per_request                     = C / R
    usd_per_million_output_tokens       = C / (R x O) x 1e6      all of the cost over the output tokens
                                                                 (the figure `serve plan` always printed)

Splitting the cost between the phases. Let f be the share of the GPUs' engine-step time spent on
prefill (the rest on decode). Idle time (no step running) is charged to the phases in the same
ratio, so prefill is charged f x C per second and decode (1 - f) x C:

    usd_per_million_input_tokens         = f x C / (R x I) x 1e6
    usd_per_million_output_tokens_decode = (1 - f) x C / (R x O) x 1e6

and the two parts add back to the whole: I x in + O x out_decode = 1e6 x usd_per_request.

Where f comes from:
- co-located serving: the replica's simulation sums, step by step, the step time and the prefill
  phase's share of it (kernels.prefill_seconds_of_step: each phase's own attention term, plus the
  shared overhead, linear layers and LM head split by the step's token share);
  f = prefill seconds / step seconds (SimResult.prefill_time_fraction). A replica that only
  prefills has f = 1 (every dollar on input tokens); one that only decodes has f = 0.
- disaggregated serving: prefill instances only prefill and decode instances only decode, so
  f = prefill GPUs / (prefill GPUs + decode GPUs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from gpuplan.errors import InputError


@dataclass(frozen=True)
class TokenCosts:
    """The cost split of one serving pool (module docstring); $ figures, f a fraction 0-1."""

    prefill_time_fraction: float
    usd_per_request: float
    usd_per_million_input_tokens: float
    usd_per_million_output_tokens: float  # all of the cost over output tokens
    usd_per_million_output_tokens_decode: float  # the decode phase's share over output tokens

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def token_costs(gpus: float, usd_per_gpu_hour: float, requests_per_s: float, input_tokens: float,
                output_tokens: float, prefill_time_fraction: float) -> TokenCosts:
    """Cost per request and per million input / output tokens of `gpus` GPUs at `usd_per_gpu_hour`
    serving `requests_per_s` requests of `input_tokens` + `output_tokens` (means), the prefill
    phase taking `prefill_time_fraction` of the engine-step time (module docstring)."""
    for name, value in (("gpus", gpus), ("usd_per_gpu_hour", usd_per_gpu_hour), ("requests_per_s", requests_per_s),
                        ("input_tokens", input_tokens), ("output_tokens", output_tokens)):
        if not value > 0:
            raise InputError(f"{name}: must be > 0, got {value}", field=name)
    if not 0.0 <= prefill_time_fraction <= 1.0:
        raise InputError(f"prefill_time_fraction: must be in [0, 1], got {prefill_time_fraction}",
                         field="prefill_time_fraction")
    usd_per_s = gpus * usd_per_gpu_hour / 3600.0
    f = prefill_time_fraction
    return TokenCosts(
        prefill_time_fraction=f,
        usd_per_request=usd_per_s / requests_per_s,
        usd_per_million_input_tokens=f * usd_per_s / (requests_per_s * input_tokens) * 1e6,
        usd_per_million_output_tokens=usd_per_s / (requests_per_s * output_tokens) * 1e6,
        usd_per_million_output_tokens_decode=(1.0 - f) * usd_per_s / (requests_per_s * output_tokens) * 1e6,
    )


def pools_usd_per_million_output_tokens(pools, requests_per_s: float, output_tokens: float) -> float | None:
    """All of the pools' cost over the output tokens: sum(gpus x $/GPU-hour) / 3600 / (R x O) x 1e6
    (None where a pool's price is unknown)."""
    if any(p.usd_per_gpu_hour is None for p in pools):
        return None
    usd_per_s = sum(p.gpus * p.usd_per_gpu_hour for p in pools) / 3600.0
    return usd_per_s / (requests_per_s * output_tokens) * 1e6


def pools_token_costs(pools, requests_per_s: float, input_tokens: float, output_tokens: float,
                      colocated_prefill_fraction: float | None = None) -> TokenCosts | None:
    """`token_costs` of serving pools, each with `role` ("prefill", "decode" or "replica"), `gpus`
    and `usd_per_gpu_hour` (None where a price is unknown: then None). Disaggregated pools: f = the
    prefill pool's share of the $/hour; co-located replicas: `colocated_prefill_fraction` (None: no
    split known)."""
    if not pools or any(p.usd_per_gpu_hour is None for p in pools):
        return None
    usd_per_hour = sum(p.gpus * p.usd_per_gpu_hour for p in pools)
    gpus = sum(p.gpus for p in pools)
    if any(p.role == "replica" for p in pools):
        f = colocated_prefill_fraction
    else:
        f = sum(p.gpus * p.usd_per_gpu_hour for p in pools if p.role == "prefill") / usd_per_hour
    if f is None or f != f:  # None or NaN: not measured
        return None
    return token_costs(gpus, usd_per_hour / gpus, requests_per_s, input_tokens, output_tokens, f)


__all__ = ["TokenCosts", "pools_token_costs", "pools_usd_per_million_output_tokens", "token_costs"]
