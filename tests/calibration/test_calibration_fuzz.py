"""Bad input, fuzzed: whatever text an importer or the profile loader is given, it returns rows /
a profile or raises InputError (one line, exit 2 at the CLI), never another exception."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplan.errors import InputError
from gpuplan.interfaces.calibration.profile import load_profile
from gpuplan.interfaces.calibration.importers import IMPORTERS, import_file

CONFIG = {"system": "dgx-h100", "num_gpus": "8", "layers": "2", "hidden": "64"}
# fragments of the real formats, so that the fuzzer reaches the parsers' inner branches
FRAGMENTS = st.sampled_from([
    "#       size         count      type   redop    root     time   algbw   busbw #wrong\n",
    "  1024  256  float  sum  -1  12.5  0.08  0.15  0  12.1  0.08  0.15  0\n",
    "     1 |  756.1(mean)  758.2(median)  762.3(max) @ 256x4096x4096 | best:\n", "** Dtype: torch.float8_e4m3fn\n",
    '{"output_throughput": 10, "mean_ttft_ms": -3, "request_rate": "inf", "completed": 0}\n',
    "step: 3  loss: 1.0  memory: 1.5GiB(2%)  tps: 1,2,3  tflops: x  mfu: 5%\n",
    " iteration 5/ 10 | elapsed time per iteration (ms): 12.5 | throughput per GPU (TFLOP/s/GPU): nan |\n",
    "[Rank 0] memory (MB) | allocated: 1 | max allocated: 2\n", "Infinity", "\x00", "[", "{",
    "step: 1 memory: .GiB tps: ,", "| ..(mean) 1(median) 2(max) @ 1x1x1", "mean: . TFLOPS @ 0x0x0\n",
    " iteration 1/2 | elapsed time per iteration (ms): . |\n",
])
TEXT = st.lists(st.one_of(FRAGMENTS, st.text(max_size=40)), max_size=8).map("".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(IMPORTERS)), text=TEXT)
def test_importers_return_rows_or_input_error(tmp_path, kind, text):
    f = tmp_path / "in.txt"
    f.write_bytes(text.encode("utf-8", "replace"))
    try:
        result = import_file(kind, f, CONFIG)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    for row in result.rows:
        assert float(row["value"]) > 0 and row["id"] and row["metric"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(st.text(max_size=80), st.builds(
    lambda name, value: f'[knobs."{name}"]\nvalue = {value}\n',
    st.sampled_from(["efficiency.hbm", "training.sustained_gemm_fraction", "nope", ""]),
    st.sampled_from(["0.5", "0.9", "-1", "nan", "inf", "1e400", '"x"', "true", "[1]"]))))
def test_profile_loader_returns_a_valid_profile_or_input_error(tmp_path, text):
    from gpuplan import knobs

    p = tmp_path / "p.toml"
    p.write_bytes(text.encode("utf-8", "replace"))
    try:
        prof = load_profile(p)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    for name, value in prof.values.items():
        k = knobs.REGISTRY[name]
        assert k.low <= value <= k.high
