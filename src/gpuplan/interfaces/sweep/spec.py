"""The sweep spec: a TOML file naming the axes of a co-design or what-if study, validated once here.

    goal = "train"                       # or "serve"
    [axes]
    models = ["llama-3-8b"]              # bundled names or config.json paths
    hardware = ["dgx-h100", "dgx-h200"]  # catalog system ids, or GPU ids (their widest system)
    gpus = [64, 128]                     # train only: GPUs per run
    seq_len = [4096]                     # train: training sequence; serve: prompt tokens
    tokens = ["1T"]                      # train only: tokens per run
    rate = [10.0]                        # serve only: requests/s
    output_len = [256]                   # serve only: generated tokens per request
    [[variants]]                         # hypothetical hardware, appended to the hardware axis
    name = "h100-hbm2x"
    base = "dgx-h100"
    hbm_bandwidth_scale = 2.0
    [sampling]                           # cartesian (default), random or latin-hypercube
    method = "random"
    points = 20
    seed = 0

Unknown keys and bad values are refused with one line naming the field (`spec_error`); every
value is checked for range, and the number of points is bounded (MAX_POINTS).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gpuplan.errors import InputError
from gpuplan.specs import Precision
from gpuplan.specs.execution import Framework
from gpuplan.specs.gpu import DTYPES

#: the most points one spec may expand to (bounded work, DESIGN.md "Input is validated once")
MAX_POINTS = 1_000_000
Scale = Field(default=None, gt=0, le=1000)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Variant(_Strict):
    """A hypothetical node: a catalog system (or a GPU's widest system) with figures scaled or set.
    Each field left out keeps the base's figure. The catalog is never written: the variant is a
    copy of the specs (`model_copy(update=...)`), built in `hardware.build_variant`."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$", max_length=80)
    base: str = Field(min_length=1, max_length=120)
    memory_scale: float | None = Scale  # HBM capacity x
    hbm_bandwidth_scale: float | None = Scale  # HBM bandwidth x
    #: dense FLOP/s x, for every dtype (a number) or per dtype ({bf16 = 2.0, fp8 = 2.0})
    dense_flops_scale: Union[float, dict[str, float], None] = None
    nvlink_domain_gpus: int | None = Field(default=None, ge=1, le=100_000)  # GPUs in one scale-up domain
    nvlink_bandwidth_scale: float | None = Scale  # scale-up bandwidth per GPU x
    nics_per_node: int | None = Field(default=None, ge=0, le=1024)
    nic_gbit_s: float | None = Field(default=None, gt=0, le=100_000)  # per NIC, line rate
    power_scale: float | None = Scale  # GPU TDP and node maximum power x
    price_scale: float | None = Scale  # $/GPU-hour x
    usd_per_gpu_hour: float | None = Field(default=None, gt=0, le=1e6)  # $/GPU-hour, set

    @field_validator("dense_flops_scale")
    @classmethod
    def _flops(cls, v):
        items = v.items() if isinstance(v, dict) else [("all dtypes", v)] if v is not None else []
        for dtype, scale in items:
            if isinstance(v, dict) and dtype not in DTYPES:
                raise ValueError(f"unknown dtype '{dtype}'; allowed: {', '.join(DTYPES)}")
            if not (isinstance(scale, (int, float)) and math.isfinite(scale) and 0 < scale <= 1000):
                raise ValueError(f"scale for {dtype} must be a number in (0, 1000], got {scale!r}")
        return v

    @model_validator(mode="after")
    def _one_price(self):
        if self.price_scale is not None and self.usd_per_gpu_hour is not None:
            raise ValueError("give price_scale or usd_per_gpu_hour, not both")
        return self


class Axes(_Strict):
    """The values of each axis; an axis left out takes its one default (module docstring)."""

    models: list[str] = Field(min_length=1, max_length=1000)
    hardware: list[str] = Field(default_factory=list, max_length=1000)
    gpus: list[int] = Field(default_factory=list, max_length=1000)
    seq_len: list[int] = Field(default_factory=list, max_length=1000)
    tokens: list[Union[str, float]] = Field(default_factory=list, max_length=1000)
    rate: list[float] = Field(default_factory=list, max_length=1000)
    output_len: list[int] = Field(default_factory=list, max_length=1000)

    @field_validator("gpus")
    @classmethod
    def _gpus(cls, v):
        for n in v:
            if not 1 <= n <= 1_000_000:
                raise ValueError(f"each GPU count must be in 1..1000000, got {n}")
        return v

    @field_validator("seq_len", "output_len")
    @classmethod
    def _lengths(cls, v):
        for n in v:
            if not 1 <= n <= 10_000_000:
                raise ValueError(f"each length must be in 1..10000000 tokens, got {n}")
        return v

    @field_validator("rate")
    @classmethod
    def _rate(cls, v):
        for r in v:
            if not (math.isfinite(r) and 0 < r <= 1e7):
                raise ValueError(f"each rate must be in (0, 1e7] requests/s, got {r}")
        return v

    @field_validator("tokens")
    @classmethod
    def _tokens(cls, v):
        from gpuplan.units import parse_count

        for t in v:
            n = parse_count(t, field="axes.tokens")
            if not (math.isfinite(n) and n >= 1):
                raise ValueError(f"each token count must be >= 1, got {t!r}")
        return v


class Sampling(_Strict):
    """cartesian: every combination, in order; random: `points` combinations drawn uniformly
    (numpy Generator seeded with `seed`); latin-hypercube: `points` combinations stratified on every
    axis (scipy.stats.qmc.LatinHypercube when scipy is installed, else numpy: points.py)."""

    method: Literal["cartesian", "random", "latin-hypercube"] = "cartesian"
    points: int | None = Field(default=None, ge=1, le=MAX_POINTS)
    seed: int = Field(default=0, ge=0, le=2**63 - 1)

    @model_validator(mode="after")
    def _points(self):
        if self.method == "cartesian" and self.points is not None:
            raise ValueError("points is only for random or latin-hypercube sampling")
        if self.method != "cartesian" and self.points is None:
            raise ValueError(f"{self.method} sampling needs points = N")
        return self


class TrainOptions(_Strict):
    global_batch: int | None = Field(default=None, ge=1, le=10_000_000)  # sequences per step
    precision: Precision = Precision.BF16
    framework: Framework = Framework.MEGATRON


class ServeOptions(_Strict):
    ttft_ms: float = Field(default=2000.0, gt=0, le=1e7)  # p90 time to first token objective
    tpot_ms: float = Field(default=50.0, gt=0, le=1e7)  # p90 time per output token objective
    weight_dtype: str = Field(default="bf16", pattern=r"^[a-z0-9]+$")
    kv_dtype: str = Field(default="bf16", pattern=r"^[a-z0-9]+$")


class Constraints(_Strict):
    """A row meets the constraints when every given bound holds (`meets_constraints`); rows that do
    not are kept, and left out of the Pareto frontier."""

    max_days: float | None = Field(default=None, gt=0)
    max_cost_usd: float | None = Field(default=None, gt=0)
    min_mfu_pct: float | None = Field(default=None, ge=0, le=100)
    max_gpus: int | None = Field(default=None, ge=1)
    max_usd_per_million_tokens: float | None = Field(default=None, gt=0)


class SweepSpec(_Strict):
    name: str = Field(default="sweep", max_length=200)
    goal: Literal["train", "serve"]
    axes: Axes
    variants: list[Variant] = Field(default_factory=list, max_length=1000)
    sampling: Sampling = Sampling()
    train: TrainOptions = TrainOptions()
    serve: ServeOptions = ServeOptions()
    constraints: Constraints = Constraints()

    @model_validator(mode="after")
    def _goal_axes(self):
        if not self.axes.hardware and not self.variants:
            raise ValueError("axes.hardware: give at least one catalog id or a [[variants]] entry")
        names = list(self.axes.hardware) + [v.name for v in self.variants]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"variants.name: {dupes[0]} appears twice on the hardware axis")
        if self.goal == "train":
            if not self.axes.gpus:
                raise ValueError("axes.gpus: a train sweep needs at least one GPU count")
            for axis in ("rate", "output_len"):
                if getattr(self.axes, axis):
                    raise ValueError(f"axes.{axis}: only for goal = \"serve\"")
        else:
            for axis in ("gpus", "tokens"):
                if getattr(self.axes, axis):
                    raise ValueError(f"axes.{axis}: only for goal = \"train\" (serving finds the GPU count)")
        return self

    @property
    def hardware_axis(self) -> list[str]:
        """The hardware axis: catalog ids as listed, then every variant by name."""
        return list(self.axes.hardware) + [v.name for v in self.variants]

    def digest(self) -> str:
        """sha256 of the validated spec (canonical JSON): what a resumed run must match."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def spec_error(exc: ValidationError, source: str) -> InputError:
    """One line naming the field: 'SOURCE: axes.gpus.0: Input should be a valid integer'."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    if msg.startswith(("axes.", "variants.")):  # the message names the field itself
        loc, _, msg = msg.partition(": ")
    return InputError(f"{source}: {loc or 'spec'}: {msg}", field=loc or "spec")


def parse_spec(data: dict, source: str = "spec") -> SweepSpec:
    """A SweepSpec from TOML data; InputError naming the field otherwise."""
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise spec_error(exc, source) from None


def load_spec(path: str | Path) -> SweepSpec:
    """Read (gpuplan.input_files: bounded, a pipe read as a stream) and validate a spec file."""
    from gpuplan.input_files import MAX_SETTINGS_BYTES, read_input_text
    from gpuplan.validation_rules import load_toml_text

    p = Path(path)
    text = read_input_text(p, "spec", max_bytes=MAX_SETTINGS_BYTES, what="TOML file")
    return parse_spec(load_toml_text(text, f"spec {p.name}", "spec"), p.name)
