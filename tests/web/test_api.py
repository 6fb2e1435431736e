"""The HTTP API of `gpuplan web`: each endpoint answers exactly the CLI's --json for the same
inputs, and the command line it names (X-Gpuplan-Command) prints that JSON; bad input gets a
4xx with the CLI's one-line message; requests naming another Host are refused."""

from __future__ import annotations

import io
import json
import shlex

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplan import api
from gpuplan.web.endpoints import ENDPOINTS, Text, command

from .conftest import DATA, HOST, PORT, cli, cli_json, drop_timing

# (endpoint, JSON body): small inputs, each a different family / option shape (lists, bools, enums)
CASES = [
    ("train", {"gpus": 64, "model": "gpt3-6.7b", "tokens": "10B"}),
    ("train", {"gpus": 64, "model": "gpt3-6.7b", "tp": 2, "pp": 2, "recompute": "selective", "sequence_parallel": False}),
    ("plan", {"model": "gpt3-1.3b", "tokens": "20B", "days": 2}),
    # the plan search's training stack (api.framework_choice): train's --framework --compile --optimizer-impl
    # --deepspeed-release, on the API's plan endpoint and the Plan page
    ("plan", {"model": "gpt3-125m", "tokens": "1B", "gpus": 8, "framework": "torchtitan", "compile": "model+loss",
              "optimizer_impl": "foreach"}),
    ("plan", {"model": "gpt3-125m", "tokens": "1B", "gpus": 8, "framework": "deepspeed", "deepspeed_release": "0.5"}),
    ("plan", {"model": "llama-2-7b", "goal": "finetune", "tokens": "20M", "system": "rtx-4090", "gpus": 2,
              "lora_rank": 16, "lora_targets": "all_linear"}),
    ("fit/train", {"model": "gpt3-175b", "gpus": 1024, "tp": 8, "pp": 8, "flash_attention": False}),
    ("fit/max-batch", {"model": "gpt3-175b", "gpus": 1024, "tp": 8, "pp": 8}),
    # --compile (interfaces.api.compile_option): the train field and fit's plan field
    ("train", {"model": "gpt3-125m", "gpus": 8, "framework": "torchtitan", "compile": "model+loss", "top": 2}),
    ("fit/train", {"model": "llama-3-8b", "gpus": 1, "seq_len": 8192, "framework": "torchtitan", "compile": "loss"}),
    ("fit/train", {"model": "llama-2-70b", "gpu": "rtx-4090", "gpus": 2, "sharding": "fsdp", "recompute": "full",
                   "fine_tuning": {"finetune": "qlora", "lora_rank": 64, "offload": "params"}}),
    ("train", {"model": "llama-2-7b", "system": "h100-sxm5-80gb", "gpus": 1, "tokens": "1M", "grad_accum": 4,
               "fine_tuning": {"finetune": "lora", "lora_targets": "all_linear", "master_weights": "none"}}),
    # the fine-tuning options the Fit and Train pages offer (cli.fine_tuning_options): the AdamW
    # implementation, QLoRA's kept base-matmul input, the optimizer step in backward, and --compile model
    # of a LoRA plan on fsdp (api.compile_option: the one compiled part another PyTorch loop reads)
    ("fit/train", {"model": "llama-2-7b", "gpus": 1, "fine_tuning": {"finetune": "lora", "optimizer_impl": "loop"}}),
    ("fit/train", {"model": "llama-2-7b", "gpu": "rtx-4090", "gpus": 1, "seq_len": 2048,
                   "fine_tuning": {"finetune": "qlora", "base_matmul_keeps_input": True}}),
    ("fit/max-batch", {"model": "llama-2-7b", "gpus": 1, "fine_tuning": {"optimizer_in_backward": True}}),
    # a loop holding the fp32 logits through backward (Answer.AI fsdp_qlora train.py)
    ("fit/train", {"model": "llama-2-7b", "gpu": "rtx-3090", "gpus": 2, "sharding": "fsdp", "framework": "fsdp",
                   "fine_tuning": {"finetune": "qlora", "lora_rank": 64, "logits_held_in_backward": True}}),
    # LitGPT's attention: q, k, v split from one fused projection by views
    ("fit/train", {"model": "llama-2-7b", "gpus": 1, "fine_tuning": {"finetune": "lora", "lora_dropout": 0.05,
                                                                     "fused_qkv_views": True}}),
    ("fit/train", {"model": "llama-2-7b", "gpus": 1, "framework": "fsdp", "compile": "model",
                   "fine_tuning": {"finetune": "lora"}}),
    ("train", {"model": "llama-2-7b", "system": "h100-sxm5-80gb", "gpus": 1, "tokens": "1M", "global_batch": 1,
               "fine_tuning": {"finetune": "qlora", "optimizer_impl": "foreach", "base_matmul_keeps_input": True,
                               "optimizer_in_backward": True}}),
    # the rest of the CLI's fine-tuning and plan options the Fit and Train pages offer (training_pages.js):
    # LoRA dropout, a 4-bit base without double quantisation, the chunked loss, offloaded activations;
    # fit's gradient dtype, sequence parallelism and unfused attention; train's etp and TP comm overlap
    ("fit/train", {"model": "llama-2-7b", "gpu": "rtx-4090", "gpus": 1, "seq_len": 2048,
                   "fine_tuning": {"finetune": "qlora", "lora_dropout": 0.1, "double_quant": False, "chunked_loss": True,
                                   "offload_activations": True}}),
    ("fit/train", {"model": "gpt3-6.7b", "gpus": 8, "tp": 2, "grad_precision": "bf16", "sequence_parallel": False,
                   "flash_attention": False}),
    ("train", {"model": "llama-2-7b", "system": "h100-sxm5-80gb", "gpus": 1, "tokens": "1M",
               "fine_tuning": {"finetune": "lora", "lora_dropout": 0.05, "chunked_loss": True}}),
    ("train", {"model": "gpt3-6.7b", "gpus": 64, "tokens": "10B", "tp": 4, "pp": 2, "recompute": "selective",
               "sequence_parallel": True, "tp_comm_overlap": True, "top": 2}),
    ("fit/min-gpus", {"model": "gpt3-13b", "tp": 2, "gpu": "a100-sxm4-80gb"}),
    # DualPipe and the DeepSeek-V3 report's memory savings (interfaces.api.memory_saving_options) on fit's plan
    ("fit/train", {"model": "deepseek-v3", "system": "hgx-h800", "gpus": 2048, "pp": 16, "ep": 64, "global_batch": 15360,
                   "seq_len": 4096, "precision": "fp8", "sharding": "zero1", "recompute": "selective",
                   "pipeline_schedule": "dualpipe", "memory_savings": "norm_recompute+bf16_optimizer_states"}),
    ("serve/run", {"model": "llama-3-8b", "concurrency": 8, "output_len": 64}),
    ("serve/run", {"model": "llama-3-8b", "tp": 2, "concurrency": 8, "output_len": 64, "engine": "sglang",
                   "memory_fraction": 0.8}),
    ("serve/plan", {"model": "llama-3-8b", "rate": 2, "input_len": 256, "output_len": 32, "engine": "vllm"}),
    ("serve/frontier", {"model": "llama-3-8b", "gpu": "h200-sxm-141gb", "input_len": 512}),
    ("serve/plan", {"model": "llama-3-8b", "disaggregated": True, "rate": 4, "ttft_ms": 3000, "tpot_ms": 10,
                    "input_len": 8192, "output_len": 32, "pd_ratio": "1:1"}),
    ("comm", {"collective": "all_reduce", "gpus": 16, "size": "256MiB"}),
    ("model/show", {"model": "llama-3-8b", "seq_len": 8192}),
    ("hw/compare", {"gpus": ["h100-sxm5-80gb", "b200"]}),
    ("hw/prices", {"gpu": "h100-sxm5-80gb"}),
    ("systems/show", {"system": "dgx-b200"}),
    ("dc/fabric", {"nodes": 64, "oversubscription": 2.0}),
    ("dc/power", {"nodes": 4, "pue": 1.2, "fabric": False}),
    ("dc/tco", {"system": "dgx-b200", "scalable_units": 2, "years": 5, "overrides": ["pue=1.25"]}),
    ("mig/plan", {"profiles": ["3g.40gb", "1g.10gb"]}),
    ("kernel/occupancy", {"threads": 256, "regs": 64, "smem": "48KiB", "gpu": "a100-sxm4-80gb"}),
    ("kernel/roofline", {"gpu": "h100-sxm5-80gb", "gemm": ["4096x4096x4096", "8x4096x4096@50"]}),
    ("kernel/amdahl", {"parallel_fraction": 0.95, "workers": 64}),
    ("formats/compare", {"random": "normal:4096", "formats": "e4m3,mxfp4", "seed": 3}),
    ("formats/encode", {"values": ["1.5", "300"], "format_name": "e4m3", "saturate": False}),
]


@pytest.mark.parametrize("path,body", CASES, ids=[c[0] + str(i) for i, c in enumerate(CASES)])
def test_endpoint_json_is_the_cli_json_of_its_command(client, path, body):
    r = client.post(f"/api/v1/{path}", json=body)
    assert r.status_code == 200, r.text
    line = r.headers["x-gpuplan-command"]
    assert line.startswith("gpuplan " + path.replace("/", " "))
    assert drop_timing(r.json()) == drop_timing(cli_json(line))


def test_command_lines_spell_the_cli_options():
    ep = {e.path: e for e in ENDPOINTS}
    # positional model, kebab-case flags, a list as a repeated flag, a False bool as --no-<flag>
    assert command(ep["/api/v1/train"], {"model": "gpt3-6.7b", "gpus": 64, "sequence_parallel": False}) == \
        "gpuplan train gpt3-6.7b --gpus 64 --no-sequence-parallel --json"
    assert command(ep["/api/v1/serve/plan"], {"model": "llama-3-8b", "gpus": ["b200", "h100-sxm5-80gb"]}) == \
        "gpuplan serve plan llama-3-8b --gpu b200 --gpu h100-sxm5-80gb --json"
    assert command(ep["/api/v1/dc/power"], {"overrides": ["pue=1.1"], "storage": False}) == \
        "gpuplan dc power --no-storage --set pue=1.1 --json"
    assert command(ep["/api/v1/hw/compare"], {"gpus": ["a100-sxm4-80gb", "b200"]}) == \
        "gpuplan hw compare a100-sxm4-80gb b200 --json"


def test_serve_page_offers_every_engine_the_api_accepts():
    """The Serve page's engine selector (app.js SERVE_ENGINES) lists exactly api.SERVING_ENGINES,
    the default first, and its fields are serve run's / serve plan's `engine`."""
    import re
    from pathlib import Path

    import gpuplan.web

    js = (Path(gpuplan.web.__file__).parent / "static" / "app.js").read_text()
    names = json.loads(re.search(r"const SERVE_ENGINES = (\[[^\]]*\]);", js).group(1))
    assert tuple(names) == api.SERVING_ENGINES and names[0] == api.DEFAULT_ENGINE
    ep = {e.path: e for e in ENDPOINTS}
    for path in ("/api/v1/serve/run", "/api/v1/serve/plan"):
        assert ep[path].fields()["engine"] == (Text, "generic")  # a string of bounded length
    assert command(ep["/api/v1/serve/run"], {"model": "llama-3-8b", "engine": "vllm"}) == \
        "gpuplan serve run llama-3-8b --engine vllm --json"
    # the default is left off the command line, as every default is
    assert command(ep["/api/v1/serve/run"], {"model": "llama-3-8b", "engine": "generic"}) == \
        "gpuplan serve run llama-3-8b --json"


def test_fit_and_train_pages_offer_every_fine_tuning_option_of_the_cli():
    """The Fit and Train pages' fine-tuning inputs (training_pages.js FINETUNE_FIELDS, sent as the
    `fine_tuning` object by FT_DEFAULTS) are exactly the CLI's (cli.fine_tuning_options), and each
    page offers every option of its API endpoint but the ones named here as left out."""
    import re
    from pathlib import Path

    import gpuplan.web
    from gpuplan.cli.fine_tuning_options import FINE_TUNING_OPTIONS

    js = (Path(gpuplan.web.__file__).parent / "static" / "training_pages.js").read_text()
    defaults = re.search(r"const FT_DEFAULTS = \{(.*?)\};", js, re.S).group(1)
    assert set(re.findall(r"(\w+):", defaults)) == set(FINE_TUNING_OPTIONS)
    names = set(re.findall(r'name: "(\w+)"', js))
    ep = {e.path: e for e in ENDPOINTS}
    # left out on purpose: what a page states another way (fit: --gpu, not --system; train: tokens, not a
    # FLOP budget) and the facilities options of the Data centre page (prices, PUE, grid, electricity, --set)
    left_out = {"system", "flops", "usd_per_gpu_hour", "pue", "grid_kg_co2_per_kwh", "electricity_usd_per_kwh",
                "overrides", "search_limits", "gpu", "fine_tuning"}
    for path in ("/api/v1/fit/train", "/api/v1/train"):
        missing = set(ep[path].fields()) - names - left_out
        assert not missing, (path, missing)


def test_endpoint_equals_gpuplan_api_and_hand_values(client):
    r = client.post("/api/v1/dc/power", json={"nodes": 4, "pue": 1.2})
    assert r.json() == api.dc_power(nodes=4, pue=1.2).to_dict()
    d = r.json()
    # 4 DGX H100 at 10.2 kW each (NVIDIA DGX H100 datasheet: 10.2 kW max) = 40.8 kW of nodes
    assert d["nodes_power_kw"] == pytest.approx(4 * 10.2)
    # facility = IT x PUE (the definition of PUE), with the PUE we asked for
    assert d["facility_power_kw"] == pytest.approx(d["it_power_kw"] * 1.2)


def test_every_api_command_has_an_endpoint(client):
    served = {e.fn_name for e in ENDPOINTS} | {"validate", "calibrate_fit"}
    # not served: model_params reads a checkpoint path on the server; `serve` is serve_run's alias;
    # to_jsonable / price_source are helpers, not commands
    # validate_cv reads a CSV the server would have to be given a path to (the upload endpoint serves
    # `validate`; cross-validation of an upload is not offered yet)
    # calibrate_fit is served as an upload (POST /api/v1/calibrate/fit, no --out / --plot);
    # calibrate_import / bench read or write files on the server or measure its machine;
    # load_profile / apply / memory_headroom are Python-only scopes; serve_plan_disaggregated is served
    # as serve/plan with `disaggregated: true` (the CLI's `serve plan --disaggregated`)
    # launch configs (interfaces.api.deploy): --emit / --from of the CLI; the emit_* functions take a result,
    # not a request (the pages' downloads are train_config / serve_*_config, served)
    not_served = {"model_params", "serve", "to_jsonable", "price_source", "validate_cv",
                  "calibrate_import", "bench", "load_profile", "apply", "memory_headroom", "serve_plan_disaggregated",
                  "emit_train", "emit_fit", "emit_plan_training", "emit_serve", "train_from", "serve_run_from",
                  "train_options_for", "serve_engine_for", "written_for"}
    commands = {n for n in api.__all__ if callable(getattr(api, n)) and not isinstance(getattr(api, n), type)}
    assert commands - not_served == served
    paths = set(client.get("/openapi.json").json()["paths"])
    assert {e.path for e in ENDPOINTS} | {"/api/v1/validate", "/api/v1/formats/compare-file", "/api/v1/calibrate/fit"} <= paths
    assert client.get("/docs").status_code == 200


@pytest.mark.parametrize("path,body,cli_args", [
    # (out-of-range numbers are caught by the CLI's option guard before the api: the page marks the
    # field with the api's own message, tested in test_wrong_json_types_are_422_naming_the_field)
    ("train", {"model": "gpt3-175bb"}, ["train", "gpt3-175bb", "--json"]),
    ("fit/train", {"model": "llama-2-7b", "gpus": 2, "fine_tuning": {"finetune": "lora", "offload": "params"}},
     ["fit", "train", "llama-2-7b", "--gpus", "2", "--finetune", "lora", "--offload", "params", "--json"]),
    ("plan", {"goal": "inference"}, ["plan", "--goal", "inference", "--json"]),
    ("serve/run", {"model": "llama-3-8b", "scheduler": "fifo"}, ["serve", "run", "llama-3-8b", "--scheduler", "fifo", "--json"]),
    ("serve/run", {"model": "llama-3-8b", "engine": "triton"}, ["serve", "run", "llama-3-8b", "--engine", "triton", "--json"]),
    ("serve/plan", {"model": "llama-3-8b", "engine": "triton"}, ["serve", "plan", "llama-3-8b", "--engine", "triton", "--json"]),
    ("kernel/occupancy", {"threads": 2048, "regs": 32, "gpu": "h100-sxm5-80gb"},
     ["kernel", "occupancy", "--threads", "2048", "--regs", "32", "--gpu", "h100-sxm5-80gb", "--json"]),
])
def test_bad_input_is_400_with_the_cli_line(client, path, body, cli_args):
    r = client.post(f"/api/v1/{path}", json=body)
    res = cli(cli_args)
    assert res.exit_code == 2
    assert r.status_code == 400
    # under --json the CLI prints the same error object the HTTP API returns
    assert json.loads(res.stdout)["error"] == r.json()["error"]
    # the line the page shows for it gives the same error
    again = cli(shlex.split(r.headers["x-gpuplan-command"])[1:])
    assert again.exit_code == 2 and json.loads(again.stdout)["error"] == r.json()["error"]
    assert r.json()["error"]["field"]


def test_wrong_json_types_are_422_naming_the_field(client):
    r = client.post("/api/v1/train", json={"gpus": "many"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "gpus" and r.json()["error"]["message"].startswith("--gpus: ")
    r = client.post("/api/v1/train", json={"gpu_count": 8})
    assert r.status_code == 422 and r.json()["error"]["field"] == "gpu_count"
    r = client.post("/api/v1/train", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and "\n" not in r.json()["error"]["message"]


json_values = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
                           | st.text(max_size=12), lambda c: st.lists(c, max_size=3), max_leaves=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(["dc/power", "dc/fabric", "kernel/occupancy", "kernel/little", "hw/show", "formats/decode",
                             "fit/train"]),
       body=st.dictionaries(st.sampled_from(["nodes", "pue", "threads", "regs", "smem", "gpu", "latency_ns", "codes",
                                             "model", "gpus", "tp", "system", "oversubscription"]), json_values, max_size=4))
def test_no_input_gives_a_500_or_a_traceback(client, path, body):
    r = client.post(f"/api/v1/{path}", json=body)
    assert r.status_code in (200, 400, 422), r.text
    if r.status_code != 200:
        assert set(r.json()) == {"error"} and set(r.json()["error"]) == {"field", "allowed", "message"} and "Traceback" not in r.text and "\n" not in r.json()["error"]["message"]


def test_host_header_must_be_the_bound_address(client):
    assert client.get("/train", headers={"host": f"{HOST}:{PORT}"}).status_code == 200
    assert client.get("/train", headers={"host": f"localhost:{PORT}"}).status_code == 200
    for host in ("evil.example:8000", f"{HOST}:9999", "attacker.example"):  # DNS rebinding: a foreign name
        r = client.post("/api/v1/hw/list", headers={"host": host})
        assert r.status_code == 403 and r.json()["error"]["field"] == "host"


def test_no_permissive_cors(client):
    r = client.post("/api/v1/hw/list", headers={"origin": "http://evil.example"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    assert client.options("/api/v1/hw/list", headers={"origin": "http://evil.example",
                                                      "access-control-request-method": "POST"}).status_code >= 400


def test_computing_endpoints_are_post_only(client):
    assert client.get("/api/v1/train").status_code == 405


def test_pages_each_at_their_own_path(client):
    from gpuplan.web.pages import PAGES

    for page in PAGES:
        r = client.get(page.path)
        assert r.status_code == 200 and f'data-page="{page.name}"' in r.text
    assert 'data-page="plan"' in client.get("/").text
    js = client.get("/static/vendor/plotly.min.js")  # bundled: no CDN
    assert js.status_code == 200 and len(js.content) > 1_000_000
    assert "cdn" not in client.get("/train").text.lower()


def test_validate_upload_equals_cli_validate(client):
    path = DATA / "sample_training.csv"
    r = client.post("/api/v1/validate", files={"file": ("sample_training.csv", path.read_bytes(), "text/csv")})
    assert r.status_code == 200, r.text
    assert r.headers["x-gpuplan-command"] == "gpuplan validate sample_training.csv --json"
    res = cli(["validate", str(path), "--json"])
    assert r.json() == json.loads(res.stdout)
    assert [row["id"] for row in r.json()["rows"]] == ["meg21-t1-1", "meg21-t1-2", "meg21-t1-3", "meg21-t1-4"]


def test_validate_builtin_equals_cli_validate_builtin(client):
    # the Validate page's default: a public set shipped with gpuplan, by name (no upload)
    r = client.post("/api/v1/validate", data={"builtin": "collectives"})
    assert r.status_code == 200, r.text
    assert r.headers["x-gpuplan-command"] == "gpuplan validate --builtin collectives --json"
    assert r.json() == json.loads(cli(["validate", "--builtin", "collectives", "--json"]).stdout)
    # neither a file nor a set, or both: the CLI's one line, 400
    none = client.post("/api/v1/validate")
    assert none.status_code == 400 and none.json()["error"]["field"] == "file"
    both = client.post("/api/v1/validate", data={"builtin": "training"},
                       files={"file": ("rows.csv", (DATA / "sample_training.csv").read_bytes(), "text/csv")})
    assert both.status_code == 400 and both.json()["error"]["message"] == \
        "--builtin: give a FILE or --builtin training|inference|collectives, not both"


def test_validate_page_offers_every_builtin_set():
    """The Validate page's `builtin` selector lists exactly api.VALIDATION_SETS, training (the default) first."""
    import re
    from pathlib import Path

    import gpuplan.web

    js = (Path(gpuplan.web.__file__).parent / "static" / "app.js").read_text()
    field = re.search(r'\{ name: "builtin", type: "select", options: (\[[^\]]*\]), def: "(\w+)"', js)
    assert tuple(json.loads(field.group(1))) == api.VALIDATION_SETS and field.group(2) == api.VALIDATION_SETS[0]


def test_uploads_are_size_bounded(client):
    from gpuplan.web.app import MAX_UPLOAD_BYTES

    big = b"id,value\n" + b"x,1\n" * (MAX_UPLOAD_BYTES // 4 + 1)
    r = client.post("/api/v1/validate", files={"file": ("big.csv", big, "text/csv")})
    assert r.status_code == 400 and r.json() == {"error": {"field": "file", "allowed": None,
                                                      "message": "file: larger than the 5 MiB upload limit"}}


def test_formats_compare_upload_matches_the_cli_but_for_the_path(client, tmp_path):
    x = np.random.default_rng(0).standard_normal(1024).astype(np.float32)
    buf = io.BytesIO()
    np.save(buf, x)
    (tmp_path / "w.npy").write_bytes(buf.getvalue())
    r = client.post("/api/v1/formats/compare-file", files={"file": ("w.npy", buf.getvalue())}, data={"formats": "e4m3,e2m1"})
    assert r.status_code == 200, r.text
    assert r.headers["x-gpuplan-command"] == "gpuplan formats compare w.npy --formats e4m3,e2m1 --json"
    want = json.loads(cli(["formats", "compare", str(tmp_path / "w.npy"), "--formats", "e4m3,e2m1", "--json"]).stdout)
    got = r.json()
    assert got.pop("input").endswith("w.npy") and want.pop("input").endswith("w.npy")  # the server's temporary copy
    assert got == want


def test_gpuplan_web_command_binds_loopback_and_warns_for_another_host(monkeypatch):
    import uvicorn

    seen = []
    monkeypatch.setattr(uvicorn, "run", lambda app, host, port, **kw: seen.append((app, host, port)))
    res = cli(["web"])
    assert res.exit_code == 0 and "warning" not in res.output
    app, host, port = seen[-1]
    assert (host, port) == ("127.0.0.1", 8000)
    from fastapi.testclient import TestClient

    assert TestClient(app, base_url="http://127.0.0.1:8000").get("/plan").status_code == 200
    assert TestClient(app, base_url="http://example.org:8000").get("/plan").status_code == 403

    res = cli(["web", "--host", "0.0.0.0", "--port", "8123", "--allow-host", "gpu-box.lan"])
    assert res.exit_code == 0 and "warning: binding 0.0.0.0" in res.output
    app, host, port = seen[-1]
    assert (host, port) == ("0.0.0.0", 8123)
    assert TestClient(app, base_url="http://gpu-box.lan:8123").get("/plan").status_code == 200
    assert TestClient(app, base_url="http://evil.example:8123").get("/plan").status_code == 403


def test_train_accepts_the_deepspeed_release(client):
    # the api's `deepspeed_release` is a field of POST /api/v1/train (web.endpoints reads api.train's
    # signature): a bad value is a 4xx naming the field, the CLI's one-line message
    body = {"model": "gpt3-125m", "gpus": 8, "tokens": "1B", "framework": "deepspeed", "tp": 1, "pp": 1, "cp": 1,
            "micro_batch": 1, "recompute": "full", "sharding": "zero3"}
    r = client.post("/api/v1/train", json={**body, "deepspeed_release": "0.x"})
    assert 400 <= r.status_code < 500 and r.json()["error"]["field"] == "deepspeed_release"
    assert r.json()["error"]["message"].startswith("--deepspeed-release: '0.x' is not current")
    r = client.post("/api/v1/train", json={**body, "deepspeed_release": "0.5"})
    assert r.status_code == 200 and r.json()["deepspeed_release"] == "0.5"


def test_bad_compile_is_a_4xx_naming_the_field(client):
    for body in ({"model": "gpt3-125m", "gpus": 8, "framework": "torchtitan", "compile": "blocks"},
                 {"model": "gpt3-125m", "gpus": 8, "compile": "model"}):  # megatron: not modelled compiled
        r = client.post("/api/v1/train", json=body)
        assert 400 <= r.status_code < 500, r.text
        assert "--compile" in r.text and "compile" in json.dumps(r.json())



def test_train_endpoint_takes_the_cuda_graph_scope(client):
    body = {"model": "qwen3-30b-a3b", "system": "gb200-nvl72", "gpus": 8, "tp": 1, "pp": 1, "dp": 8, "ep": 8,
            "micro_batch": 1, "seq_len": 4096, "global_batch": 64, "sharding": "zero1", "recompute": "none",
            "precision": "mxfp8"}
    r = client.post("/api/v1/train", json={**body, "cuda_graph_scope": "full_iteration"})
    assert r.status_code == 200, r.text
    assert r.json()["best_plan"]["cuda_graph_scope"] == ["full_iteration"]
    bad = client.post("/api/v1/train", json={**body, "cuda_graph_scope": "moe_preprocess"})
    assert 400 <= bad.status_code < 500 and "moe_preprocess needs moe_router" in bad.text
