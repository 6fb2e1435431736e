"""A large fuzz run of the CLI, of the size of issue 20's (~5,700 invocations): not run in CI.

Every option of every command (read from the live click tree, tests/fuzz/cli_cases.BASE gives each
command a valid, cheap invocation) gets malformed and edge values, and commands read crafted
config.json, safetensors, validation CSV, TOML catalog and .npy files. Each invocation runs
in-process (typer's CliRunner) under a 30 s alarm, in `--workers` processes. It records:

- traceback: an exit code other than 0 / 2, or "Traceback" / "internal error" in the output
  (the cause: the innermost gpuplan frame, from a rerun with --debug);
- hang: past 30 s;
- invalid accepted: a value no numeric option may take (nan, inf, -1, text, > int64, 0 where the
  option must be > 0, ...) or a crafted file that cannot be right, yet exit 0;
- NaN / inf / negative quantity: in the --json output (a negative value under a key with a unit);
- memory: a case after which the worker's peak resident memory passed 1 GiB.

    python benchmarks/fuzz_run.py [--workers 2] [--values 17] [--files 1000] [--seed 0] [--json report.json]

Prints the count per failure class and the distinct causes, then `cases: N` and the counts last.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import random
import re
import resource
import signal
import struct
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fuzz"))

CASE_TIMEOUT_S = 30
MEMORY_LIMIT_MIB = 1024

#: values no numeric option accepts (every number gpuplan takes is finite, within int64, >= 0)
INVALID_NUMERIC = {"nan", "NaN", "inf", "-inf", "-1", "1e400", "-1e400", "", " ", "abc", "[/x]", "[bold]x[/bold]",
                   "1,000", "0x10", "12abc", "\u00e9", "10%", "--json"}
#: past int64: invalid for an integer option (a float option may take 1e30: finite, if absurd)
INVALID_INTEGER = {str(2**63), str(10**30)}
#: values an option that must be > 0 refuses as well
INVALID_POSITIVE = INVALID_NUMERIC | {"0", "-0.0"}
#: keys of JSON output that carry a unit: a negative value there is a physical impossibility
UNIT_KEY = re.compile(r"(_bytes|_gib|_mib|_s|_ms|_us|_usd|_w|_kw|_kwh|_mwh|_gbps|_tflops|_days|_hours|^days|^gpus|"
                      r"^num_gpus|_tonnes|_per_s)$")
#: keys signed by definition: headroom < 0 is the shortfall, savings < 0 means the other option is cheaper
SIGNED_KEY = re.compile(r"headroom|savings|delta|difference|error")


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


# -- cases ------------------------------------------------------------------------------------------
def option_cases(n_values: int, rng: random.Random) -> list[dict]:
    from cli_cases import MALFORMED
    from harness import app, command_options, with_option
    import typer

    try:
        from gpuplan.validation_rules import POSITIVE
    except ImportError:  # before the rules moved there (to fuzz an older checkout)
        from gpuplan.cli.params import POSITIVE

    root = typer.main.get_command(app())
    cases = []
    for path, option in command_options():
        cmd = root
        for part in path:
            cmd = cmd.commands[part]
        param = next(p for p in cmd.params if option in getattr(p, "opts", []))
        ann = getattr(getattr(param, "type_descriptor", None), "annotation", None)
        numeric = ann in (int, float) or "int" in str(ann) or "float" in str(ann)
        integer = ann is int or ("int" in str(ann) and "float" not in str(ann))
        values = rng.sample(MALFORMED, min(n_values, len(MALFORMED)))
        for value in values:
            invalid = numeric and (value in (INVALID_POSITIVE if option in POSITIVE else INVALID_NUMERIC)
                                   or integer and value in INVALID_INTEGER)
            if option == "--memory-headroom":
                invalid = value in INVALID_NUMERIC or _float(value) > 0.9
            if option == "--format":
                invalid = value.strip().lower() not in ("table", "md", "csv", "json")
            cases.append({"kind": f"option {' '.join(path)} {option}", "args": with_option(path, option, value),
                          "invalid": invalid, "numeric": numeric})
    return cases


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


JSON_ODD = [0, -1, -5, 2**63, 2**64, 10**30, 1e400 if False else 1e308, "42", "", "[/x]", "nan", True, None, [1, 2],
            {"a": 1}, 10**9, 3]
CONFIG_KEYS = ["num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
               "vocab_size", "head_dim", "max_position_embeddings", "sliding_window", "sliding_window_pattern",
               "num_local_experts", "num_experts_per_tok", "moe_intermediate_size", "n_routed_experts",
               "first_k_dense_replace", "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim",
               "tie_word_embeddings", "text_config", "layer_types"]
BASE_CONFIGS = ["google--gemma-2-9b.json", "deepseek-ai--DeepSeek-V3.json", "mistralai--Mixtral-8x7B-v0.1.json",
                "openai-community--gpt2.json", "openai--gpt-oss-20b.json"]
#: a value that cannot describe a real model: refused (exit 2) is the only right answer
IMPOSSIBLE = {"num_hidden_layers": [0, -1, -5, 2**63, 10**30, "", "[/x]", "nan", None, [1, 2], {"a": 1}, 10**9],
              "hidden_size": [0, -1, -5, 2**63, 2**64, 10**30, "", "[/x]", "nan", None, [1, 2], {"a": 1}],
              "num_attention_heads": [0, -1, -5, 2**63, 2**64, 10**30, "", "[/x]", "nan", [1, 2], {"a": 1}]}


def file_cases(n_files: int, rng: random.Random, tmp: Path) -> list[dict]:
    import numpy as np

    models = REPO / "src" / "gpuplan" / "catalog" / "data" / "models"
    shared = REPO / "src" / "gpuplan" / "catalog" / "data" / "validation"  # the packaged ../shared/validation
    cases: list[dict] = []
    share = {"config": 0.35, "config_bytes": 0.05, "safetensors": 0.2, "csv": 0.2, "toml": 0.12, "npy": 0.08}
    k = 0

    def new_path(name: str) -> Path:
        nonlocal k
        k += 1
        d = tmp / f"c{k}"
        d.mkdir()
        return d / name

    for _ in range(int(n_files * share["config"])):
        cfg = json.loads((models / rng.choice(BASE_CONFIGS)).read_text())
        invalid = False
        for key in rng.sample(CONFIG_KEYS, rng.randint(1, 3)):
            value = rng.choice(JSON_ODD)
            cfg[key] = value
            invalid |= value in IMPOSSIBLE.get(key, []) and not isinstance(value, bool)
        p = new_path("config.json")
        p.write_text(json.dumps(cfg))
        for args in (["model", "show", str(p), "--json"],
                     ["fit", "train", str(p), "--gpu", "h100-sxm5-80gb", "--gpus", "8", "--json"]):
            cases.append({"kind": "file config.json", "args": args, "invalid": invalid})
    for raw in [b"\xff\xfe{}", b"{" * 5000, b"[" * 100000 + b"]" * 100000, b'{"a": NaN}', b'{"a": Infinity}', b"",
                b"\x00" * 64, b'{"num_hidden_layers": 1e400}'] * max(1, int(n_files * share["config_bytes"]) // 8):
        p = new_path("config.json")
        p.write_bytes(raw)
        cases.append({"kind": "file config bytes", "args": ["model", "show", str(p), "--json"], "invalid": True})
    for _ in range(int(n_files * share["safetensors"])):
        header: dict = {}
        offset = 0
        bad = False
        for i in range(rng.randint(0, 4)):
            dtype = rng.choice(["F32", "BF16", "F16", "U8", "I32", "F8_E4M3", "XX", ""])
            shape = [rng.choice([0, 1, 2, 3, 6, -1, 2**40, 2**63, 2**64]) for _ in range(rng.randint(0, 3))]
            size = rng.randint(0, 32)
            begin = rng.choice([offset, 0, max(0, offset - 4)])
            header[f"t{i}.weight"] = {"dtype": dtype, "shape": shape, "data_offsets": [begin, begin + size]}
            offset = max(offset, begin + size)
            bad |= dtype in ("XX", "") or any(s < 0 or s >= 2**63 for s in shape)
        raw = json.dumps(header).encode()
        if rng.random() < 0.3:  # nested __metadata__, written as text (json.dumps itself recurses)
            depth = rng.choice([1, 10, 1000])
            meta = '{"k": ' * depth + '"x"' + "}" * depth
            raw = (raw[:-1] + (b", " if header else b"") + b'"__metadata__": ' + meta.encode() + b"}")
            bad |= depth > 64
        declared = rng.choice([len(raw), len(raw), len(raw) + 5, 2**63, 0])
        bad |= declared != len(raw)
        p = new_path("model.safetensors")
        p.write_bytes(struct.pack("<Q", min(declared, 2**64 - 1)) + raw + b"\0" * offset)
        # `model params` counts parameters of dtypes it has never seen (safetensors_header: forward-compatible),
        # so an unknown dtype is wrong only for a reader of tensor data (`formats compare`)
        unknown = any(t["dtype"] in ("XX", "") for t in header.values())
        cases.append({"kind": "file safetensors", "args": ["model", "params", str(p), "--json"],
                      "invalid": bad and not (unknown and declared == len(raw) and not any(
                          s < 0 or s >= 2**63 for t in header.values() for s in t["shape"]))})
        cases.append({"kind": "file safetensors", "args": ["formats", "compare", str(p), "--json"], "invalid": bad})
    for _ in range(int(n_files * share["csv"])):
        which = rng.choice(["training.csv", "inference.csv"])
        lines = (shared / which).read_text(encoding="utf-8").splitlines()
        import csv
        import io

        reader = csv.DictReader(io.StringIO("\n".join(lines[:3])))
        rows = list(reader)
        fields = list(reader.fieldnames or [])
        column = rng.choice(["layers", "hidden", "heads", "seq_len", "num_gpus", "tp", "pp", "global_batch",
                             "micro_batch", "value", "system", "concurrency", "input_len", "output_len", "batch"])
        value = rng.choice(["nan", "inf", "-1", "0", "1e400", "1e9", str(2**63), "", "[/x]", "abc", "2.5", "7"])
        if column in fields:
            rows[0][column] = value
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
        latin1 = rng.random() < 0.2
        text = buf.getvalue() + ("\u00e9" if latin1 else "")
        p = new_path("rows[x].csv")
        p.write_bytes(text.encode("latin-1", "replace") if latin1 else text.encode())
        cases.append({"kind": "file validation csv", "args": ["validate", str(p), "--json"], "invalid": latin1})
    toml_values = ["inf", "nan", "-1", "0", "1e400", str(2**63), str(2**70), '"80"', "[]", "{}", "true", "80", "3.35e3",
                   '"[/x]"']
    for _ in range(int(n_files * share["toml"])):
        field = rng.choice(["memory_gib", "memory_bandwidth_gbps", "tdp_w", "sm_count", "price_usd", "boost_clock_mhz"])
        value, dense = rng.choice(toml_values), rng.choice(toml_values)
        body = "\n".join(["[[gpu]]", 'id = "fuzz-gpu"', 'name = "Fuzz[/x]"', 'vendor = "x"', 'architecture = "x"',
                          'memory_type = "HBM3"', f"memory_gib = {value if field == 'memory_gib' else 80}",
                          f"memory_bandwidth_gbps = {value if field == 'memory_bandwidth_gbps' else 3350}",
                          f"peak_tflops = {{ bf16 = {{ dense = {dense} }} }}", 'sources = { default = "fuzz" }',
                          "" if field in ("memory_gib", "memory_bandwidth_gbps") else f"{field} = {value}"])
        bad = any(v in ("inf", "nan", "-1", "1e400", str(2**63), str(2**70), '"80"', "[]", "{}", "true", '"[/x]"')
                  for v in (value, dense)) or (value == "0" and field in ("memory_gib", "memory_bandwidth_gbps")) \
            or dense == "0"
        p = new_path("cat[x].toml")
        p.write_text(body)
        for args in (["--catalog", str(p), "hw", "list", "--json"], ["--catalog", str(p), "hw", "show", "fuzz-gpu", "--json"]):
            cases.append({"kind": "file toml catalog", "args": args, "invalid": bad})
    for _ in range(int(n_files * share["npy"])):
        shape = [rng.randint(0, 5) for _ in range(rng.randint(0, 3))]
        dtype = rng.choice(["float32", "float16", "int8", "float64", "bool", "complex64", "U3"])
        p = new_path("x.npy")
        np.save(p, np.ones(shape, dtype=dtype))
        truncate = rng.randint(0, 3)
        if truncate:
            raw = p.read_bytes()
            p.write_bytes(raw[: max(0, len(raw) - 4 * truncate)])
        bad = truncate > 0 or dtype in ("bool", "complex64", "U3")
        cases.append({"kind": "file npy", "args": ["formats", "compare", str(p), "--json"], "invalid": bad})
    return cases


# -- judging ----------------------------------------------------------------------------------------
def _bad_numbers(data, key: str = "") -> str | None:
    if isinstance(data, dict):
        for k, v in data.items():
            why = _bad_numbers(v, str(k))
            if why:
                return why
    elif isinstance(data, list):
        for v in data:
            why = _bad_numbers(v, key)
            if why:
                return why
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        if isinstance(data, float) and not math.isfinite(data):
            return f"{key}={data}"
        if data < 0 and UNIT_KEY.search(key) and not SIGNED_KEY.search(key):
            return f"negative {key}={data}"
    return None


def _reject(name):
    raise ValueError(name)


def _cause(runner, app, args) -> str:
    """The innermost gpuplan frame of the failure (rerun with --debug)."""
    r = runner.invoke(app, ["--debug", *args], env={"GPUPLAN_DEBUG": "1"})
    text = r.output or ""
    frames = re.findall(r'File "([^"]*gpuplan[^"]*)", line (\d+), in (\w+)', text)
    last = text.strip().splitlines()[-1] if text.strip() else repr(r.exception)
    where = f"{Path(frames[-1][0]).name}:{frames[-1][1]} {frames[-1][2]}" if frames else "?"
    return f"{where}: {last[:160]}"


def run_shard(payload) -> list[dict]:
    cases, worker = payload
    from typer.testing import CliRunner

    from harness import app as get_app

    app = get_app()
    runner = CliRunner()
    signal.signal(signal.SIGALRM, _alarm)
    out = []
    over_memory = False
    for case in cases:
        args = case["args"]
        t0 = time.perf_counter()
        failure = cause = None
        try:
            signal.alarm(CASE_TIMEOUT_S)
            r = runner.invoke(app, args)
            signal.alarm(0)
        except Hang:
            r = None
            failure, cause = "hang", f"{case['kind']}"
        finally:
            signal.alarm(0)
        if r is not None and isinstance(r.exception, Hang):
            failure, cause = "hang", case["kind"]
        elif r is not None:
            text = r.output or ""
            if r.exit_code not in (0, 2) or "Traceback (most recent call last)" in text or "internal error" in text:
                failure, cause = "traceback", _cause(runner, app, args)
            elif r.exit_code == 0:
                stdout = r.stdout.strip()
                if "--json" in args and stdout.startswith(("{", "[")):
                    try:
                        why = _bad_numbers(json.loads(stdout, parse_constant=_reject))
                    except ValueError as exc:
                        why = f"non-finite {exc}"
                    if why:
                        failure, cause = "nan/inf/negative in JSON", f"{case['kind']}: {why}"
                if failure is None and case.get("invalid"):
                    failure, cause = "invalid input accepted", f"{case['kind']} {args[-2]!r}"
        rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        if failure is None and rss_mib > MEMORY_LIMIT_MIB and not over_memory:
            over_memory = True
            failure, cause = "memory > 1 GiB", f"{case['kind']} ({rss_mib:.0f} MiB peak)"
        out.append({"args": args, "kind": case["kind"], "failure": failure, "cause": cause,
                    "seconds": time.perf_counter() - t0, "exit": None if r is None else r.exit_code})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--values", type=int, default=17, help="malformed values per option (of tests/fuzz MALFORMED)")
    ap.add_argument("--files", type=int, default=1000, help="crafted files (about; each is read by 1-2 commands)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", dest="json_out", default=None, help="write every failing case here")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="gpuplan-fuzz-run-"))
    cases = option_cases(args.values, rng) + file_cases(args.files, rng, tmp)
    rng.shuffle(cases)
    shards = [(cases[i::args.workers], i) for i in range(args.workers)]
    t0 = time.perf_counter()
    with mp.get_context("fork").Pool(args.workers, maxtasksperchild=1) as pool:
        results = [r for part in pool.map(run_shard, [(s[0][j:j + 200], s[1]) for s in shards
                                                       for j in range(0, len(s[0]), 200)]) for r in part]
    elapsed = time.perf_counter() - t0
    failures = [r for r in results if r["failure"]]
    by_class: dict[str, dict[str, int]] = {}
    for r in failures:
        by_class.setdefault(r["failure"], {}).setdefault(r["cause"], 0)
        by_class[r["failure"]][r["cause"]] += 1
    for cls, causes in sorted(by_class.items()):
        print(f"\n{cls}: {sum(causes.values())} runs, {len(causes)} distinct causes")
        for cause, n in sorted(causes.items(), key=lambda kv: -kv[1])[:40]:
            print(f"  {n:5d}  {cause}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(failures, indent=1))
    slowest = max(results, key=lambda r: r["seconds"])
    print(f"\nslowest case: {slowest['seconds']:.1f} s: gpuplan {' '.join(slowest['args'])[:160]}")
    print(f"cases: {len(results)}")
    print(f"elapsed_s: {elapsed:.0f}")
    for cls in ("traceback", "hang", "invalid input accepted", "nan/inf/negative in JSON", "memory > 1 GiB"):
        print(f"{cls}: {sum(by_class.get(cls, {}).values())}")


if __name__ == "__main__":
    os.environ.setdefault("COLUMNS", "100")
    main()
