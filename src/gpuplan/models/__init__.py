"""Models: specs from Hugging Face config.json / bundled names / validation rows. The counts built on
them (parameters, FLOPs per token, KV-cache bytes per token) live in `gpuplan.layers`, as sums over
the operator inventory."""

from gpuplan.models.arch_row import model_from_arch_row
from gpuplan.models.bundled import bundled_model_names, bundled_model_source, load_model
from gpuplan.models.hf_config import model_from_hf_config

__all__ = ["bundled_model_names", "bundled_model_source", "load_model", "model_from_arch_row", "model_from_hf_config"]
