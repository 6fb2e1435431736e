"""THE GEMM-precision rule (specs.dtypes.gemm_compute_dtype) against the engines' and
TransformerEngine's kernel choices, its invariants, and its callers: serving, training and kernel
analysis all resolve through it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.errors import InputError
from gpuplan.kernel import roofline
from gpuplan.models import load_model
from gpuplan.specs import Precision
from gpuplan.specs.dtypes import FORMATS, StoredFormat, Weights, gemm_compute_dtype
from gpuplan.specs.gpu import DTYPES
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.operators import StepTimeModel
from gpuplan.workloads.training.step.inputs import StepContext

CAT = load_catalog()
STORED, CAST = Weights.STORED, Weights.CAST


def _rule(gpu_id, weight, activation, weights):
    return CAT.gpu(gpu_id).gemm_compute_dtype(weight, activation, weights=weights)


@pytest.mark.parametrize("gpu, weight, activation, stored, cast", [
    # H100 (fp8 tensor cores, no block scaling): an NVFP4 / MXFP8 checkpoint runs on vLLM's Marlin
    # W4A16 / W8A16 kernels (bf16), TransformerEngine trains NVFP4 / MXFP8 recipes only on sm100, so a
    # Hopper run uses an FP8 recipe (fp8)
    ("h100-sxm5-80gb", "nvfp4", "nvfp4", "bf16", "fp8"),
    ("h100-sxm5-80gb", "mxfp8", "mxfp8", "bf16", "fp8"),
    ("h100-sxm5-80gb", "mxfp4", "bf16", "bf16", "bf16"),  # gpt-oss W4A16 (TensorRT-LLM Triton MoE on Hopper)
    ("h100-sxm5-80gb", "int4", "fp8", "fp8", "fp8"),  # W4A8 AWQ (TensorRT-LLM: Hopper and Ada)
    ("h100-sxm5-80gb", "int4", "bf16", "bf16", "bf16"),  # AWQ / GPTQ Marlin W4A16
    ("h100-sxm5-80gb", "fp8", "fp8", "fp8", "fp8"),
    ("h100-sxm5-80gb", "bf16", "fp8", "bf16", "bf16"),  # 16-bit weights: the GEMM stays 16-bit
    # B200: block-scaled fp4 / fp6 / fp8 tensor cores (tcgen05.mma block_scale)
    ("b200", "nvfp4", "nvfp4", "fp4", "fp4"),
    ("b200", "mxfp8", "mxfp8", "fp8", "fp8"),
    ("b200", "mxfp4", "mxfp8", "fp8", "fp8"),  # TensorRT-LLM W4A8_MXFP4_MXFP8 (gpt-oss on Blackwell)
    ("b200", "mxfp6", "mxfp6", "fp6", "fp6"),
    # A100 (no fp8): FP8 checkpoints run as W8A16 Marlin (vLLM FP8 docs), FP8 training falls to bf16
    ("a100-sxm4-80gb", "fp8", "fp8", "bf16", "bf16"),
    ("a100-sxm4-80gb", "nvfp4", "nvfp4", "bf16", "bf16"),
    # MI300X (CDNA3: fp8, no MX): vLLM ROCm MXFP8 "falls through to BF16 emulation (hipBLASLt)"
    ("mi300x", "mxfp8", "mxfp8", "bf16", "fp8"),
    # V100 has no bf16 tensor cores: 16-bit means fp16
    ("v100-sxm2-32gb", "fp8", "fp8", "fp16", "fp16"),
    ("v100-sxm2-32gb", "bf16", "bf16", "fp16", "fp16"),
    # RTX PRO 6000 (sm120, block-scaled, no fp6 peak in the catalog): kind::mxf8f6f4 takes fp6 at the fp8 rate
    ("rtx-pro-6000", "mxfp6", "mxfp6", "fp8", "fp8"),
])
def test_rule_matches_the_engines_and_transformer_engine(gpu, weight, activation, stored, cast):
    assert _rule(gpu, weight, activation, STORED) == stored
    assert _rule(gpu, weight, activation, CAST) == cast


def test_serving_and_training_differ_only_where_the_part_lacks_the_format():
    # H100: NVFP4 served at bf16 (989.4 TFLOP/s dense), trained at fp8 (1978.9): the 2x of the issue is
    # now an explicit Weights parameter; on B200 both run at fp4 (9000 TFLOP/s dense, catalog)
    h100, b200 = CAT.gpu("h100-sxm5-80gb"), CAT.gpu("b200")
    system = CAT.system("dgx-h100")
    model = load_model("llama-3-8b")
    serve = StepTimeModel(Deployment(model, h100, system, weight_dtype="nvfp4"), table_tokens=4)
    train = StepContext.build(model, system, h100, 2048, Precision.NVFP4)
    assert (serve.precision, train.gemm_dtype) == ("bf16", "fp8")
    assert serve.peak_flops_per_s == pytest.approx(989.4e12)
    b_serve = StepTimeModel(Deployment(model, b200, CAT.system("dgx-b200"), weight_dtype="nvfp4"), table_tokens=4)
    assert (b_serve.precision, StepContext.build(model, CAT.system("dgx-b200"), b200, 2048, Precision.NVFP4).gemm_dtype) \
        == ("fp4", "fp4")


@pytest.mark.parametrize("precision", list(Precision))
def test_serving_accepts_every_training_precision(precision):
    # every TrainPlan precision is a serving weight format; where the part has it natively with
    # block-scaled tensor cores (B200), the served W = A GEMM runs where the trained one does
    b200, system = CAT.gpu("b200"), CAT.system("dgx-b200")
    model = load_model("llama-3-8b")
    dep = Deployment(model, b200, system, weight_dtype=precision.value)
    assert dep.weight_dtype.value == precision.value
    served = StepTimeModel(dep, table_tokens=4).precision
    if precision.low_precision_matmul:
        assert served == StepContext.build(model, system, b200, 2048, precision).gemm_dtype


def test_unknown_serving_format_names_field_and_allowed():
    with pytest.raises(InputError) as e:
        Deployment(load_model("llama-3-8b"), CAT.gpu("h100-sxm5-80gb"), CAT.system("dgx-h100"), weight_dtype="fp5")
    assert e.value.field == "weight_dtype"
    assert "mxfp8" in str(e.value) and "mxfp6" in str(e.value)


def test_kernel_roofline_resolves_formats_through_the_rule():
    # mxfp8 operands on H100: no block-scaled tensor cores -> the bf16 roof (989.4); on B200 the fp8 roof (4500)
    h100 = roofline(CAT.gpu("h100-sxm5-80gb"), "mxfp8")
    assert (h100.compute_dtype, h100.peak_tflops) == ("bf16", 989.4)
    b200 = roofline(CAT.gpu("b200"), "mxfp8")
    assert (b200.compute_dtype, b200.peak_tflops) == ("fp8", 4500.0)
    assert roofline(CAT.gpu("h100-sxm5-80gb"), "fp8").compute_dtype == "fp8"


# ---- invariants ---------------------------------------------------------------------------------
NARROW = [n for n, f in FORMATS.items() if f.element_bits <= 16]  # the formats of serving and training GEMMs
PEAK_KEYS = [d for d in DTYPES if d not in ("fp64", "fp64_tensor", "fp32", "tf32")]


def _bits(tc):
    return FORMATS[tc].element_bits


@settings(max_examples=300, deadline=None)
@given(w=st.sampled_from(NARROW), a=st.sampled_from(NARROW),
       available=st.sets(st.sampled_from(PEAK_KEYS)).map(lambda s: s | {"bf16"}))
def test_invariants(w, a, available):
    stored = gemm_compute_dtype(w, a, available, weights=STORED)
    cast = gemm_compute_dtype(w, a, available, weights=CAST)
    # every result is a precision the part has (every such part has a 16-bit rate)
    assert stored in available and cast in available
    # a GEMM never runs narrower than either operand (int4 is widened to the other operand)
    for name in (w, a):
        tc = FORMATS[name].tensor_core
        if tc is not None:
            assert _bits(stored) >= _bits(tc) and _bits(cast) >= _bits(tc)
    # a stored checkpoint can only be widened; a recipe can be re-chosen: never the other way round
    assert _bits(stored) >= _bits(cast)
    # a part with every precision and block-scaled tensor cores runs the wider operand's own precision
    full = set(PEAK_KEYS)
    want = max((FORMATS[n].tensor_core for n in (w, a) if FORMATS[n].tensor_core), key=_bits, default="bf16")
    if all(FORMATS[n].tensor_core in (want, None) for n in (w, a)):
        assert gemm_compute_dtype(w, a, full, weights=STORED) == want == gemm_compute_dtype(w, a, full, weights=CAST)


@settings(max_examples=50, deadline=None)
@given(name=st.text(min_size=1, max_size=8).filter(lambda s: s.strip().lower() not in {f.value for f in StoredFormat}))
def test_bad_format_is_an_input_error(name):
    with pytest.raises(InputError) as e:
        Deployment(load_model("llama-3-8b"), CAT.gpu("h100-sxm5-80gb"), CAT.system("dgx-h100"), kv_dtype=name)
    assert e.value.field == "kv_dtype"
