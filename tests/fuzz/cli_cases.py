"""Minimal valid invocations of every command (cheap: small models, few GPUs), for the fuzz suite.

Each fuzz case takes one of these and appends one option with a malformed value. The options
themselves are read from the live click tree (so renamed or new options are fuzzed too)."""

from __future__ import annotations

#: command path -> arguments that make a valid, fast invocation
BASE: dict[tuple[str, ...], list[str]] = {
    ("comm",): ["all_reduce", "--system", "dgx-h100", "--gpus", "8"],
    ("train",): ["gpt3-125m", "--gpus", "8", "--framework", "deepspeed", "--deepspeed-release", "current"],
    # the training stack of the search (--framework --compile --optimizer-impl): the fuzzed options run on it
    ("plan",): ["--model", "gpt3-125m", "--tokens", "1B", "--gpus", "8", "--framework", "torchtitan", "--compile", "model+loss",
                "--optimizer-impl", "foreach"],
    ("hw", "list"): [],
    ("hw", "show"): ["h100-sxm5-80gb"],
    ("hw", "compare"): ["h100-sxm5-80gb", "a100-sxm4-80gb"],
    ("hw", "interconnects"): [],
    ("hw", "prices"): [],
    ("hw", "hosts"): [],
    ("systems", "list"): [],
    ("systems", "show"): ["dgx-h100"],
    ("model", "show"): ["gpt3-125m"],
    ("model", "list"): [],
    # torchtitan with both parts compiled (--compile): the fuzzed options run on the compiled plan
    ("fit", "train"): ["gpt3-125m", "--gpu", "h100-sxm5-80gb", "--gpus", "8", "--framework", "torchtitan",
                       "--compile", "model+loss", "--optimizer-impl", "foreach"],
    ("fit", "max-batch"): ["gpt3-125m", "--gpu", "h100-sxm5-80gb", "--gpus", "8"],
    ("fit", "max-seq"): ["gpt3-125m", "--gpu", "h100-sxm5-80gb", "--gpus", "8"],
    ("fit", "min-gpus"): ["gpt3-125m", "--gpu", "h100-sxm5-80gb", "--max-gpus", "64"],
    ("serve", "run"): ["gpt3-125m", "--gpu", "h100-sxm5-80gb", "--concurrency", "4", "--input-len", "128",
                       "--output-len", "16"],
    ("serve", "plan"): ["gpt3-125m", "--rate", "1", "--ttft-ms", "2000", "--tpot-ms", "100", "--input-len", "128",
                        "--output-len", "16"],
    ("serve", "frontier"): ["gpt3-125m", "--input-len", "128", "--output-len", "16"],
    ("formats", "table"): [],
    ("formats", "compare"): ["--random", "normal:256"],
    ("formats", "encode"): ["1.5", "--format", "e4m3"],
    ("formats", "decode"): ["0x3c", "--format", "e4m3"],
    ("formats", "matmul"): ["--m", "8", "--k", "64", "--n", "8"],
    ("kernel", "occupancy"): ["--cc", "9.0", "--threads", "256", "--regs", "32"],
    ("kernel", "roofline"): ["--gpu", "h100-sxm5-80gb"],
    ("kernel", "access"): [],
    ("kernel", "banks"): [],
    ("kernel", "divergence"): ["--predicate", "lane < 16"],
    ("kernel", "amdahl"): ["--parallel-fraction", "0.9", "--workers", "8"],
    ("kernel", "gustafson"): ["--parallel-fraction", "0.9", "--workers", "8"],
    ("kernel", "little"): ["--latency-ns", "600", "--gpu", "h100-sxm5-80gb"],
    ("dc", "fabric"): ["--nodes", "4"],
    ("dc", "power"): ["--nodes", "4"],
    ("dc", "tco"): ["--nodes", "4"],
    ("dc", "assumptions"): [],
    ("mig", "plan"): ["3g.40gb", "2g.20gb"],
    ("mig", "profiles"): [],
    # leave-one-row-out CV of the shipped collectives set (interpolation: issue 32)
    ("validate",): ["--builtin", "collectives", "--cv", "row"],
}

#: values a user (or a script) might pass by mistake, or to probe the edges
MALFORMED = [
    "nan", "NaN", "inf", "-inf", "-1", "0", "-0.0", "1e400", "-1e400", "1e-320", "0.5", "1e9", "1e12",
    str(2**31), str(2**53 + 1), str(2**63 - 1), str(2**63), str(10**30), "", " ", "abc", "[/x]",
    "[bold]x[/bold]", "1,000", "0x10", "12abc", "\u00e9", "10%", "--json",
]

#: options never fuzzed with values (flags, or output paths covered by their own tests)
SKIP_OPTIONS = {"--help", "--json", "--version", "--debug", "--html", "--plot", "--catalog"}
