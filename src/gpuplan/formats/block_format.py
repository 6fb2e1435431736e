"""Block-scaled format definitions: element format, block size and scale kind of each name.

MX (OCP MX v1.0): k = 32 elements share one E8M0 scale (MXFP8 E4M3/E5M2, MXFP6 E3M2/E2M3, MXFP4,
MXINT8). NVFP4 (NVIDIA Transformer Engine nvfp4.rst): k = 16 E2M1 elements, E4M3 block scale and an
FP32 per-tensor scale. Storage per element: b + 8 / k bits. Quantisation itself lives in `block`
(numpy reference) and `kernels` (compiled); both read the formats from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gpuplan.errors import InputError
from gpuplan.formats.element import ELEMENTS, INT8, IntElement, MiniFloat


class ScaleKind(str, Enum):
    E8M0 = "e8m0"  # power-of-two scale, OCP MX
    E4M3 = "e4m3"  # FP8 scale with mantissa (NVFP4), times an FP32 per-tensor scale


@dataclass(frozen=True)
class BlockFormat:
    name: str
    element: MiniFloat | IntElement
    block_size: int
    scale_kind: ScaleKind

    @property
    def element_bits(self) -> int:
        return self.element.bits

    @property
    def scale_bits(self) -> int:
        return 8

    @property
    def bits_per_element(self) -> float:
        """Storage per element including the block scale: b + 8 / k (MXFP4 4.25, NVFP4 4.5)."""
        return self.element.bits + self.scale_bits / self.block_size


BLOCK_FORMATS: dict[str, BlockFormat] = {
    f.name: f
    for f in (
        BlockFormat("mxfp8_e4m3", ELEMENTS["e4m3"], 32, ScaleKind.E8M0),
        BlockFormat("mxfp8_e5m2", ELEMENTS["e5m2"], 32, ScaleKind.E8M0),
        BlockFormat("mxfp6_e3m2", ELEMENTS["e3m2"], 32, ScaleKind.E8M0),
        BlockFormat("mxfp6_e2m3", ELEMENTS["e2m3"], 32, ScaleKind.E8M0),
        BlockFormat("mxfp4", ELEMENTS["e2m1"], 32, ScaleKind.E8M0),
        BlockFormat("mxint8", INT8, 32, ScaleKind.E8M0),
        BlockFormat("nvfp4", ELEMENTS["e2m1"], 16, ScaleKind.E4M3),
    )
}
BLOCK_ALIASES = {"mxfp8": "mxfp8_e4m3", "mxfp6": "mxfp6_e3m2", "mxfp4_e2m1": "mxfp4"}


def block_format(name: str) -> BlockFormat:
    key = BLOCK_ALIASES.get(str(name).lower(), str(name).lower())
    if key not in BLOCK_FORMATS:
        raise InputError(f"unknown block format '{name}'; allowed: {', '.join(BLOCK_FORMATS)}", field="formats")
    return BLOCK_FORMATS[key]


__all__ = ["BLOCK_ALIASES", "BLOCK_FORMATS", "BlockFormat", "ScaleKind", "block_format"]
