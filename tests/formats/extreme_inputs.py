"""Inputs that exercise every special case of a block quantizer (shared by the kernel tests)."""

import numpy as np


def extreme_blocks(seed: int) -> np.ndarray:
    """256 x 512 float32: per-row magnitudes spread over e^(+-8 sigma), with NaN, +-inf, a zero and a
    negative-zero block, float32 subnormals and FLT_MAX in rows 0-6; row 7 is left to the caller."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((256, 512)) * np.exp(rng.standard_normal((256, 1)) * 8)).astype(np.float32)
    x[0, 3], x[1, 40], x[2, 7] = np.nan, np.inf, -np.inf
    x[3, :64] = 0.0
    x[4, :32] = -0.0
    x[5, :32] = np.float32(1e-40)  # float32 subnormals
    x[6, :32] = np.float32(3.4028235e38)
    return x
