"""Sequence mixers other than softmax attention, and the per-layer pattern of a hybrid model.

A layer of a hybrid model has zero, one or two sequence mixers (Falcon-H1 runs attention and a
Mamba-2 mixer side by side) and zero or one FFN (Nemotron-H blocks are a mixer *or* an MLP). The
shapes below are the config fields of the transformers modeling code each one is read from
(gpuplan.models.hybrid_config); the operators built from them live in gpuplan.layers.recurrent.
"""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from gpuplan.specs._base import Spec
from gpuplan.validation_rules import MAX_WIDTH


class MixerKind(str, Enum):
    """What mixes information across positions in a layer."""

    ATTENTION = "attention"  # softmax attention: KV cache per token (GQA / MHA / MQA / MLA, windows)
    MAMBA2 = "mamba2"  # Mamba-2 SSD mixer (Dao & Gu 2024): conv state + (heads x head_dim x state) per sequence
    GATED_DELTANET = "gated_deltanet"  # Qwen3-Next linear attention (Yang et al. 2024): conv + (v_heads x d_v x d_k)
    SHORT_CONV = "short_conv"  # LFM2 gated short convolution: a (kernel - 1) x hidden conv state
    RG_LRU = "rg_lru"  # Griffin / RecurrentGemma recurrent block: conv state + lru_width recurrent state


class FfnSlot(str, Enum):
    """The channel mixer of a layer."""

    NONE = "none"  # Nemotron-H mixer-only blocks ("M", "*")
    DENSE = "dense"
    MOE = "moe"


class Mamba2Spec(Spec):
    """Mamba-2 mixer (transformers Mamba2Mixer / NemotronHMamba2Mixer / FalconH1Mixer):
    d_inner = heads x head_dim, conv_dim = d_inner + 2 groups state_size,
    in_proj h -> d_inner + conv_dim + heads."""

    heads: int = Field(gt=0, le=MAX_WIDTH)
    head_dim: int = Field(gt=0, le=MAX_WIDTH)
    state_size: int = Field(gt=0, le=MAX_WIDTH)  # N, d_state
    groups: int = Field(gt=0, le=MAX_WIDTH)  # n_groups of B and C
    conv_kernel: int = Field(gt=0, le=MAX_WIDTH)
    chunk_size: int = Field(default=256, gt=0, le=MAX_WIDTH)  # SSD chunk Q of the chunked scan
    in_proj_bias: bool = False
    out_proj_bias: bool = False
    conv_bias: bool = True
    gated_norm: bool = True  # RMSNormGated over d_inner before out_proj (Falcon-H1: mamba_rms_norm)

    @property
    def inner(self) -> int:
        return self.heads * self.head_dim

    @property
    def conv_dim(self) -> int:
        return self.inner + 2 * self.groups * self.state_size


class GatedDeltaNetSpec(Spec):
    """Qwen3-Next Gated DeltaNet (transformers Qwen3NextGatedDeltaNet): key_dim = key_heads x
    key_head_dim, value_dim = value_heads x value_head_dim, conv over 2 key_dim + value_dim."""

    key_heads: int = Field(gt=0, le=MAX_WIDTH)
    key_head_dim: int = Field(gt=0, le=MAX_WIDTH)
    value_heads: int = Field(gt=0, le=MAX_WIDTH)
    value_head_dim: int = Field(gt=0, le=MAX_WIDTH)
    conv_kernel: int = Field(gt=0, le=MAX_WIDTH)

    @property
    def key_dim(self) -> int:
        return self.key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.value_heads * self.value_head_dim

    @property
    def conv_dim(self) -> int:
        return 2 * self.key_dim + self.value_dim


class ShortConvSpec(Spec):
    """LFM2 short convolution (transformers Lfm2ShortConv): in_proj h -> 3h, depthwise conv of
    `conv_kernel` taps (config conv_L_cache), out_proj h -> h; biases with conv_bias."""

    conv_kernel: int = Field(gt=0, le=MAX_WIDTH)
    bias: bool = False


class RgLruSpec(Spec):
    """Griffin recurrent block of RecurrentGemma (transformers RecurrentGemmaRecurrentBlock):
    linear_x / linear_y h -> width, depthwise conv, RG-LRU with block-diagonal gates of `blocks`
    blocks (num_attention_heads), linear_out width -> h; all with biases."""

    width: int = Field(gt=0, le=MAX_WIDTH)  # lru_width
    blocks: int = Field(gt=0, le=MAX_WIDTH)
    conv_kernel: int = Field(gt=0, le=MAX_WIDTH)  # conv1d_width

    @property
    def block_width(self) -> int:
        return self.width // self.blocks


__all__ = ["FfnSlot", "GatedDeltaNetSpec", "Mamba2Spec", "MixerKind", "RgLruSpec", "ShortConvSpec"]
