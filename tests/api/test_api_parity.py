"""`gpuplan.api.<x>(...).to_dict()` is exactly `gpuplan <x> ... --json` for the same inputs, for every
command family (the contract of docs/options.md and gpuplan.interfaces.api)."""

from __future__ import annotations

import json
import struct

import pytest

from gpuplan import api
from gpuplan.cli.main import app


def cli_json(runner, *args):
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _drop_elapsed(d: dict) -> dict:
    """The plan search's wall-clock time is the one key that differs between two identical runs."""
    if "search" in d:
        d["search"].pop("elapsed_s")
    return d


CASES = [
    # (CLI arguments without --json, the same question through gpuplan.api)
    (["train", "gpt3-175b", "--tp", "8", "--pp", "8", "--vpp", "3", "--recompute", "selective"],
     lambda: api.train("gpt3-175b", tp=8, pp=8, vpp=3, recompute="selective")),
    (["train", "llama-3-8b", "--system", "dgx-a100-80gb", "--gpus", "16", "--tp", "2", "--tokens", "1T",
      "--precision", "bf16", "--framework", "fsdp", "--sharding", "zero1"],
     lambda: api.train("llama-3-8b", "dgx-a100-80gb", 16, tp=2, tokens="1T", framework="fsdp", sharding="zero1")),
    (["fit", "train", "llama-3-8b", "--gpu", "h100-sxm5-80gb", "--gpus", "8", "--tp", "2", "--sharding", "zero1"],
     lambda: api.fit_train("llama-3-8b", "h100-sxm5-80gb", 8, tp=2, sharding="zero1")),
    (["fit", "max-batch", "llama-3-8b", "--gpus", "8", "--sharding", "zero1", "--seq-len", "4096"],
     lambda: api.fit_max_batch("llama-3-8b", gpus=8, sharding="zero1", seq_len=4096)),
    (["fit", "max-seq", "llama-3-8b", "--gpus", "8", "--sharding", "zero1"],
     lambda: api.fit_max_seq("llama-3-8b", gpus=8, sharding="zero1")),
    (["fit", "min-gpus", "llama-3-70b", "--sharding", "zero1", "--seq-len", "4096"],
     lambda: api.fit_min_gpus("llama-3-70b", sharding="zero1", seq_len=4096)),
    (["serve", "run", "llama-3-8b", "--tp", "2", "--input-len", "512", "--output-len", "64", "--rate", "4"],
     lambda: api.serve_run("llama-3-8b", tp=2, input_len=512, output_len=64, rate=4)),
    (["serve", "plan", "llama-3-8b", "--rate", "5", "--tpot-ms", "60", "--input-len", "512", "--output-len", "64"],
     lambda: api.serve_plan("llama-3-8b", rate=5, tpot_ms=60, input_len=512, output_len=64)),
    (["serve", "frontier", "llama-3-8b", "--input-len", "512", "--output-len", "64"],
     lambda: api.serve_frontier("llama-3-8b", input_len=512, output_len=64)),
    (["plan", "--gpus", "64"], lambda: api.plan(gpus=64)),
    (["model", "show", "deepseek-v3", "--seq-len", "8192", "--kv-bytes", "1"],
     lambda: api.model_show("deepseek-v3", 8192, 1.0)),
    (["model", "list"], api.model_list),
    (["hw", "list", "--vendor", "amd"], lambda: api.hw_list("amd")),
    (["hw", "show", "h100-sxm5-80gb"], lambda: api.hw_show("h100-sxm5-80gb")),
    (["hw", "compare", "a100-sxm4-80gb", "h100-sxm5-80gb"], lambda: api.hw_compare(["a100-sxm4-80gb", "h100-sxm5-80gb"])),
    (["hw", "interconnects", "--kind", "nvlink"], lambda: api.hw_interconnects("nvlink")),
    (["hw", "prices", "h100-sxm5-80gb"], lambda: api.hw_prices("h100-sxm5-80gb")),
    (["systems", "list"], api.systems_list),
    (["systems", "show", "dgx-b200"], lambda: api.systems_show("dgx-b200")),
    (["comm", "all_reduce", "--system", "dgx-h100", "--gpus", "64", "--size", "256MiB"],
     lambda: api.comm("all_reduce", "dgx-h100", 64, size="256MiB")),
    (["comm", "all_gather", "--gpus", "16", "--sweep"], lambda: api.comm("all_gather", gpus=16, sweep=True)),
    (["dc", "fabric", "--system", "dgx-h100", "--scalable-units", "4"], lambda: api.dc_fabric("dgx-h100", scalable_units=4)),
    (["dc", "power", "--nodes", "4", "--price-kwh", "0.10", "--pue", "1.3", "--no-fabric"],
     lambda: api.dc_power(nodes=4, price_kwh=0.10, pue=1.3, fabric=False)),
    (["dc", "tco", "--nodes", "4", "--utilization", "1.0", "--cloud-usd-per-gpu-hour", "2.79", "--set", "pue=1.15"],
     lambda: api.dc_tco(nodes=4, utilization=1.0, cloud_usd_per_gpu_hour=2.79, overrides={"pue": 1.15})),
    (["dc", "assumptions", "--set", "pue=1.15"], lambda: api.dc_assumptions(["pue=1.15"])),
    (["mig", "plan", "--gpu", "a100-sxm4-80gb", "3g.40gb", "2g.20gb", "1g.10gb"],
     lambda: api.mig_plan(["3g.40gb", "2g.20gb", "1g.10gb"], "a100-sxm4-80gb")),
    (["mig", "profiles", "--gpu", "h200-sxm-141gb"], lambda: api.mig_profiles("h200-sxm-141gb")),
    (["kernel", "occupancy", "--gpu", "h100-sxm5-80gb", "--threads", "256", "--regs", "64", "--smem", "48KiB"],
     lambda: api.kernel_occupancy(256, 64, "48KiB", gpu="h100-sxm5-80gb")),
    (["kernel", "roofline", "--gpu", "h100-sxm5-80gb", "--gemm", "4096x4096x4096@600", "--step", "16e9:16e9"],
     lambda: api.kernel_roofline("h100-sxm5-80gb", gemm=["4096x4096x4096@600"], step=["16e9:16e9"])),
    (["kernel", "access", "--elem-bytes", "4", "--stride", "2"], lambda: api.kernel_access(4, 2)),
    (["kernel", "banks", "--stride", "32", "--pad", "1"], lambda: api.kernel_banks(stride=32, pad=1)),
    (["kernel", "divergence", "--predicate", "lane % 2 == 0"], lambda: api.kernel_divergence("lane % 2 == 0")),
    (["kernel", "amdahl", "-p", "0.95", "-n", "8"], lambda: api.kernel_amdahl(0.95, 8)),
    (["kernel", "gustafson", "-p", "0.95", "-n", "8"], lambda: api.kernel_gustafson(0.95, 8)),
    (["kernel", "little", "--latency-ns", "600", "--gpu", "h100-sxm5-80gb"],
     lambda: api.kernel_little(600, gpu="h100-sxm5-80gb")),
    (["formats", "table"], api.formats_table),
    (["formats", "compare", "--random", "normal:4096", "--formats", "mxfp4,nvfp4"],
     lambda: api.formats_compare(random="normal:4096", formats="mxfp4,nvfp4")),
    (["formats", "encode", "1.5", "448", "1000", "-f", "e4m3"], lambda: api.formats_encode([1.5, 448, 1000], "e4m3")),
    (["formats", "decode", "0x7E", "1", "-f", "e5m2"], lambda: api.formats_decode(["0x7E", 1], "e5m2")),
    (["formats", "matmul", "--m", "16", "--k", "256", "--n", "16", "--formats", "mxfp8_e4m3,nvfp4"],
     lambda: api.formats_matmul(16, 256, 16, formats="mxfp8_e4m3,nvfp4")),
]


@pytest.mark.parametrize("args,call", CASES, ids=[" ".join(c[0][:2]) for c in CASES])
def test_api_to_dict_is_cli_json(runner, args, call):
    assert _drop_elapsed(call().to_dict()) == _drop_elapsed(cli_json(runner, *args))


def test_train_search_parity(runner):
    """A searched plan (not only a given one): the same best plan, totals and top list."""
    args = ["train", "gpt3-1.3b", "--gpus", "8", "--top", "3"]
    got = _drop_elapsed(api.train("gpt3-1.3b", gpus=8, top=3).to_dict())
    assert got == _drop_elapsed(cli_json(runner, *args))
    assert len(got["search"]["top_plans"]) == 3  # --top reaches the search (it listed 5 whatever --top said)


def test_validate_parity(runner, validation_dir):
    path = str(validation_dir / "collectives.csv")
    assert api.validate(path).to_dict() == cli_json(runner, "validate", path)


def _write_safetensors(path, tensors: dict[str, tuple[str, list[int], int]]) -> None:
    """A minimal safetensors file: u64 header length, JSON header, zero bytes (format spec,
    huggingface/safetensors README)."""
    header, offset = {}, 0
    for name, (dtype, shape, itemsize) in tensors.items():
        n = itemsize
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + bytes(offset))


def test_model_params_parity(runner, tmp_path):
    f = tmp_path / "model.safetensors"
    _write_safetensors(f, {"w": ("BF16", [4, 8], 2), "b": ("F32", [8], 4)})
    got = api.model_params(str(f)).to_dict()
    assert got == cli_json(runner, "model", "params", str(f))
    assert got["total_params"] == 4 * 8 + 8  # 40 elements
    assert got["total_bytes"] == 4 * 8 * 2 + 8 * 4  # 64 + 32 = 96 bytes
