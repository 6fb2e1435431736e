"""Measured hardware ceilings (catalog/data/ceilings.toml, gpuplan.catalog.ceilings) and how
primitives.efficiency reads them: each GPU from its own published measurement."""

from __future__ import annotations

import pytest

from gpuplan import knobs
from gpuplan.catalog import ceilings, load_catalog
from gpuplan.primitives.efficiency import attention_ceiling, hbm_efficiency, matmul_ceiling


def _catalog_part(key: str):
    cat = load_catalog()
    if key in cat.gpus:
        return cat.gpus[key]
    hits = [g for gid, g in cat.gpus.items() if gid.startswith(key)]
    return hits[0] if hits else None


def test_every_gemm_peak_is_the_catalogs_within_one_percent():
    # catalog peak x ceiling must reproduce the measured TFLOP/s: each entry's peak within 1% of the
    # catalog's dense peak of that dtype (parts the catalog lacks, Gaudi, are skipped)
    checked = 0
    for m in ceilings.TABLE["gemm"]:
        gpu = _catalog_part(m.key)
        if gpu is None:
            continue
        assert m.peak == pytest.approx(gpu.peak(m.dtype), rel=0.01), m.key
        checked += 1
    assert checked >= 18


def test_every_hbm_peak_is_the_catalogs():
    for m in ceilings.TABLE["hbm"]:
        assert m.peak == _catalog_part(m.key).memory_bandwidth_gbps


def test_each_entry_is_a_knob_with_its_source():
    # MI300X bf16, mamf-finder: 668.4 of 1300 TFLOP/s
    k = knobs.REGISTRY["efficiency.matmul_ceiling.mi300x.bf16"]
    assert k.default == pytest.approx(668.4 / 1300) and "MLE_ACC" in k.source and "mamf-finder" in k.source
    assert knobs.REGISTRY["efficiency.hbm_stream.mi300x"].default == pytest.approx(4110 / 5300)
    # the generation's flagship stands for its parts without a measurement
    assert knobs.REGISTRY["efficiency.matmul_ceiling.family.cdna4"].default == pytest.approx(1565 / 2516.6)


def test_amd_parts_start_from_their_own_measurements():
    cat = load_catalog()
    mi300x, mi355x, h100 = cat.gpu("mi300x"), cat.gpu("mi355x"), cat.gpu("h100-sxm5-80gb")
    # FP8 on MI300X: its own FP8/BF16 ratio (AMD hipBLASLt 1273 / 708) on the mamf-finder BF16 668.4
    # = 1201.8 TFLOP/s of 2615, not BF16 x H100's ratio (0.5142 x 0.8826 = 0.4538)
    assert matmul_ceiling(mi300x, "fp8") == pytest.approx(1201.8 / 2615)
    assert 668.4 * 1273 / 708 == pytest.approx(1201.8, abs=0.05)
    # MI355X BF16: 1565 TFLOP/s measured against the catalog's 2516.6 peak (the table's 2300 'theory'
    # would give 0.680 and a modelled 1712 TFLOP/s, 9% above the measurement)
    assert matmul_ceiling(mi355x, "bf16") * mi355x.peak("bf16") == pytest.approx(1565.0)
    # HBM: 0.80 on H100 SXM (aiconfigurator), scaled by each part's BabelStream copy fraction over
    # H100's: MI300X 0.80 x (4110/5300) / (2900/3350) = 0.7166; H100 itself 0.80
    assert hbm_efficiency(h100) == pytest.approx(0.80)
    assert hbm_efficiency(mi300x) == pytest.approx(0.80 * (4110 / 5300) / (2900 / 3350))
    # H200 / H100 achievable bandwidth = their measured copy bandwidths' ratio 4010 / 2900
    h200 = cat.gpu("h200-sxm-141gb")
    ratio = (h200.memory_bandwidth_gbps * hbm_efficiency(h200)) / (h100.memory_bandwidth_gbps * hbm_efficiency(h100))
    assert ratio == pytest.approx(4010 / 2900)


def test_fallbacks_by_generation_and_memory_type():
    cat = load_catalog()
    # MI325X has no BabelStream entry: CDNA3's (MI300X's) copy fraction, an HBM part of the generation
    assert hbm_efficiency(cat.gpu("mi325x")) == pytest.approx(hbm_efficiency(cat.gpu("mi300x")))
    # A10 is Ampere but GDDR6: no HBM measurement applies, efficiency.hbm as is
    assert hbm_efficiency(cat.gpu("a10")) == pytest.approx(0.80)
    # B200 has no HBM entry and no Blackwell one: efficiency.hbm as is
    assert hbm_efficiency(cat.gpu("b200")) == pytest.approx(0.80)
    # attention: FlashAttention-3 on Hopper 0.66; CDNA3 has no entry: the default 0.60
    assert attention_ceiling(cat.gpu("h200-sxm-141gb")) == pytest.approx(0.66)
    assert attention_ceiling(cat.gpu("mi300x")) == pytest.approx(0.60)
    # an fp8 attention core: the 16-bit ceiling x FlashAttention-3's fp8 / bf16 fractions of the H100
    # peaks (arXiv:2407.08608: 1200 of 1979 TFLOP/s against 740 of 989): 0.66 x 0.8104 = 0.5349
    assert attention_ceiling(cat.gpu("h200-sxm-141gb"), "fp8") == pytest.approx(0.5349, abs=1e-4)
    assert attention_ceiling(cat.gpu("h200-sxm-141gb"), "bf16") == pytest.approx(0.66)


def test_an_override_reaches_the_part():
    mi300x = load_catalog().gpu("mi300x")
    with knobs.overridden({"efficiency.hbm_stream.mi300x": 2900 / 3350}):
        assert hbm_efficiency(mi300x) == pytest.approx(0.80)


def test_a_table_with_an_unknown_key_is_refused(tmp_path):
    bad = tmp_path / "ceilings.toml"
    bad.write_text('[[hbm]]\ngpu = "x"\nachieved_gbps = 1\npeak_gbps = 2\nsource = "s"\nkernel = "copy"\n')
    with pytest.raises(ValueError, match=r"unknown \['kernel'\]"):
        ceilings.load_table(bad)


def test_an_fp8_attention_core_reaches_fa3s_share_of_every_familys_ceiling():
    # every part: fp8 = its 16-bit attention ceiling x FlashAttention-3's fp8 / bf16 fractions of the
    # H100 peaks, (1200 / 1979) / (740 / 989) = 0.8104 (arXiv:2407.08608 abstract); 16-bit formats unchanged
    ratio = (1200 / 1979) / (740 / 989)
    for gpu in load_catalog().gpus.values():
        bf16 = attention_ceiling(gpu)
        assert attention_ceiling(gpu, "fp8") == pytest.approx(bf16 * ratio)
        assert attention_ceiling(gpu, "fp16") == attention_ceiling(gpu, "bf16") == bf16
    # the ratio is a knob: a calibration reaches it
    with knobs.overridden({"efficiency.fp8_over_bf16_attention_ceiling": 1.0}):
        h200 = load_catalog().gpu("h200-sxm-141gb")
        assert attention_ceiling(h200, "fp8") == pytest.approx(0.66)


def test_fp4_gemm_ceilings_from_the_published_b200_sweep():
    cat = load_catalog()
    # B200's own FP4 x FP4 measurement: cuBLASLt 5239 of 9000 TFLOP/s at 8192^3
    # (deepseek-ai/DeepGEMM PR #348 table) = 0.5821
    assert matmul_ceiling(cat.gpu("b200"), "fp4") == pytest.approx(5239 / 9000)
    # a part without an fp4 measurement: its bf16 ceiling x B200's fp4/bf16 ratio,
    # (5239 / 9000) / (1745 / 2250) = 0.7506; GB200 bf16 1822 / 2500 = 0.7288 -> 0.5470
    assert matmul_ceiling(cat.gpu("gb200"), "fp4") == pytest.approx(0.5470, abs=1e-4)
    # fp6 keeps the H100 fp8/bf16 ratio (1402.6 / 1979) / (794.5 / 989) = 0.8823: GB200 0.7288 x 0.8823 = 0.6430
    assert matmul_ceiling(cat.gpu("gb200"), "fp6") == pytest.approx(0.6430, abs=1e-4)
    with knobs.overridden({"efficiency.fp4_over_bf16_ceiling": 1.0}):
        assert matmul_ceiling(cat.gpu("gb200"), "fp4") == pytest.approx(1822 / 2500)


def test_sustained_gemm_shares_from_the_long_warm_up_sweeps():
    # Azure AI-benchmarking-guide cuBLASLt sweeps (10,000 warm-up iterations), best of each table, over the
    # mamf-finder best of the same part and dtype: GB200 FP8 2906.9 / 3615.6 = 0.80399; A100 256.5 / 271.2
    # = 0.94580 (the reference); H100 FP8 1382.2 / 1402.6 = 0.98546
    reg = knobs.REGISTRY
    assert reg["efficiency.sustained_gemm.gb200.fp8"].default == pytest.approx(0.80399, abs=1e-5)
    assert reg["efficiency.sustained_gemm.family.blackwell"].default == pytest.approx(0.80399, abs=1e-5)
    assert reg["efficiency.sustained_gemm.reference"].default == pytest.approx(0.94580, abs=1e-5)
    assert reg["efficiency.sustained_gemm.family.hopper"].default == pytest.approx(0.98546, abs=1e-5)
    assert "AZ_GEMM" in reg["efficiency.sustained_gemm.gb200.fp8"].source
    assert "MLE_ACC" in reg["efficiency.sustained_gemm.gb200.fp8"].source  # the short-run figure's source


def test_every_sustained_entry_stands_against_a_short_run_entry_and_below_it():
    short = {(m.key, m.dtype): m.achieved for m in ceilings.TABLE["gemm"]}
    assert len(ceilings.TABLE["gemm_sustained"]) >= 4
    for m in ceilings.TABLE["gemm_sustained"]:
        assert m.peak == short[(m.key, m.dtype)]
        assert 0.5 < m.fraction <= 1.0, m.key  # a steady load never beats the short-run best


def test_a_sustained_entry_without_its_short_run_entry_is_refused(tmp_path):
    bad = tmp_path / "ceilings.toml"
    bad.write_text('[[gemm_sustained]]\ngpu = "x"\ndtype = "bf16"\nsustained_tflops = 1\nsource = "s"\n')
    with pytest.raises(ValueError, match=r"gemm_sustained\]\] x bf16: no \[\[gemm\]\] entry"):
        ceilings.load_table(bad)


def test_blackwell_trains_at_its_measured_sustained_share():
    # Blackwell's sustained tensor-core rate relative to an A100's is the measured GB200 share over the
    # A100's, 0.80399 / 0.94580 = 0.85006, no fitted knob (the fitted ratio was 0.797)
    from gpuplan.workloads.training.step.compute import measured_sustained_ratio, sustained_clock_ratio

    cat = load_catalog()
    assert "training.sustained_gemm_ratio.blackwell" not in knobs.REGISTRY
    for gpu_id in ("b200", "gb200", "b300"):  # B200 / B300 without a measurement: the generation's (GB200)
        assert sustained_clock_ratio(cat.gpu(gpu_id)) == pytest.approx(0.85006, abs=1e-5)
    assert measured_sustained_ratio(cat.gpu("a100-sxm4-80gb")) == 1.0
    assert measured_sustained_ratio(cat.gpu("mi300x")) == 1.0  # no measurement: 1
    # Hopper: 0.98546 / 0.94580 = 1.04193 (H100 does not lose more to a steady load than A100); its
    # fitted residual (0.8542) carries the rest of Hopper's fitted 0.89
    assert measured_sustained_ratio(cat.gpu("h200-sxm-141gb")) == pytest.approx(1.04193, abs=1e-5)
    assert sustained_clock_ratio(cat.gpu("h100-sxm5-80gb")) == pytest.approx(1.04193 * 0.8542, abs=1e-4)
