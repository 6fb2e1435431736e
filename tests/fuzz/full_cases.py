"""Cases of the full fuzz run (benchmarks/fuzz_run.py) and of its fixed pytest sample
(tests/fuzz/test_fuzz_full_sample.py): every command of the live `gpuplan --help` tree.

A case is a dict:

- `kind`: the category the run counts it under ("option train --tp", "set dc power", "path out fifo", ...);
- `args`: the argument list after `gpuplan`;
- `invalid`: the input lies outside what the option documents (POSITIVE / CAPS of
  gpuplan.validation_rules, an assumption's `allowed` range, a value no number may take) or a file
  cannot describe what it claims: exit 0 is then a *silent acceptance*;
- `protect`: output paths that are not regular files: each must be left exactly as it was;
- `stdout`: "full" to run with stdout on /dev/full (exit 2, one line);
- `env`: extra environment variables (GPUPLAN_CATALOG ...);
- `serves`: `gpuplan web` with a valid address: running until the time limit is its job, not a hang.

Every path lives in the private temporary folder `tmp` the caller gives (device nodes are made
there with mknod when running as root, else links to /dev/null and /dev/full stand in).
"""

from __future__ import annotations

import json
import math
import os
import random
import stat
import struct
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "src" / "gpuplan" / "catalog" / "data" / "models"
VALIDATION = REPO / "src" / "gpuplan" / "catalog" / "data" / "validation"
SAMPLES = REPO / "tests" / "calibration" / "samples"

#: values typed where a number goes: Unicode digits and look-alikes, full-width, words, hex, huge,
#: long, markup and option-like text (each invalid for every numeric option)
NEVER_A_NUMBER = ["nan", "NaN", "inf", "-inf", "1e400", "-1e400", "", " ", "abc", "0x10", "1_000", "1,000", "12abc",
                  "10%", "\u00b2", "\u00b9\u2070", "\u0663", "\uff11\uff16", "\u2460", "\u00bd", "\U0001d7ce",
                  "1\u00a0000", "\u2212" + "1", "l0", "O1", "[/x]", "--json", "x" * 5000, "9" * 200, "\x00", "1\n2"]
#: values that are numbers: their validity depends on the option's documented range
NUMBERS = ["-1", "0", "-0.0", "1e-320", "0.5", "1", "2", "63", "64", "255", "256", "1e9", "1e12", str(2**31),
           str(2**53 + 1), str(2**63 - 1), str(2**63), str(10**30), "1e308", "2.5", "+7", "007", " 8 "]
VALUES = NEVER_A_NUMBER + NUMBERS
#: text-valued options: ids, names, enums
TEXTS = ["", " ", "x" * 5000, "\x00", "a\nb", "[bold]x[/bold]", "\u00e9", "\uff48100", "../../etc/passwd", "-1",
         "h100", "H100-SXM5-80GB", "bf16", "fp8", "all", "none", "auto", "\u0000x", "a,b,,c", "1e400"]

#: options never given values here: flags, the output and path options (their own cases below)
SKIP = {"--help", "--json", "--version", "--debug", "--html", "--plot", "--catalog", "--calibration", "--out",
        "--profile", "--lengths", "--config", "--from", "--address"}
OUTPUT_OPTIONS = {"--out", "--plot", "--html", "--profile"}


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def fixtures(tmp: Path) -> dict[str, Path]:
    """Valid input files every base invocation needs, written under tmp/inputs."""
    d = tmp / "inputs"
    lines = (VALIDATION / "collectives.csv").read_text(encoding="utf-8").splitlines()
    f = {
        "collectives": _write(d / "collectives.csv", "\n".join(lines[:4]) + "\n"),
        "spec": _write(d / "spec.toml", 'goal = "train"\n[axes]\nmodels = ["gpt3-125m"]\nhardware = ["dgx-h100"]\n'
                                        "gpus = [8]\n"),
        "results": _write(d / "results.csv", "point,status,model,hardware,num_gpus,days,cost_usd\n"
                                              "0,ok,gpt3-125m,dgx-h100,8,1.0,100.0\n"),
        "config": _write(d / "gpt2" / "config.json", (MODELS / "openai-community--gpt2.json").read_text()),
    }
    header = json.dumps({"w": {"dtype": "F32", "shape": [4, 8], "data_offsets": [0, 128]}}).encode()
    f["safetensors"] = _write(d / "model.safetensors", struct.pack("<Q", len(header)) + header + b"\0" * 128)
    return f


def bases(f: dict[str, Path]) -> dict[tuple[str, ...], list[str]]:
    """A valid, cheap invocation of every command (the file-reading ones on `fixtures`)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from cli_cases import BASE

    out = dict(BASE)
    out.update({
        ("validate",): [str(f["collectives"])],
        ("model", "params"): [str(f["safetensors"])],
        ("calibrate", "knobs"): [],
        ("calibrate", "fit"): [str(f["collectives"])],
        ("calibrate", "import"): ["nccl-tests", str(SAMPLES / "nccl_all_reduce_dgx_h100.txt"), "--set", "system=dgx-h100"],
        ("sweep", "run"): [str(f["spec"]), "--dry-run"],
        ("sweep", "report"): [str(f["results"])],
        ("bench",): ["--device", "nonexistent-device"],  # argument checks only: a real bench takes ~20 s
        ("web",): ["--host", "256.0.0.1"],  # argument checks only (an address no one can bind)
    })
    return out


def command_tree() -> dict[tuple[str, ...], object]:
    """Command path -> click command, for every leaf of `gpuplan --help`."""
    import typer

    from gpuplan.cli.main import app

    out: dict[tuple[str, ...], object] = {}

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, (*path, name))
        else:
            out[path] = cmd

    walk(typer.main.get_command(app), ())
    return out


def _option_kind(param) -> str:
    ann = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    text = str(ann)
    if ann is int or ("int" in text and "float" not in text and "Optional[int]" in text) or text == "typing.Optional[int]":
        return "int"
    if ann is float or "float" in text:
        return "float"
    return "text"


def _number(text: str) -> float | None:
    """The number a user means by ASCII `text` (None where gpuplan reads no number)."""
    from gpuplan.validation_rules import is_ascii_number

    if not is_ascii_number(text) or len(text) > 100:
        return None
    v = float(text)
    return v if math.isfinite(v) else None


def numeric_invalid(option: str, value: str, kind: str) -> bool:
    """True when `value` lies outside the documented range of numeric `option` (docs/cli-errors.md:
    finite, int64, >= 0, > 0 for POSITIVE, <= CAPS; integers whole; --memory-headroom <= 0.9)."""
    from gpuplan.validation_rules import CAPS, INT64_MAX, NEGATIVE_ALLOWED, POSITIVE

    v = _number(value)
    if v is None:
        return True
    digits = value.strip().lstrip("+-")
    if digits.isdigit() and kind == "int":  # an integer written out: compare exactly (float(2^63 - 1) is 2^63)
        exact = int(value.strip())
        if abs(exact) > INT64_MAX:
            return True
        v = exact
    elif kind == "int" and (not float(v).is_integer() or abs(v) >= 2**63):
        return True
    if option not in NEGATIVE_ALLOWED and v < 0 or option in POSITIVE and v <= 0:
        return True
    if option in CAPS and v > CAPS[option][0]:
        return True
    return option == "--memory-headroom" and v > 0.9


def option_cases(tree, base, rng: random.Random, per_option: int) -> list[dict]:
    """Every option that takes a value, of every command, with `per_option` values, in table and JSON modes."""
    cases = []
    for path, cmd in sorted(tree.items()):
        if path not in base:
            continue
        for p in cmd.params:
            opts = [o for o in getattr(p, "opts", []) if o.startswith("--")]
            if not opts or opts[0] in SKIP or getattr(p, "is_flag", False) or opts[0] == "--set":
                continue
            option, kind = opts[0], _option_kind(p)
            pool = VALUES if kind != "text" else TEXTS + NEVER_A_NUMBER[:8]
            for i, value in enumerate(rng.sample(pool, min(per_option, len(pool)))):
                args = list(base[path])
                if option in args:
                    j = args.index(option)
                    del args[j:j + 2]
                mode = ["--json"] if i % 2 == 0 else []
                invalid = kind != "text" and numeric_invalid(option, value, kind)
                if option == "--format" and path != ("formats", "encode"):
                    invalid = value.strip().lower() not in ("table", "md", "csv", "json")
                cases.append({"kind": f"option {' '.join(path)} {option}", "args": [*path, *args, option, value, *mode],
                              "invalid": invalid, "serves": path == ("web",) and not invalid})
    return cases


SET_VALUES = ["0", "1e-300", "1e308", "\u00b2", "\uff11", "1e400", "0x10", "1_0", "-0", "42.5", "-1", "nan", "inf",
              "", "1", "2", "1000000", "abc", "x" * 300]


def set_cases(base, rng: random.Random, n: int) -> list[dict]:
    """`--set KEY=VALUE` on every command that takes it: assumptions with edge values (invalid =
    outside the assumption's documented `allowed` range), unknown keys, malformed pairs."""
    from gpuplan.facilities.assumptions import DEFAULT_ASSUMPTIONS

    items = list(DEFAULT_ASSUMPTIONS.items.values())
    commands = [("dc", "power"), ("dc", "fabric"), ("dc", "tco"), ("dc", "assumptions"), ("train",), ("plan",),
                ("serve", "plan")]
    cases = []
    for _ in range(n):
        path = rng.choice(commands)
        a = rng.choice(items)
        value = rng.choice(SET_VALUES)
        v = _number(value)
        invalid = v is None or not (a.min_value <= v <= a.max_value) or (a.integer and not float(v).is_integer())
        pair = rng.choice([f"{a.key}={value}", f"{a.key}={value}", f"{a.key}={value}", f"no_such_key={value}",
                           f"{a.key}", f"={value}", f"{a.key}=={value}", f" {a.key} = {value}"])
        key, eq, _ = pair.partition("=")
        invalid = invalid or key.strip() != a.key or not eq or pair.replace(" ", "").startswith(f"{a.key}==")
        mode = ["--json"] if rng.random() < 0.5 else []
        cases.append({"kind": f"set {' '.join(path)}", "args": [*path, *base[path], "--set", pair, *mode],
                      "invalid": invalid})
    imports = ["num_gpus", "system", "tp", "layers", "hidden", "nodes", "collective", "no_such_column"]
    for _ in range(n // 4):
        key, value = rng.choice(imports), rng.choice(SET_VALUES)
        v = _number(value)
        invalid = key in ("num_gpus", "tp", "layers", "hidden", "nodes") and value != "" and \
            (v is None or v <= 0 or not float(v).is_integer())  # an empty value: not given (SCHEMA.md)
        cases.append({"kind": "set calibrate import", "args": ["calibrate", "import", "nccl-tests",
                      str(SAMPLES / "nccl_all_reduce_dgx_h100.txt"), "--set", "system=dgx-h100", "--set",
                      f"{key}={value}", "--json"], "invalid": invalid})
    return cases


# -- paths ---------------------------------------------------------------------------------------
def path_kinds(tmp: Path) -> dict[str, Path]:
    """One path of each kind, made in tmp/paths: missing, too long, too deep, folder, FIFO, socket
    (as a plain marker), unreadable, loop of links, dangling link, a link to a regular file, and the
    devices null / full / zero (mknod as root; else links to the real ones, which gpuplan refuses alike)."""
    d = tmp / "paths"
    d.mkdir(parents=True, exist_ok=True)
    out = {"missing": d / "absent.file", "long": d / ("x" * 300), "deep": d / "/".join(["d"] * 2100)}
    (d / "folder").mkdir(exist_ok=True)
    out["folder"] = d / "folder"
    os.mkfifo(d / "fifo")
    out["fifo"] = d / "fifo"
    _write(d / "unreadable.csv", "a,b\n1,2\n").chmod(0)
    out["unreadable"] = d / "unreadable.csv"
    (d / "loop1").symlink_to(d / "loop2")
    (d / "loop2").symlink_to(d / "loop1")
    out["loop"] = d / "loop1"
    (d / "dangling").symlink_to(d / "nowhere")
    out["dangling"] = d / "dangling"
    for name, minor in (("null", 3), ("full", 7), ("zero", 5)):
        node = d / f"dev-{name}"
        if os.geteuid() == 0:
            os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        else:
            node.symlink_to(f"/dev/{name}")
        out[f"dev-{name}"] = node
    _write(d / "target.txt", "keep me\n")
    (d / "link-to-file").symlink_to(d / "target.txt")
    out["link-to-file"] = d / "link-to-file"
    (d / "link-to-null").symlink_to(out["dev-null"])
    out["link-to-null"] = d / "link-to-null"
    return out


def input_path_slots(f: dict[str, Path]) -> list[tuple[list[str], str]]:
    """Every place a command reads a path, with `{}` where it goes."""
    vllm = str(SAMPLES / "vllm_bench_serve_llama8b.json")
    return [
        (["--catalog", "{}", "hw", "list"], "catalog"), (["--calibration", "{}", "hw", "list"], "calibration"),
        (["validate", "{}"], "file"), (["calibrate", "fit", "{}"], "file"),
        (["calibrate", "import", "vllm", "{}", "--config", str(SAMPLES / "serving_llama8b_h100.toml")], "file"),
        (["calibrate", "import", "vllm", vllm, "--config", "{}"], "config"), (["model", "show", "{}"], "model"),
        (["model", "params", "{}"], "path"), (["sweep", "run", "{}", "--dry-run"], "spec"),
        (["sweep", "report", "{}"], "results"), (["formats", "compare", "{}"], "file"),
        (["serve", "run", "gpt3-125m", "--concurrency", "2", "--input-len", "64", "--output-len", "8", "--lengths", "{}"],
         "lengths"),
        (["train", "gpt3-125m", "--gpus", "8", "--from", "{}"], "from"),
        (["fit", "train", "{}", "--gpu", "h100-sxm5-80gb", "--gpus", "8"], "model"),
    ]


def output_path_slots(f: dict[str, Path]) -> list[list[str]]:
    return [
        ["calibrate", "fit", str(f["collectives"]), "--out", "{}"],
        ["calibrate", "fit", str(f["collectives"]), "--plot", "{}"],
        ["calibrate", "import", "nccl-tests", str(SAMPLES / "nccl_all_reduce_dgx_h100.txt"), "--set", "system=dgx-h100",
         "--out", "{}"],
        ["plan", "--model", "gpt3-125m", "--tokens", "1B", "--gpus", "8", "--html", "{}"],
        ["kernel", "occupancy", "--cc", "9.0", "--threads", "256", "--regs", "32", "--plot", "{}"],
        ["kernel", "roofline", "--gpu", "h100-sxm5-80gb", "--plot", "{}"],
        ["serve", "frontier", "gpt3-125m", "--input-len", "128", "--output-len", "16", "--plot", "{}"],
        ["sweep", "run", str(f["spec"]), "--out", "{}"],
        ["sweep", "report", str(f["results"]), "--out", "{}"],
        ["bench", "--device", "cpu", "--quick", "--out", "{}"],
        ["bench", "--device", "cpu", "--quick", "--profile", "{}"],
    ]


def path_cases(paths: dict[str, Path], f: dict[str, Path], rng: random.Random) -> list[dict]:
    cases = []
    for template, field in input_path_slots(f):
        for name, p in paths.items():
            if name in ("link-to-file",):
                continue
            args = [a.replace("{}", str(p)) for a in template]
            mode = ["--json"] if rng.random() < 0.5 else []
            # root reads a file of mode 000; its content (a,b / 1,2) is still no file of any kind gpuplan reads
            cases.append({"kind": f"path in {field} {name}", "args": [*args, *mode], "invalid": True})
    for template in output_path_slots(f):
        option = next(a for a in template if a.startswith("--") and template[template.index(a) + 1] == "{}")
        for name, p in paths.items():
            if name in ("missing", "unreadable") or template[0] == "bench" and name not in ("fifo", "dev-null", "folder"):
                continue  # a missing output is created (the normal case); bench runs ~20 s: three kinds
            args = [a.replace("{}", str(p)) for a in template]
            protect = [] if name in ("link-to-file", "long", "deep") else [str(p)]
            folder_ok = name == "folder" and template[:2] == ["sweep", "report"]  # `sweep report --out DIR` writes into DIR
            cases.append({"kind": f"path out {option} {name}", "args": [*args, "--json"],
                          "invalid": name != "link-to-file" and not folder_ok, "protect": protect})
    for cmd in (["hw", "list", "--json"], ["hw", "show", "h100-sxm5-80gb"], ["dc", "assumptions", "--json"],
                ["kernel", "amdahl", "--parallel-fraction", "0.9", "--workers", "8"], ["model", "list"]):
        cases.append({"kind": "stdout /dev/full", "args": cmd, "invalid": True, "stdout": "full"})
    for name in ("dev-zero", "folder", "fifo", "long", "loop", "missing"):
        for var in ("GPUPLAN_CATALOG", "GPUPLAN_CALIBRATION"):
            cases.append({"kind": f"env {var} {name}", "args": ["hw", "list", "--json"], "invalid": True,
                          "env": {var: str(paths[name])}})
    return cases


def web_cases() -> list[dict]:
    """`gpuplan web`: bad addresses and ports (one line, exit 2) and bounded start/stop runs (a
    valid address serves until the run's time limit stops it)."""
    cases = [{"kind": "web serves", "args": ["web", "--host", "127.0.0.1", "--port", "0"], "invalid": False,
              "serves": True}]
    for port in ["-1", "65536", "1e400", "abc", "\uff18\uff10", "0x50", "", "8080.5", str(2**63)]:
        cases.append({"kind": "web --port", "args": ["web", "--host", "127.0.0.1", "--port", port], "invalid": True})
    for host in ["", "256.0.0.1", "x" * 300, "\x00", "bad host", "[::1", "127.0.0.1\n", "1e400"]:
        cases.append({"kind": "web --host", "args": ["web", "--host", host, "--port", "0"], "invalid": True})
    for name in ["", "\n", "x" * 5000]:
        cases.append({"kind": "web --allow-host", "args": ["web", "--host", "127.0.0.1", "--port", "0", "--allow-host",
                                                           name], "invalid": True, "serves": True})
    return cases


def all_cases(tmp: Path, rng: random.Random, per_option: int, n_set: int, n_files: int) -> list[dict]:
    """Every kind of case, for the full run (benchmarks/fuzz_run.py) or a sample of it."""
    from full_files import crafted_cases

    f = fixtures(tmp)
    base = bases(f)
    tree = command_tree()
    missing = sorted(" ".join(p) for p in tree if p not in base)
    if missing:
        raise AssertionError(f"commands without a base invocation: {missing}")
    cases = option_cases(tree, base, rng, per_option)
    cases += [{"kind": f"base {' '.join(p)}", "args": [*p, *a, *mode], "invalid": p in (("bench",), ("web",))}
              for p, a in base.items() for mode in ([], ["--json"]) if p in tree]
    cases += set_cases(base, rng, n_set)
    cases += path_cases(path_kinds(tmp), f, rng)
    cases += web_cases()
    cases += crafted_cases(n_files, rng, tmp)
    return cases
