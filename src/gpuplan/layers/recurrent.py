"""The cores of the recurrent sequence mixers: what a Mamba-2, Gated DeltaNet, short-convolution or
RG-LRU block holds besides its projection GEMMs (which are `layers.operators.Linear`).

Each core declares, like every operator (layers.operators):
- `params`: its non-GEMM weights (depthwise conv, A_log / D / dt_bias, the gated norm);
- `forward_flops(seq_len)`: per token, the matmul-like work of its scan and the depthwise conv
  (2 FLOPs per multiply-accumulate; elementwise gates, exp and softplus carry 0, as everywhere);
- `kv_cache_elements` = 0: nothing grows with the context;
- `conv_state_elements` + `recurrent_state_elements`: the constant state one *sequence* keeps per
  layer while it is served, as vLLM allocates it (vllm/model_executor/layers/mamba/mamba_utils.py
  MambaStateShapeCalculator): a conv window of (kernel - 1) past inputs per channel, and the
  recurrent state. Its bytes do not depend on the context length.

Sources (transformers modeling code, vLLM's state shapes, the kernels that run the scans):
- Mamba-2: transformers modeling_mamba2.py Mamba2Mixer (= NemotronHMamba2Mixer, FalconH1Mixer):
  conv1d over conv_dim = d_inner + 2 G N channels, kernel K, bias with use_conv_bias; A_log, D,
  dt_bias of H each; RMSNormGated of d_inner. State: conv (K - 1) x conv_dim, ssm H x P x N
  (vLLM `mamba2_state_shape`). Scan FLOPs: the chunked SSD algorithm (Dao & Gu 2024, "Transformers
  are SSMs", sec. 6; mamba_ssm ops/triton/ssd_combined.py) per token, chunk Q = min(chunk_size, s):
  chunk states B^T x (2 N P per head), C B^T inside a chunk (2 Q N per group), the diagonal
  block (C B^T o L) x (2 Q P per head) and the state output C h (2 N P per head):
  H (4 N P + 2 Q P) + G 2 Q N.
- Gated DeltaNet: transformers modeling_qwen3_next.py Qwen3NextGatedDeltaNet: conv1d over
  conv_dim = 2 key_dim + value_dim, no bias; A_log and dt_bias of Hv; RMSNormGated of d_v (one
  weight shared by the heads). State: conv (K - 1) x conv_dim, recurrent Hv x d_v x d_k (vLLM
  `gated_delta_net_state_shape`). Scan FLOPs: flash-linear-attention chunk_gated_delta_rule_fwd,
  chunk C = 64 (`chunk_local_cumsum(g, chunk_size=64)`), per token and value head (q, k repeated to
  Hv heads): K K^T 2 C d_k, the WY factors w = A (beta k), u = A (beta v) 2 C (d_k + d_v), the
  state passes v_new = u - w S and S += K^T v_new 4 d_k d_v, the output q S 2 d_k d_v and
  (q k^T o M) v_new 2 C (d_k + d_v): 6 d_k d_v + 2 C (3 d_k + 2 d_v), C = min(64, s). The
  C x C triangular solve (~C^2 / 3 per token) is left out.
- short convolution: transformers modeling_lfm2.py Lfm2ShortConv: depthwise conv of h channels,
  kernel L (conv_L_cache), bias with conv_bias. State: conv (L - 1) x h (vLLM
  `short_conv_state_shape`). FLOPs: the conv, 2 L h.
- RG-LRU: transformers modeling_recurrent_gemma.py RecurrentGemmaRecurrentBlock: conv_1d of
  lru_width channels with bias (nn.Conv1d default), RecurrentGemmaRglru.recurrent_param of
  lru_width (its block-diagonal gates are Linear operators). State: conv (K - 1) x lru_width and
  the lru_width recurrent state (RecurrentGemmaRecurrentBlock._setup_cache). FLOPs: the conv, 2 K w;
  the diagonal recurrence is elementwise.
backward = 2 x forward for every core (the same convention as the attention core's).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.specs.mixers import GatedDeltaNetSpec, Mamba2Spec, RgLruSpec, ShortConvSpec

#: flash-linear-attention's chunk length of chunk_gated_delta_rule (chunk_local_cumsum(g, chunk_size=64))
GATED_DELTA_RULE_CHUNK = 64


def depthwise_conv_flops(channels: int, kernel: int) -> float:
    """Per-token FLOPs of a causal depthwise conv of `kernel` taps over `channels`: 2 K C."""
    return 2.0 * kernel * channels


class RecurrentCore:
    """What every recurrent core answers the same way: no KV cache, no GEMM weights a token
    multiplies (its projections are Linear operators), backward = 2 x forward."""

    kv_cache_elements = 0
    active_params = 0.0

    def forward_flops(self, seq_len: int = 1, causal: bool = True) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def backward_flops(self, seq_len: int = 1, causal: bool = True) -> float:
        return 2.0 * self.forward_flops(seq_len, causal)

    @property
    def state_elements(self) -> int:
        """Elements one sequence keeps for this layer, whatever its length."""
        return self.conv_state_elements + self.recurrent_state_elements  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Mamba2Scan(RecurrentCore):
    """The Mamba-2 SSD core: conv + selective scan of `spec` (module docstring)."""

    name: str
    spec: Mamba2Spec

    @property
    def params(self) -> int:
        s = self.spec
        conv = s.conv_dim * s.conv_kernel + (s.conv_dim if s.conv_bias else 0)
        return conv + 3 * s.heads + (s.inner if s.gated_norm else 0)  # + A_log, D, dt_bias (+ norm)

    def forward_flops(self, seq_len: int = 1, causal: bool = True) -> float:
        s = self.spec
        q = min(s.chunk_size, int(seq_len))
        scan = s.heads * (4.0 * s.state_size * s.head_dim + 2.0 * q * s.head_dim) + s.groups * 2.0 * q * s.state_size
        return depthwise_conv_flops(s.conv_dim, s.conv_kernel) + scan

    @property
    def conv_state_elements(self) -> int:
        return (self.spec.conv_kernel - 1) * self.spec.conv_dim

    @property
    def recurrent_state_elements(self) -> int:
        return self.spec.heads * self.spec.head_dim * self.spec.state_size


@dataclass(frozen=True)
class GatedDeltaRule(RecurrentCore):
    """The Gated DeltaNet core: conv + chunked gated delta rule of `spec` (module docstring)."""

    name: str
    spec: GatedDeltaNetSpec

    @property
    def params(self) -> int:
        s = self.spec
        return s.conv_dim * s.conv_kernel + 2 * s.value_heads + s.value_head_dim  # conv, A_log + dt_bias, norm

    def forward_flops(self, seq_len: int = 1, causal: bool = True) -> float:
        s = self.spec
        c = min(GATED_DELTA_RULE_CHUNK, int(seq_len))
        dk, dv = s.key_head_dim, s.value_head_dim
        per_head = 6.0 * dk * dv + 2.0 * c * (3 * dk + 2 * dv)
        return depthwise_conv_flops(s.conv_dim, s.conv_kernel) + s.value_heads * per_head

    @property
    def conv_state_elements(self) -> int:
        return (self.spec.conv_kernel - 1) * self.spec.conv_dim

    @property
    def recurrent_state_elements(self) -> int:
        return self.spec.value_heads * self.spec.value_head_dim * self.spec.key_head_dim


@dataclass(frozen=True)
class ShortConv(RecurrentCore):
    """LFM2's gated short convolution core over `channels` (the hidden size)."""

    name: str
    spec: ShortConvSpec
    channels: int

    @property
    def params(self) -> int:
        return self.channels * self.spec.conv_kernel + (self.channels if self.spec.bias else 0)

    def forward_flops(self, seq_len: int = 1, causal: bool = True) -> float:
        return depthwise_conv_flops(self.channels, self.spec.conv_kernel)

    @property
    def conv_state_elements(self) -> int:
        return (self.spec.conv_kernel - 1) * self.channels

    recurrent_state_elements = 0


@dataclass(frozen=True)
class RgLruScan(RecurrentCore):
    """RecurrentGemma's conv + RG-LRU recurrence over `spec.width` channels."""

    name: str
    spec: RgLruSpec

    @property
    def params(self) -> int:
        w = self.spec.width
        return w * self.spec.conv_kernel + w + w  # conv weight + conv bias + recurrent_param

    def forward_flops(self, seq_len: int = 1, causal: bool = True) -> float:
        return depthwise_conv_flops(self.spec.width, self.spec.conv_kernel)

    @property
    def conv_state_elements(self) -> int:
        return (self.spec.conv_kernel - 1) * self.spec.width

    @property
    def recurrent_state_elements(self) -> int:
        return self.spec.width


__all__ = ["GATED_DELTA_RULE_CHUNK", "GatedDeltaRule", "Mamba2Scan", "RecurrentCore", "RgLruScan", "ShortConv",
           "depthwise_conv_flops"]
