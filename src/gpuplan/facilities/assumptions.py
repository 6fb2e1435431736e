"""Named, dated, sourced assumptions for facilities and cost: every figure the catalog lacks.

Each `Assumption` carries a value with its unit in the key, the source it came from and the date
the figure refers to. Prices move; the point is that every one is visible in the output and can
be replaced (`Assumptions.with_overrides(...)`, or `--set KEY=VALUE` on `train`, `plan`,
`serve plan` and the `dc` commands; `assumptions_from_options` builds the set every command uses,
so one `--set pue=1.5` changes every figure that depends on the PUE). Where no primary source was
read the source says so ("gpuplan estimate" or "UNVERIFIED"), rather than pretending.

Every figure has a documented range where it is defined (`min_value`, `max_value`, `integer`; a
`*_fraction` lies in [0, 1] unless it says otherwise): what the quantity can physically be, wide
enough for any real facility, and narrow enough that every formula stays finite and meaningful (a
rack of 0 kW or 1e-300 units, a facility that lives 0 years). `checked_value` is the one check of
a value given with `--set` (or a named option): a finite number, written with ASCII digits, inside
the range; anything else is a one-line InputError naming the key and its range (`dc assumptions`
lists them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from gpuplan.errors import InputError
from gpuplan.validation_rules import is_ascii_number, parse_number, show
from gpuplan.workloads.memory_headroom import KNOB as USABLE_MEMORY_KNOB, USABLE_MEMORY_FRACTION


@dataclass(frozen=True)
class Assumption:
    """One editable figure: `key` ends in its unit (`_usd`, `_kw`, `_w`, `_fraction`, ...)."""

    key: str
    value: float
    description: str
    source: str
    date: str  # ISO date (or year / month) the figure refers to
    min_value: float = 0.0  # the range a value given with --set must lie in (inclusive)
    max_value: float = math.inf  # every default below sets a finite one (tests check it)
    integer: bool = False  # a count (rack units, switch ports): whole numbers only

    @property
    def allowed(self) -> str:
        """The range as text: '>= 1 and <= 1000, an integer'."""
        upper = "" if self.max_value == math.inf else f" and <= {self.max_value:g}"
        return f">= {self.min_value:g}{upper}" + (", an integer" if self.integer else "")

    def as_row(self) -> dict:
        return {"key": self.key, "value": self.value, "description": self.description, "source": self.source,
                "date": self.date, "allowed": self.allowed}


#: upper bound of a price of one item or one node, USD (a DGX is ~$0.3-0.5M; far above any single item)
_MAX_ITEM_USD = 1e8
#: upper bound of a yearly or monthly sum, USD (operations staff, space)
_MAX_SUM_USD = 1e10
#: upper bound of storage bandwidth per GPU, GB/s: 20x what a 400 Gb/s NIC per GPU carries (50 GB/s)
_MAX_GPU_STORAGE_GBPS = 1000.0
#: upper bound of a rack's power or a cooling threshold, kW: ~8x the densest racks shipping (GB200
#: NVL72, ~120 kW per rack, NVIDIA GB200 NVL72 product page)
_MAX_RACK_KW = 1000.0


_SEED = "seed module 004 (AI infrastructure; not authoritative)"
_RA_H100 = "NVIDIA DGX SuperPOD H100 reference architecture RA-11333-001 V11 (2023-09-22)"

_DEFAULTS: tuple[Assumption, ...] = (
    # ---- racks ------------------------------------------------------------------------------
    # range: 1 kW (a rack that powers one small server) to _MAX_RACK_KW; a node above the limit
    # gets a rack of its own (facilities.racks), so 0 would put every node in its own rack
    Assumption("rack_power_limit_kw", 45.0, "power budget of one compute rack",
               f"{_RA_H100}: four DGX H100 (4 x 10.2 kW = 40.8 kW) per compute rack; {_SEED}: ~43 kW AI rack", "2023-09",
               min_value=1.0, max_value=_MAX_RACK_KW),
    # range: 1U to 60U, whole units (EIA-310 racks are 42U-52U; the tallest common racks are 58U)
    Assumption("rack_usable_units", 42.0, "rack units usable for systems in one rack",
               "gpuplan estimate: 48U rack less PDUs, cable management and top-of-rack patching", "2024",
               min_value=1.0, max_value=60.0, integer=True),
    # ---- fabric -----------------------------------------------------------------------------
    # range: an even count 4-1024 (a fat tree needs down and up ports; the largest switch ASICs
    # have 512 ports at 200 Gb/s); facilities.fabric refuses an odd one
    Assumption("switch_radix_ports", 64.0, "ports per compute-fabric switch (NDR 400 Gb/s)",
               "JAX scaling book GPU chapter: '64-port NDR IB switches' (QM9700 class)", "2025-08",
               min_value=4.0, max_value=1024.0, integer=True),
    Assumption("switch_power_w", 1720.0, "maximum power of one 64-port NDR switch with optics",
               "QM9700 datasheet maximum with active modules, as recalled (UNVERIFIED); QM97xx manual: Class 8 (17 W) OSFP cages", "2023",
               max_value=100_000.0),
    # range: 0 (switches inside the compute racks) to a whole rack
    Assumption("switch_rack_units", 1.0, "rack units of one fabric switch", "NVIDIA QM97xx 1U NDR switch user manual", "2023",
               max_value=60.0),
    # range: 1-8 ports per transceiver (twin-port OSFP: 2; breakout optics up to 8 x 100G)
    Assumption("ports_per_transceiver", 2.0, "logical 400G ports served by one OSFP transceiver",
               "NVIDIA QM97xx manual: each OSFP port consists of 2 logical InfiniBand ports (twin-port 2x400G)", "2023",
               min_value=1.0, max_value=8.0, integer=True),
    Assumption("switch_price_usd", 36000.0, "price of one 64-port NDR switch",
               "FS.com 64-port NDR variant, Aug 2024 (NVIDIA-branded ~50k), per a public H100 cluster cost sheet", "2024-08",
               max_value=_MAX_ITEM_USD),
    Assumption("transceiver_price_usd", 1000.0, "price of one 400G/800G OSFP transceiver",
               "gpuplan estimate (street prices 2024 span ~$700-2,000; no primary source read)", "2024",
               max_value=_MAX_ITEM_USD),
    Assumption("cable_price_usd", 200.0, "price of one fibre patch cable", "gpuplan estimate (no primary source read)", "2024",
               max_value=_MAX_ITEM_USD),
    # ---- power and cooling -----------------------------------------------------------------
    Assumption("storage_power_kw_per_node", 0.25, "share of storage power per compute node",
               f"{_SEED}: 1 kW of storage per rack of 4 DGX H100", "2024", max_value=_MAX_RACK_KW),
    Assumption("pue", 1.3, "power usage effectiveness (facility power / IT power)",
               "gpuplan estimate between new-build (1.1-1.2) and the Uptime Institute 2023 survey average (~1.58)", "2023",
               min_value=1.0, max_value=5.0),
    # range: $0-10/kWh (retail prices are $0.03-0.60/kWh worldwide)
    Assumption("electricity_usd_per_kwh", 0.10, "price of electricity", f"{_SEED}: practice question 10 uses $0.10/kWh", "2024",
               max_value=10.0),
    Assumption("grid_kg_co2_per_kwh", 0.39, "grid carbon intensity",
               "US EIA FAQ: ~0.86 lb CO2 per kWh of US generation in 2022 (= 0.39 kg), as recalled; the world average is "
               "higher (IEA: ~0.46 kg/kWh in 2022): set it for your grid", "2022", max_value=2.0),
    Assumption("air_cooling_max_kw_per_rack", 30.0, "highest rack density for conventional air cooling",
               f"{_SEED}: 'Air cooling: Up to 30-40 kW/rack'", "2024", max_value=_MAX_RACK_KW),
    Assumption("assisted_air_max_kw_per_rack", 50.0, "highest density for air with containment / rear-door heat exchangers",
               f"{_SEED}: 'Liquid cooling: 50+ kW/rack'; {_RA_H100} runs ~41 kW air-cooled racks", "2024",
               max_value=_MAX_RACK_KW),
    Assumption("gpu_idle_power_fraction", 0.10, "board power of a GPU running no math kernels, as a fraction of its TDP",
               "nvidia-smi idle readings widely reported: H100 SXM ~70 W of 700 W, A100 SXM ~50-60 W of 400 W "
               "(NVIDIA publishes no idle figure)", "2024"),
    Assumption("node_overhead_idle_fraction", 0.50, "non-GPU node power (CPUs, memory, NICs, NVSwitches, fans) at idle, "
               "as a fraction of its maximum", "gpuplan estimate (host CPUs and fans idle at roughly half their maximum)", "2024"),
    Assumption("node_overhead_fraction_of_gpu_tdp", 0.82, "non-GPU node power at maximum, per watt of GPU TDP, for a system "
               "without a catalog maximum power",
               "NVIDIA DGX H100 user guide: system max 10.2 kW with 8 x 700 W H100 SXM -> (10.2 - 5.6) / 5.6 = 0.82 "
               "(DGX B200: (14.3 - 8.0) / 8.0 = 0.79; DGX A100: (6.5 - 3.2) / 3.2 = 1.03)", "2023",
               max_value=5.0),  # a ratio, not a share: DGX A100's is above 1
    Assumption("busy_activity_fraction", 1.0, "math-kernel activity of a node while it is busy (1 = nameplate maximum power)",
               f"conservative: nameplate maximum, as the seed's arithmetic uses ({_SEED}); a training run uses its own "
               "activity from the step time", "2024"),
    Assumption("loaded_power_fraction_of_nameplate", 0.76,
               "average node power while busy (training at full load), as a fraction of the node's nameplate "
               "maximum; the energy of `dc power` / `dc tco` uses it (1 = nameplate), provisioning uses nameplate",
               "Newkirk et al. 2025, 'Empirically-Calibrated H100 Node Power Models' (arXiv:2506.14551): even "
               "computationally intensive training on 8-GPU H100 nodes runs at 76% of the 10.2 kW rating; Latif et "
               "al. 2024 (arXiv:2412.08602): peak 8.4 kW (82%) training Llama2-13b on an 8x H100 HGX node",
               "2025-06", max_value=1.0),
    Assumption("energy_utilization_fraction", 0.7,
               "fraction of the year a cluster is busy, for its average draw in `dc power` (`dc tco` and `plan` "
               "take their --utilization)",
               "gpuplan default, the same as `dc tco --utilization`'s", "2024"),
    # ---- reliability (facilities.goodput) ----------------------------------------------------
    Assumption("gpu_interruptions_per_gpu_hour", 419 / (54 * 24 * 16384),
               "unexpected job interruptions per GPU-hour (failures of GPUs, HBM, hosts, network, software)",
               "Llama 3 report (Dubey et al. 2024) sec. 3.3.4: 419 unexpected interruptions in a 54-day snapshot on "
               "16,384 H100 (= 1.97e-5 per GPU-hour; ~78% hardware); Meta RSC-1 (Kokolis et al. 2024) measured ~6x "
               "that on A100 (MTTF 7.9 h at 1,024 GPUs)", "2024-07", max_value=1.0),
    Assumption("storage_write_gbps_per_gpu", 2000.0 / 16384, "sustained checkpoint write bandwidth per GPU (GB/s)",
               "Llama 3 report sec. 3.3.1: Tectonic sustains 2 TB/s for the 16,384-GPU cluster (= 0.122 GB/s per GPU)",
               "2024-07", min_value=1e-6, max_value=_MAX_GPU_STORAGE_GBPS),
    Assumption("storage_read_gbps_per_gpu", 7000.0 / 16384, "checkpoint read bandwidth per GPU on restart (GB/s)",
               "Llama 3 report sec. 3.3.1: Tectonic peaks at 7 TB/s for the 16,384-GPU cluster (= 0.43 GB/s per GPU)",
               "2024-07", min_value=1e-6, max_value=_MAX_GPU_STORAGE_GBPS),
    Assumption("restart_s", 600.0, "time to detect an interruption, replace or drain the node and relaunch the job "
               "(before reading the checkpoint)",
               "gpuplan estimate: Daly's worked examples use R = 10 min; no published fleet figure was found "
               "(../shared/reference/wave3-facts.md section 8)", "2024", max_value=86400.0 * 7),
    # ---- GPU memory -------------------------------------------------------------------------
    Assumption("usable_memory_fraction", USABLE_MEMORY_FRACTION, "fraction of each GPU's memory a plan may use "
               "(the rest is headroom: allocator fragmentation, workspaces, transient peaks); = 1 - --memory-headroom",
               "vLLM gpu_memory_utilization default 0.9; PyTorch caching allocator reserves more than it allocates "
               "(gpuplan.workloads.memory_headroom)", "2025", min_value=0.1, max_value=1.0),
    # ---- cost -------------------------------------------------------------------------------
    Assumption("storage_capex_usd_per_node", 25000.0, "share of the storage system per compute node",
               "gpuplan estimate (no primary source read)", "2024", max_value=_MAX_ITEM_USD),
    Assumption("facility_capex_usd_per_kw", 10000.0, "data-centre build-out per kW of IT load (power, cooling, shell)",
               "gpuplan estimate from industry rules of thumb of ~$7-12M per MW (no primary source read)", "2024",
               max_value=1e6),
    # range: 1-100 years (the residual value divides by it; a building lives decades)
    Assumption("facility_life_years", 15.0, "life of the facility build-out (its unexpired share is residual value)",
               "gpuplan estimate", "2024", min_value=1.0, max_value=100.0),
    Assumption("maintenance_fraction_per_year", 0.10, "hardware support per year, as a fraction of hardware capex",
               "gpuplan estimate; DGX H100 1-year support quoted at ~20% of list price (supercluster.blog)", "2024",
               max_value=1.0),
    Assumption("space_usd_per_rack_month", 0.0, "floor space per rack per month (0 when the facility is owned)",
               "gpuplan default for an owned facility; set to a colocation price to model renting", "2024",
               max_value=_MAX_ITEM_USD),
    Assumption("staff_usd_per_year", 0.0, "operations staff per year (optional)", "gpuplan default: not counted", "2024",
               max_value=_MAX_SUM_USD),
    Assumption("residual_value_fraction", 0.10, "resale value of the hardware at the end of the period",
               "gpuplan estimate (no primary source read)", "2024"),
)

#: system prices (USD per node) used when the catalog has no `price_usd`
SYSTEM_PRICES_USD: dict[str, Assumption] = {
    a.key: a
    for a in (
        Assumption("dgx-h100", 270000.0, "DGX H100 sale price",
                   "SemiAnalysis estimate (May 2023) via epoch-research/training-cost-trends; list $199k base per supercluster.blog", "2023-05"),
        Assumption("dgx-h200", 330000.0, "DGX H200 price", "gpuplan estimate: DGX H100 price + ~20% (UNVERIFIED)", "2024"),
        Assumption("dgx-a100-80gb", 199000.0, "DGX A100 price", "2020 launch press: from $199k (hardware.md section 1.5)", "2020-05"),
        Assumption("dgx-b200", 515000.0, "DGX B200 price", "reseller listings 2024, as recalled (UNVERIFIED)", "2024"),
    )
}

#: GPU-hour prices used when the catalog has no cloud entry for the GPU
CLOUD_USD_PER_GPU_HOUR: dict[str, Assumption] = {
    a.key: a
    for a in (
        Assumption("h100-sxm5-80gb", 3.99, "H100 SXM on-demand", "Lambda on-demand price in a public code table (hardware.md 1.5)", "2025"),
        Assumption("b200", 6.69, "B200 on-demand", "Lambda on-demand price in a public code table (hardware.md 1.5)", "2025"),
        Assumption("h200-sxm-141gb", 10.0, "H200 on-demand", "JAX scaling book: ~$10/hour for an H200 on Google Cloud", "2025-08"),
        Assumption("a100-sxm4-80gb", 32.77 / 8, "A100 on-demand", f"{_SEED}: AWS p4d.24xlarge ~$32/hour for 8 GPUs", "2024"),
    )
}


@dataclass(frozen=True)
class Assumptions:
    """The full set in use: defaults plus overrides. Attribute access gives the value
    (`a.pue` -> 1.3); `a.rows()` lists every figure with its source for the report."""

    items: Mapping[str, Assumption] = field(default_factory=lambda: {a.key: _bounded(a) for a in _DEFAULTS})

    def __getattr__(self, key: str) -> float:
        items = object.__getattribute__(self, "items")
        if key in items:
            return items[key].value
        raise AttributeError(key)

    def get(self, key: str) -> Assumption:
        return self.items[key]

    def with_overrides(self, overrides: Mapping[str, float] | None = None, source: str = "user override") -> "Assumptions":
        """A copy with some values replaced; an unknown key is an InputError listing the known ones."""
        if not overrides:
            return self
        items = dict(self.items)
        for key, value in overrides.items():
            key = RENAMED_KEYS.get(key, key)
            if key in RETIRED_KEYS:
                raise InputError(f"set: '{key}' is no longer an assumption: {RETIRED_KEYS[key]}", field="set")
            if key not in items:
                raise InputError(f"set: unknown assumption '{key}'; known: {', '.join(sorted(items))}", field="set")
            items[key] = replace(items[key], value=checked_value(items[key], value), source=source, date="(given)")
        return Assumptions(items)

    def values(self) -> dict[str, float]:
        """{key: value} of every figure in use (the `assumptions` object of `plan --json`)."""
        return {k: a.value for k, a in self.items.items()}

    def rows(self, keys: Iterable[str] | None = None) -> list[dict]:
        wanted = list(keys) if keys is not None else list(self.items)
        return [self.items[k].as_row() for k in wanted]


#: keys renamed since an earlier release: `--set OLD=...` still works
RENAMED_KEYS = {"busy_power_fraction": "busy_activity_fraction"}
#: keys removed, with what replaced them
RETIRED_KEYS = {
    "idle_power_fraction": "idle power follows from the power model; set gpu_idle_power_fraction and "
                           "node_overhead_idle_fraction (see gpuplan.facilities.power)",
}


def _bounded(a: Assumption) -> Assumption:
    """Fractions (`*_fraction`) lie in [0, 1] unless the default says otherwise."""
    if a.key.endswith("_fraction") and a.max_value == math.inf:
        return replace(a, max_value=1.0)
    return a


def checked_value(a: Assumption, value: float) -> float:
    """`value` (a number, or text with ASCII digits) as a float if it is finite and within
    [min_value, max_value] of `a` (a whole number when `a.integer`); else an InputError naming the
    key and its range (one line). The one check of every assumption a user gives."""
    return float(parse_number(value, a.key, integer=a.integer, ge=a.min_value,
                              le=a.max_value if a.max_value != math.inf else None))


DEFAULT_ASSUMPTIONS = Assumptions()


def assumptions_from_options(pairs: Iterable[str] | None = None, **named: float | None) -> Assumptions:
    """The defaults with `--set KEY=VALUE` pairs and named options (`pue=1.2`, ...; None = not given)
    applied; a named option wins over a `--set` of the same key. Every command builds its set here."""
    overrides = parse_overrides(pairs)
    overrides.update({k: v for k, v in named.items() if v is not None})
    return DEFAULT_ASSUMPTIONS.with_overrides(overrides)


def parse_overrides(pairs: Iterable[str] | None) -> dict[str, float]:
    """`["pue=1.2", "switch_price_usd=50000"]` -> {"pue": 1.2, ...}; malformed pairs are InputErrors."""
    out: dict[str, float] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or not is_ascii_number(value):
            raise InputError(f"set: expected KEY=NUMBER (ASCII digits 0-9), got '{show(pair, 60)[1:-1]}'", field="set",
                             allowed="KEY=NUMBER")
        out[key.strip()] = float(parse_number(value, key.strip()))  # its range: checked_value
    return out


def memory_scope(assumptions: "Assumptions"):
    """A context in which plans use `usable_memory_fraction` of GPU memory when it was given with
    `--set` (a no-op for the default, so an outer `--memory-headroom` stays in force)."""
    import contextlib

    from gpuplan import knobs

    a = assumptions.get("usable_memory_fraction")
    if a.source != "user override":
        return contextlib.nullcontext()
    return knobs.overridden({USABLE_MEMORY_KNOB: a.value})


def merge_alias(value: float | None, old_value: float | None, name: str, old_name: str) -> float | None:
    """One option given under its name or its hidden old spelling (`--grid-kg-per-kwh` for
    `--grid-kg-co2-per-kwh`); both with different values is an InputError."""
    if old_value is None:
        return value
    if value is not None and value != old_value:
        raise InputError(f"{name}: given twice ({value} and {old_name} {old_value}); give one", field=name.lstrip("-"))
    return old_value
