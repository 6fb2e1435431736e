"""Gpu.family (the one reading of the architecture string) and Gpu.sm_count_or_default (the one SM
fallback), against the catalog's entries read by hand."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.specs.gpu import DEFAULT_SM_COUNT, GPU_FAMILIES, architecture_family

# catalog/data/gpus.toml `architecture` of each part, read by hand: the family its text names
EXPECTED_FAMILY = {
    "v100-sxm2-32gb": "volta",  # "Volta GV100"
    "a100-sxm4-80gb": "ampere",  # "Ampere GA100"
    "a10": "ampere",  # "Ampere GA102"
    "jetson-agx-orin-64gb": "ampere",  # "Ampere (Orin SoC)"
    "l40s": "ada",  # "Ada Lovelace AD102"
    "h100-sxm5-80gb": "hopper",  # "Hopper GH100"
    "gh200-96gb": "hopper",  # "Hopper GH100 + Grace"
    "b200": "blackwell",  # "Blackwell"
    "gb200": "blackwell",  # "Blackwell + Grace"
    "rtx-pro-6000": "blackwell",  # "Blackwell GB202"
    "mi250x": "cdna2",  # "CDNA2"
    "mi300x": "cdna3",  # "CDNA3"
    "mi355x": "cdna4",  # "CDNA4"
    "tpu-v5p": "tpu",  # "TPU v5p"
}


@pytest.mark.parametrize("gpu_id", sorted(EXPECTED_FAMILY))
def test_family_of_catalog_parts(gpu_id):
    assert load_catalog().gpu(gpu_id).family == EXPECTED_FAMILY[gpu_id]


def test_every_catalog_part_has_a_family():
    # each catalog architecture string names one of GPU_FAMILIES (a new family must be added there)
    assert all(g.family in GPU_FAMILIES for g in load_catalog().gpus.values())


def test_unknown_architecture_has_no_family():
    assert architecture_family("Some Future Arch") is None
    assert architecture_family(None) is None


@given(st.sampled_from(GPU_FAMILIES), st.text(alphabet="xyz0123456789 ()+-", max_size=12))
def test_family_is_read_case_insensitively_anywhere_in_the_string(family, suffix):
    # "NVIDIA Hopper GH100 ..." and "HOPPER" name the same family as "hopper"
    assert architecture_family(f"NVIDIA {family.upper()} {suffix}") == family


def test_sm_count_or_default():
    cat = load_catalog()
    # catalog sm_count = 132 for H100 SXM5 (S_SCALEBOOK "132 SMs/chip"); 148 for B200
    assert cat.gpu("h100-sxm5-80gb").sm_count_or_default == 132
    assert cat.gpu("b200").sm_count_or_default == 148
    # the H200 NVL entry gives no SM count: the default, H100 SXM's 132
    assert cat.gpu("h200-nvl-141gb").sm_count is None
    assert cat.gpu("h200-nvl-141gb").sm_count_or_default == DEFAULT_SM_COUNT == 132
