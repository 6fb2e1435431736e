"""Numeric CLI options checked at the boundary, for every command at once.

`guard_numeric_options(command)` walks a click command tree (the root group calls it once) and
wraps every int / float option and argument with a check from gpuplan.validation_rules:

- every number is finite (NaN and inf are refused: `x <= 0` is False for NaN);
- every integer fits in int64;
- no number is negative, unless the option is in `NEGATIVE_ALLOWED`;
- an option in `POSITIVE` must be > 0 (it divides something, or counts things that must exist);
- an option in `CAPS` has an upper bound, stated with its reason.

Options are matched by their long name, so a command adopts the rules by naming its option the
way the others do; a new rule is one line here. A command that needs its own check can use
`number_callback(gt=..., le=...)` as a typer `callback=`.

The message is one line naming the option and what is allowed:
`--pue: must be a finite number > 0, got nan`.
"""

from __future__ import annotations

import typing
from typing import Any, Callable

from gpuplan.errors import InputError
from gpuplan.validation_rules import (
    MAX_CONCURRENCY, MAX_GPU_SCAN, MAX_GPUS, MAX_INPUT_TOKENS, MAX_LAYERS, MAX_OUTPUT_TOKENS, MAX_YEARS,
    check_number, describe_range, show,
)

#: options that may be negative (none yet: every number gpuplan takes is a size, count, rate,
#: price or fraction).
NEGATIVE_ALLOWED: frozenset[str] = frozenset()

#: options that must be > 0: parallel degrees, counts that divide, lengths, rates, durations, ratios.
POSITIVE: frozenset[str] = frozenset({
    "--gpus", "--gpus-per-node", "--nodes", "--scalable-units", "--max-gpus", "--seq-len", "--global-batch",
    "--tp", "--pp", "--dp", "--cp", "--ep", "--vpp", "--etp", "--micro-batch", "--top", "--days", "--years",
    "--rate", "--ttft-ms", "--tpot-ms", "--input-len", "--output-len", "--utilization", "--pue",
    "--concurrency", "--batch", "--m", "--k", "--n", "--threads", "--regs", "--elem-bytes", "--workers",
    "--latency-ns", "--bandwidth-gbps", "--sms", "--bytes-per-load", "--loads-in-flight", "--radix",
    "--oversubscription", "--kv-bytes", "--layers",
})

#: upper bounds: option -> (largest allowed, why). Bounded work or the physics of the quantity.
CAPS: dict[str, tuple[float, str]] = {
    "--gpus": (MAX_GPUS, "10x the largest announced cluster"),
    "--max-gpus": (MAX_GPU_SCAN, "the scan tries every whole-node count up to it"),
    "--nodes": (MAX_GPUS, "10x the largest announced cluster"),
    "--scalable-units": (MAX_GPUS / 256, "10x the largest announced cluster, 256 GPUs per SU"),
    "--concurrency": (MAX_CONCURRENCY, "requests simulated one by one"),
    "--batch": (MAX_CONCURRENCY, "requests simulated one by one"),
    "--output-len": (MAX_OUTPUT_TOKENS, "decode is simulated token by token"),
    "--input-len": (MAX_INPUT_TOKENS, "prefill is simulated chunk by chunk; 1M-token context"),
    "--years": (MAX_YEARS, "a facility horizon; the TCO sums year by year"),
    "--layers": (MAX_LAYERS, "per-layer work"),
    "--utilization": (1.0, "a fraction of the hours in a year"),
    "--parallel-fraction": (1.0, "a fraction of the work"),
    "--top": (10_000, "rows printed"),
    "--stride": (2**31, "an index within the 32-bit range kernels use"),
    "--offset": (2**31, "an index within the 32-bit range kernels use"),
    "--pad": (2**31, "an index within the 32-bit range kernels use"),
    "--pue": (10.0, "power usage effectiveness: facility power / IT power, 1.0-3.0 in practice"),
}


def _option_name(param: Any) -> str:
    opts = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    return opts[0] if opts else (getattr(param, "opts", None) or [param.name])[0]


def _numeric_kind(param: Any) -> type | None:
    desc = getattr(param, "type_descriptor", None)
    ann = getattr(desc, "annotation", None)
    if typing.get_origin(ann) in (list, tuple):
        args = [a for a in typing.get_args(ann) if a is not Ellipsis]
        ann = args[0] if len(set(args)) == 1 else None
    if ann is bool:
        return None
    return ann if ann in (int, float) else None


def check_option(name: str, value: Any, integer: bool) -> Any:
    """Apply the rules above to one value of option `name` (None = not given, passes)."""
    if value is None:
        return None
    lower = {} if name in NEGATIVE_ALLOWED else ({"gt": 0} if name in POSITIVE else {"ge": 0})
    value = check_number(value, name, integer=integer, **lower)
    cap = CAPS.get(name)
    if cap and value > cap[0]:
        rng = describe_range(**lower, le=cap[0])
        allowed = f"{'an integer' if integer else 'a number'} {rng}"
        raise InputError(f"{name}: must be {allowed} ({cap[1]}), got {show(value)}", field=name, allowed=allowed)
    return value


def number_callback(*, gt: float | None = None, ge: float | None = None, le: float | None = None,
                    lt: float | None = None, integer: bool = False) -> Callable:
    """A typer `callback=` checking one numeric option: finite, int64 when `integer`, in range."""

    def callback(ctx: Any, param: Any, value: Any) -> Any:
        if value is None:
            return value
        return check_number(value, _option_name(param), gt=gt, ge=ge, le=le, lt=lt, integer=integer)

    return callback


def _wrap(param: Any, kind: type) -> None:
    if getattr(param, "_gpuplan_guarded", False):
        return
    name = _option_name(param)
    original = param.callback
    integer = kind is int

    def guarded(ctx: Any, p: Any, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            value = type(value)(check_option(name, v, integer) for v in value)
        else:
            value = check_option(name, value, integer)
        return original(ctx, p, value) if original is not None else value

    param.callback = guarded
    param._gpuplan_guarded = True


def guard_numeric_options(command: Any) -> None:
    """Wrap every numeric option of `command` and its subcommands (idempotent)."""
    stack = [command]
    while stack:
        cmd = stack.pop()
        for param in getattr(cmd, "params", []):
            kind = _numeric_kind(param)
            if kind is not None:
                _wrap(param, kind)
        stack.extend(getattr(cmd, "commands", {}).values())
