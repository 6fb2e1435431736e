"""Crafted files of the full fuzz run (benchmarks/fuzz_run.py): config.json (dense, MoE, hybrid,
a PEFT adapter config given as a model), safetensors headers, validation CSV, calibration CSV, TOML
catalogs, sweep specs, vLLM result JSON, .npy, deep nesting, and huge-but-valid inputs at the
documented caps. Each case says whether the file cannot describe what it claims (`invalid`: exit 0
is a silent acceptance). Case dicts as in full_cases.
"""

from __future__ import annotations

import csv
import io
import json
import random
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from full_cases import MODELS, SAMPLES, VALIDATION  # noqa: E402

JSON_ODD = [0, -1, -5, 2**63, 2**64, 10**30, 1e308, "42", "", "[/x]", "nan", True, None, [1, 2], {"a": 1}, 10**9, 3,
            "\u00b2", 2.5]
CONFIG_KEYS = ["num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
               "vocab_size", "head_dim", "max_position_embeddings", "sliding_window", "num_local_experts",
               "num_experts_per_tok", "moe_intermediate_size", "n_routed_experts", "first_k_dense_replace",
               "kv_lora_rank", "tie_word_embeddings", "text_config", "layer_types", "model_type",
               "hybrid_override_pattern", "mamba_num_heads", "ssm_state_size", "full_attention_interval"]
BASE_CONFIGS = ["google--gemma-2-9b.json", "deepseek-ai--DeepSeek-V3.json", "mistralai--Mixtral-8x7B-v0.1.json",
                "openai-community--gpt2.json", "openai--gpt-oss-20b.json"]
#: a value that cannot describe a real model: refused (exit 2) is the only right answer
IMPOSSIBLE = {"num_hidden_layers": [0, -1, -5, 2**63, 2**64, 10**30, 1e308, "", "[/x]", "nan", None, [1, 2], {"a": 1},
                                    10**9, "\u00b2", 2.5, "42"],
              "hidden_size": [0, -1, -5, 2**63, 2**64, 10**30, 1e308, "", "[/x]", "nan", None, [1, 2], {"a": 1},
                              "\u00b2", 2.5, "42"],
              "num_attention_heads": [0, -1, -5, 2**63, 2**64, 10**30, 1e308, "", "[/x]", "nan", [1, 2], {"a": 1},
                                      "\u00b2", 2.5, "42"]}
ADAPTER = {"peft_type": "LORA", "r": 16, "lora_alpha": 32, "lora_dropout": 0.05, "task_type": "CAUSAL_LM",
           "target_modules": ["q_proj", "v_proj"], "base_model_name_or_path": "meta-llama/Meta-Llama-3-8B"}


def _hybrids() -> list[dict]:
    import hybrid_configs as h

    return [h.NEMOTRON_H_8B, h.QWEN3_NEXT_80B_A3B, h.MAMBA_CODESTRAL_7B, h.LFM2_1_2B, h.RECURRENTGEMMA_2B]


def crafted_cases(n_files: int, rng: random.Random, tmp: Path) -> list[dict]:
    import numpy as np

    cases: list[dict] = []
    k = 0

    def new_path(name: str) -> Path:
        nonlocal k
        k += 1
        d = tmp / "files" / f"c{k}"
        d.mkdir(parents=True)
        return d / name

    def add(kind, args, invalid, note=""):
        cases.append({"kind": kind, "args": [*args, "--json"] if rng.random() < 0.6 else list(args), "invalid": invalid,
                      "note": note})

    hybrids = _hybrids()
    for _ in range(int(n_files * 0.30)):
        hybrid = rng.random() < 0.3
        cfg = json.loads(json.dumps(rng.choice(hybrids))) if hybrid else \
            json.loads((MODELS / rng.choice(BASE_CONFIGS)).read_text())
        invalid = False
        changed = {}
        for key in rng.sample(CONFIG_KEYS, rng.randint(1, 3)):
            value = rng.choice(JSON_ODD)
            present = key in cfg  # a key the config does not use (gpt2 says n_layer) changes nothing it reads
            cfg[key] = changed[key] = value
            invalid |= present and any(value is v or value == v and type(value) is type(v) for v in IMPOSSIBLE.get(key, []))
        p = new_path("config.json")
        p.write_text(json.dumps(cfg))
        note = f"{cfg.get('model_type')}: {json.dumps(changed)[:200]}"
        add("file config.json" + (" hybrid" if hybrid else ""), ["model", "show", str(p)], invalid, note)
        if not hybrid:
            add("file config.json", ["fit", "train", str(p), "--gpu", "h100-sxm5-80gb", "--gpus", "8"], invalid, note)
    # PEFT adapter configs (read as LoRA on the bundled base model): r a whole number 1-65536, target
    # modules present and matching a linear module, the base a bundled model's Hugging Face id
    variants = [({}, False), ({"r": 0}, True), ({"r": -1}, True), ({"r": "x"}, True), ({"r": 2**63}, True),
                ({"r": 2.5}, True), ({"r": 65537}, True), ({"target_modules": []}, True),
                ({"target_modules": ["nope"]}, True), ({"base_model_name_or_path": "nope/nope"}, True),
                ({"base_model_name_or_path": "\u00b2"}, True), ({"r": 65536}, False)]
    for _ in range(max(1, n_files // 50)):
        change, invalid = rng.choice(variants)
        p = new_path("adapter_config.json")
        p.write_text(json.dumps({**ADAPTER, **change}))
        add("file adapter config", ["model", "show", str(p)], invalid, json.dumps(change))
    for raw in [b"\xff\xfe{}", b"{" * 5000, b"[" * 100000 + b"]" * 100000, b'{"a": NaN}', b'{"a": Infinity}', b"",
                b"\x00" * 64, b'{"num_hidden_layers": 1e400}', b'{"num_hidden_layers": 12, "num_hidden_layers": 0}',
                ('{"x": ' * 70 + "1" + "}" * 70).encode()] * max(1, n_files // 200):
        p = new_path("config.json")
        p.write_bytes(raw)
        add("file config bytes", ["model", "show", str(p)], True)
    for _ in range(int(n_files * 0.15)):
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
        unknown = any(t["dtype"] in ("XX", "") for t in header.values())
        add("file safetensors", ["model", "params", str(p)],
            bad and not (unknown and declared == len(raw) and not any(
                s < 0 or s >= 2**63 for t in header.values() for s in t["shape"])))
        add("file safetensors", ["formats", "compare", str(p)], bad)
    for _ in range(int(n_files * 0.15)):
        which = rng.choice(["training.csv", "inference.csv", "collectives.csv"])
        lines = (VALIDATION / which).read_text(encoding="utf-8").splitlines()
        reader = csv.DictReader(io.StringIO("\n".join(lines[:3])))
        rows = list(reader)
        fields = list(reader.fieldnames or [])
        column = rng.choice(["layers", "hidden", "heads", "seq_len", "num_gpus", "tp", "pp", "global_batch",
                             "micro_batch", "value", "system", "concurrency", "input_len", "output_len", "batch",
                             "request_rate", "size_bytes", "nodes"])
        value = rng.choice(["nan", "inf", "-1", "0", "1e400", "1e7", "1e9", str(2**63), "", "[/x]", "abc", "2.5", "7",
                            "\u00b2", "\uff18"])
        if column in fields:
            rows[0][column] = value
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
        latin1 = rng.random() < 0.1
        text = buf.getvalue() + ("\u00e9" if latin1 else "")
        p = new_path("rows[x].csv")
        p.write_bytes(text.encode("latin-1", "replace") if latin1 else text.encode())
        add("file validation csv", ["validate", str(p)], latin1)
        if which == "collectives.csv" and rng.random() < 0.5:
            add("file calibration csv", ["calibrate", "fit", str(p)], latin1)
    toml_values = ["inf", "nan", "-1", "0", "1e400", str(2**63), str(2**70), '"80"', "[]", "{}", "true", "80", "3.35e3",
                   '"[/x]"']
    for _ in range(int(n_files * 0.10)):
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
        add("file toml catalog", ["--catalog", str(p), "hw", "show", "fuzz-gpu"], bad)
    sweep_values = ['"x"', "-1", "0", "1e400", "nan", "[]", "{}", "true", str(2**63), '["nope"]', '[0]', '[-8]',
                    '["\u00b2"]', "[8]", '["1T"]']
    for _ in range(int(n_files * 0.10)):
        key = rng.choice(["models", "hardware", "gpus", "seq_len", "tokens", "goal", "global_batch", "max_days",
                          "hbm_bandwidth_scale", "nvlink_domain_gpus"])
        value = rng.choice(sweep_values)
        axes = {"models": '["gpt3-125m"]', "hardware": '["dgx-h100"]', "gpus": "[8]"}
        lines = ['goal = "train"']
        if key in axes:
            axes[key] = value
        lines += ["[axes]", *[f"{a} = {v}" for a, v in axes.items()]]
        if key in ("seq_len", "tokens"):
            lines.append(f"{key} = {value}")
        if key == "goal":
            lines[0] = f"goal = {value}"
        if key in ("hbm_bandwidth_scale", "nvlink_domain_gpus"):
            lines += ["[[variants]]", 'name = "v"', 'base = "dgx-h100"', f"{key} = {value}"]
        if key == "global_batch":
            lines += ["[train]", f"global_batch = {value}"]
        if key == "max_days":
            lines += ["[constraints]", f"max_days = {value}"]
        ok = {"models": ['["gpt3-125m"]'], "hardware": ['["dgx-h100"]'], "gpus": ["[8]"], "seq_len": ["[8]", "[]"],
              "tokens": ['["1T"]', "[]"], "hbm_bandwidth_scale": [], "nvlink_domain_gpus": [], "global_batch": [],
              "max_days": [], "goal": ['"x"']}[key]
        p = new_path("spec.toml")
        p.write_text("\n".join(lines) + "\n")
        add("file sweep spec", ["sweep", "run", str(p), "--dry-run"],
            value not in ok and value not in ("[8]", "true") and not (value in ("0", "-1") and key == "max_days"))
    for depth in (10, 100, 1000, 5000):
        p = new_path("deep.json")
        p.write_text("[" * depth + "]" * depth)
        add("file nested vllm json", ["calibrate", "import", "vllm", str(p), "--config",
                                      str(SAMPLES / "serving_llama8b_h100.toml")], True)
        q = new_path("spec.toml")
        q.write_text('goal = "train"\n[axes]\nmodels = ' + "[" * depth + '"gpt3-125m"' + "]" * depth + "\n")
        add("file nested sweep spec", ["sweep", "run", str(q), "--dry-run"], True)
    for _ in range(int(n_files * 0.06)):
        shape = [rng.randint(0, 5) for _ in range(rng.randint(0, 3))]
        dtype = rng.choice(["float32", "float16", "int8", "float64", "bool", "complex64", "U3"])
        p = new_path("x.npy")
        np.save(p, np.ones(shape, dtype=dtype))
        truncate = rng.randint(0, 3)
        if truncate:
            raw = p.read_bytes()
            p.write_bytes(raw[: max(0, len(raw) - 4 * truncate)])
        add("file npy", ["formats", "compare", str(p)], truncate > 0 or dtype in ("bool", "complex64", "U3"))
    return cases + huge_cases(tmp)


def huge_cases(tmp: Path) -> list[dict]:
    """Huge-but-valid inputs at the documented caps (they must finish inside the time and memory
    limits) and just past them (one line)."""
    from gpuplan.validation_rules import MAX_ARRAY_ELEMENTS, MAX_LAYERS

    d = tmp / "huge"
    d.mkdir(parents=True, exist_ok=True)
    cases = []
    for layers, invalid in ((MAX_LAYERS, False), (MAX_LAYERS + 1, True)):
        for base in ("google--gemma-2-9b.json", "deepseek-ai--DeepSeek-V3.json"):
            cfg = json.loads((MODELS / base).read_text())
            cfg["num_hidden_layers"] = layers
            p = d / f"{layers}-{base}"
            p.write_text(json.dumps(cfg))
            cases.append({"kind": "huge config layers", "args": ["model", "show", str(p), "--json"], "invalid": invalid})
            cases.append({"kind": "huge config layers", "args": ["fit", "train", str(p), "--gpu", "h100-sxm5-80gb",
                                                                 "--gpus", "8", "--json"], "invalid": invalid})
    lines = (VALIDATION / "collectives.csv").read_text(encoding="utf-8").splitlines()
    rows = d / "rows.csv"
    rows.write_text("\n".join([lines[0]] + (lines[1:] * (2000 // max(1, len(lines) - 1) + 1))[:2000]) + "\n")
    cases.append({"kind": "huge validate 2,000 rows", "args": ["validate", str(rows), "--json"], "invalid": False})
    for n, invalid in ((MAX_ARRAY_ELEMENTS, False), (MAX_ARRAY_ELEMENTS + 1, True)):
        cases.append({"kind": "huge formats compare", "args": ["formats", "compare", "--random", f"normal:{n}",
                                                               "--formats", "mxfp4", "--json"], "invalid": invalid})
    cases += [
        {"kind": "huge mig plan", "args": ["mig", "plan", *["1g.10gb"] * 5000, "--json"], "invalid": False},
        {"kind": "huge serve concurrency", "args": ["serve", "run", "gpt3-125m", "--gpu", "h100-sxm5-80gb",
                                                    "--concurrency", "100000", "--input-len", "128", "--output-len",
                                                    "16", "--json"], "invalid": False},
        {"kind": "huge predicate", "args": ["kernel", "divergence", "--predicate", " || ".join(["lane < 16"] * 150),
                                            "--json"], "invalid": False},
        {"kind": "deep predicate", "args": ["kernel", "divergence", "--predicate", "(" * 1000 + "lane" + ")" * 1000],
         "invalid": True},
        {"kind": "huge fit min-gpus", "args": ["fit", "min-gpus", "llama-3-70b", "--gpu", "h100-sxm5-80gb",
                                               "--max-gpus", "131072", "--json"], "invalid": False},
    ]
    return cases
