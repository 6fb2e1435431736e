"""`gpuplan web` end to end in a real headless Chromium (Debian's chromium driven by Playwright;
`.ci/run` installs it with apt). Every page loads without console errors, changing an input updates
the numbers, and a number on the page equals the CLI's JSON. Without a Chromium these tests skip with
one line (conftest.chromium_or_skip), except under CI=true, where they fail."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from .conftest import DATA, chromium_or_skip, cli, cli_json

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def chromium() -> Path:
    return chromium_or_skip()


@pytest.fixture(scope="module")
def server(chromium):
    import uvicorn

    from gpuplan.web.app import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(create_app("127.0.0.1", port), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser(chromium):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(chromium), args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    pg = context.new_page()
    pg.problems = []  # console errors and uncaught exceptions
    pg.on("console", lambda m: m.type == "error" and pg.problems.append(m.text))
    pg.on("pageerror", lambda e: pg.problems.append(str(e)))
    yield pg
    context.close()


def updates(pg) -> int:
    return int(pg.evaluate("Number(document.body.dataset.ready || 0)"))


def wait_updates(pg, n: int) -> None:
    pg.wait_for_function(f"Number(document.body.dataset.ready || 0) >= {n}", timeout=60_000)


def stat(pg, key: str) -> float:
    return float(pg.get_attribute(f'.stat[data-key="{key}"]', "data-value"))


# "/" is the Plan page (its path /plan is checked in test_api.py); a handful of loads keeps CI short
PAGES = ["/", "/train", "/fit", "/serve", "/compare", "/kernel", "/formats", "/validate", "/calibrate", "/datacenter"]


def test_every_page_loads_without_console_errors(server, page):
    for path in PAGES:
        page.goto(server + path)
        wait_updates(page, 1)
        assert page.is_hidden("#error"), (path, page.text_content("#error"))
        assert page.text_content("#command").startswith("gpuplan ") or path == "/calibrate"  # an upload, on Run
        assert page.problems == [], (path, page.problems)
    # the pages drew their plots with the bundled plotly.js
    page.goto(server + "/datacenter")
    wait_updates(page, 1)
    assert page.locator(".plot .main-svg").count() >= 2


def test_datacenter_compares_clouds_like_for_like_and_lists_assumptions(server, page):
    # issue "Plans a practitioner would sign": one row per provider and term (never GCP reserved
    # beside RunPod on-demand unlabelled), and every `dc assumptions` row on the page
    page.goto(server + "/datacenter")
    wait_updates(page, 1)
    t = cli_json("gpuplan dc tco --json")
    rows = page.locator('[data-table="clouds"] tbody tr')
    assert rows.count() == len(t["cloud_comparison"]) > 1
    providers = page.locator('[data-table="clouds"] tbody tr td:first-child').all_text_contents()
    assert providers == [o["provider"] for o in t["cloud_comparison"]]
    # a provider's rows are adjacent: each provider appears in one run
    runs = [p for i, p in enumerate(providers) if i == 0 or providers[i - 1] != p]
    assert len(runs) == len(set(providers))
    keys = page.locator('[data-table="assumptions"] tbody tr td:first-child').all_text_contents()
    assert keys == [r["key"] for r in cli_json("gpuplan dc assumptions --json")]
    assert page.problems == []


def test_train_numbers_equal_the_cli_and_follow_the_inputs(server, page):
    page.goto(server + "/train?model=gpt3-6.7b&gpus=64&tokens=10B")  # the URL restores the inputs
    wait_updates(page, 1)
    assert page.input_value("#f-gpus") == "64"
    first = page.text_content("#command").splitlines()[0]
    assert first == "gpuplan train gpt3-6.7b --gpus 64 --tokens 10B --json"
    days_64 = stat(page, "days")
    assert days_64 == cli_json(first)["days"]  # JS prints a double's shortest round-trip text: exact

    n = updates(page)
    page.fill("#f-gpus", "128")
    wait_updates(page, n + 1)
    assert "gpus=128" in page.url
    line = page.text_content("#command").splitlines()[0]
    assert line == "gpuplan train gpt3-6.7b --gpus 128 --tokens 10B --json"
    days_128 = stat(page, "days")
    assert days_128 == cli_json(line)["days"]
    assert days_128 < days_64  # twice the GPUs: fewer days
    assert page.locator('[data-table="top-plans"] tbody tr').count() == 5
    assert page.problems == []


def test_fit_fine_tuning_checkbox_reaches_the_api_as_the_cli_flag(server, page):
    # QLoRA Llama-2-7B on one RTX 4090: ticking base_matmul_keeps_input runs the CLI's
    # --base-matmul-keeps-input, and the page shows that command's total (cli.fine_tuning_options)
    page.goto(server + "/fit?model=llama-2-7b&gpu=rtx-4090&gpus=1&tp=1&pp=1&seq_len=2048&finetune=qlora")
    wait_updates(page, 1)
    first = page.text_content("#command").splitlines()[0]
    assert first == "gpuplan fit train llama-2-7b --gpu rtx-4090 --gpus 1 --seq-len 2048 --finetune qlora --json"
    plain = stat(page, "total_gib")
    assert plain == cli_json(first)["per_gpu_gib"]["total"]
    n = updates(page)
    page.check("#f-base_matmul_keeps_input")
    wait_updates(page, n + 1)
    assert "base_matmul_keeps_input=1" in page.url
    line = page.text_content("#command").splitlines()[0]
    assert line == first.replace(" --json", " --base-matmul-keeps-input --json")
    kept = stat(page, "total_gib")
    assert kept == cli_json(line)["per_gpu_gib"]["total"]
    assert kept > plain  # each 4-bit matmul's input is kept as well: more activation memory
    assert page.problems == []


def test_fit_chunked_loss_changes_the_total_as_the_cli_says(server, page):
    # LoRA Llama-2-7B (vocab 32000) on one H100 at 4096 tokens: ticking chunked_loss runs the CLI's
    # --chunked-loss (torchtune CEWithChunkedOutputLoss: no fp32 copy of all the logits), and the page
    # shows that command's total; the logits' fp32 copy is 4096 x 32000 x 4 B = 0.49 GiB, so it falls
    page.goto(server + "/fit?model=llama-2-7b&gpu=h100-sxm5-80gb&gpus=1&tp=1&pp=1&seq_len=4096&finetune=lora")
    wait_updates(page, 1)
    first = page.text_content("#command").splitlines()[0]
    assert first == "gpuplan fit train llama-2-7b --gpu h100-sxm5-80gb --gpus 1 --seq-len 4096 --finetune lora --json"
    plain = stat(page, "total_gib")
    assert plain == cli_json(first)["per_gpu_gib"]["total"]
    n = updates(page)
    page.check("#f-chunked_loss")
    wait_updates(page, n + 1)
    assert "chunked_loss=1" in page.url
    line = page.text_content("#command").splitlines()[0]
    assert line == first.replace(" --json", " --chunked-loss --json")
    chunked = stat(page, "total_gib")
    assert chunked == cli_json(line)["per_gpu_gib"]["total"]
    assert chunked < plain
    assert page.problems == []


def test_plan_framework_reaches_the_search_as_the_cli_flag(server, page):
    # the Plan page's framework and compile inputs are `gpuplan plan --framework --compile`: the days it
    # shows are that command's, and its training-stack card names the stack and the compiled parts
    page.goto(server + "/plan?model=gpt3-125m&tokens=1B&gpus=8")
    wait_updates(page, 1)
    first = page.text_content("#command")
    assert first == "gpuplan plan gpt3-125m --system dgx-h100 --tokens 1B --gpus 8 --json"
    assert stat(page, "days") == cli_json(first)["days"]
    n = updates(page)
    page.select_option("#f-framework", "torchtitan")
    wait_updates(page, n + 1)
    n = updates(page)
    page.select_option("#f-compile", "model+loss")
    wait_updates(page, n + 1)
    assert "framework=torchtitan" in page.url and "compile=model%2Bloss" in page.url
    line = page.text_content("#command")
    assert line == first.replace(" --json", " --framework torchtitan --compile model+loss --json")
    d = cli_json(line)
    assert stat(page, "days") == d["days"]
    assert page.text_content('[data-key="best_plan"]').endswith("compile model+loss · optimizer step fused")
    assert page.locator('[data-key="framework_defaults_assumed"] li').count() == len(d["framework_defaults_assumed"])
    assert page.problems == []


def test_bad_input_gets_a_field_message(server, page):
    page.goto(server + "/train?gpus=0")
    wait_updates(page, 1)
    field = page.locator('.field[data-field="gpus"]')
    assert "invalid" in field.get_attribute("class")
    assert field.locator(".msg").text_content() == "--gpus: must be an integer > 0, got 0"  # the CLI's line after "error: "
    assert page.text_content("#error") == "error: --gpus: must be an integer > 0, got 0"
    assert page.text_content("#command") == "gpuplan train gpt3-175b --gpus 0 --json"  # the CLI line of that error


def test_validate_upload_shows_rows_and_scatter(server, page):
    page.goto(server + "/validate")
    wait_updates(page, 1)
    # by default the page validates the training measurements shipped with gpuplan
    assert page.input_value("#f-builtin") == "training"
    assert page.text_content("#command") == "gpuplan validate --builtin training --json"
    shipped = cli_json("gpuplan validate --builtin training --json")
    assert stat(page, "rows") == len(shipped["rows"]) and stat(page, "mape_pct") == shipped["summary"]["overall"]["mape_pct"]
    n = updates(page)
    page.select_option("#f-builtin", "collectives")
    wait_updates(page, n + 1)
    assert "builtin=collectives" in page.url
    assert stat(page, "rows") == 26  # collectives.csv (2026-11-28): 26 rows
    page.set_input_files("#f-file", str(DATA / "sample_training.csv"))
    wait_updates(page, n + 2)
    want = cli_json(f"gpuplan validate {DATA / 'sample_training.csv'} --json")
    assert stat(page, "rows") == len(want["rows"]) == 4
    assert stat(page, "mape_pct") == want["summary"]["overall"]["mape_pct"]
    assert page.locator('[data-table="rows"] tbody tr').count() == 4
    assert page.text_content("#command") == "gpuplan validate sample_training.csv --json"
    assert page.problems == []


def test_serve_disaggregated_capacity_table_equals_the_cli(server, page):
    page.goto(server + "/serve?model=llama-3-8b&capacity=true&disaggregated=true&plan_rate=4&ttft_ms=3000&tpot_ms=10"
                       "&input_len=8192&output_len=32")
    wait_updates(page, 1)
    assert page.is_hidden("#error"), page.text_content("#error")
    line = next(ln for ln in page.text_content("#command").splitlines() if "--disaggregated" in ln)
    want = cli_json(line)
    assert stat(page, "capacity_gpus") == want["best"]["gpus"]
    assert stat(page, "disaggregated_saving_percent") == want["disaggregated_saving_percent"]
    rows = page.locator('[data-table="disaggregated"] tbody tr')
    assert rows.count() == min(20, len(want["options"]))
    assert page.problems == []


def test_serve_engine_selector_runs_that_engine_as_the_cli_does(server, page):
    # vLLM's max_num_seqs 256 caps a closed loop of 512 (tests/inference/test_engines.py): the page's
    # numbers are those of `serve run --engine vllm`, and its selector lists every engine
    page.goto(server + "/serve?model=llama-3-8b&engine=vllm&concurrency=512&input_len=128&output_len=128")
    wait_updates(page, 1)
    assert page.is_hidden("#error"), page.text_content("#error")
    assert page.input_value("#f-engine") == "vllm"
    options = page.locator("#f-engine option").all_text_contents()
    assert options == ["generic", "tensorrt-llm", "vllm", "sglang", "lmdeploy", "tgi"]
    line = next(ln for ln in page.text_content("#command").splitlines() if "serve run" in ln)
    assert "--engine vllm" in line
    want = cli_json(line)
    assert want["engine"] == "vllm"
    assert stat(page, "requests_per_s") == want["requests_per_s"]
    assert stat(page, "ttft_p90_ms") == want["ttft_p90_ms"]
    assert page.problems == []


def test_serve_capacity_table_shows_layouts_and_both_loops(server, page):
    # Qwen3-30B-A3B (MoE, 128 experts): the co-located plan lists each layout (tp, ep, attention DP) with
    # its closed-loop and Poisson p90s and why it loses, as `serve plan --json` does
    page.goto(server + "/serve?model=qwen3-30b-a3b&capacity=true&plan_rate=4&input_len=1024&output_len=128")
    wait_updates(page, 1)
    assert page.is_hidden("#error"), page.text_content("#error")
    line = next(ln for ln in page.text_content("#command").splitlines() if "serve plan" in ln)
    want = cli_json(line)
    assert stat(page, "capacity_gpus") == want["best"]["gpus"]
    rows = page.locator('[data-table="capacity"] tbody tr')
    assert rows.count() == len(want["candidates"])
    first = rows.nth(0).locator("td")
    assert first.nth(0).text_content() == want["best"]["layout"]
    assert first.nth(8).text_content() == "best"
    assert page.problems == []


def test_serve_capacity_at_the_bands_pessimistic_edge(server, page):
    # serve plan --confidence 0.8: Llama-3-8B at 20 req/s with a 18 ms TPOT target needs 3 H100 on the
    # point prediction but 4 when p90s x the latency band's upper factor (1.25) must meet it
    # (tests/inference/test_serve_plan_confidence.py derives both); the page shows the CLI's plan and why
    page.goto(server + "/serve?model=llama-3-8b&capacity=true&plan_rate=20&tpot_ms=18&confident=true")
    wait_updates(page, 1)
    assert page.is_hidden("#error"), page.text_content("#error")
    line = next(ln for ln in page.text_content("#command").splitlines() if "serve plan" in ln)
    assert "--confidence 0.8" in line
    want = cli_json(line)
    assert stat(page, "capacity_gpus") == want["best"]["gpus"] == 4
    note = page.text_content('[data-key="confidence_h100-sxm5-80gb"]')
    # the factor is exp(q90) of the shipped table's leave-engine-out latency band (1.24-1.25 as refit)
    factor = want["confidence"]["by_gpu"]["h100-sxm5-80gb"]["latency_factor"]
    assert f"x{factor:.2f}" in note and "unseen-engine" in note
    assert page.problems == []


def calibrate_cli_json(monkeypatch, line: str, folder: Path) -> dict:
    """The JSON of the Calibrate page's command line, run in the folder of the uploaded file."""
    monkeypatch.chdir(folder)
    return cli_json(line)


def test_calibrate_upload_shows_the_fit_of_the_cli_and_offers_the_profile(server, page, monkeypatch, tmp_path):
    # the 12 rows of one public family (meg21-t2: Megatron-LM SC21 Table 2, validation/training.csv)
    csv = DATA / "meg21-t2.csv"
    shot = os.environ.get("GPUPLAN_WEB_SCREENSHOT")  # docs/web-calibrate.png: GPUPLAN_WEB_SCREENSHOT=docs/web-calibrate.png
    shot = Path(shot).resolve() if shot else None  # resolved before the test changes folder
    page.goto(server + "/calibrate")
    wait_updates(page, 1)
    assert page.locator("#run").is_visible()
    n = updates(page)
    page.set_input_files("#f-file", str(csv))
    page.wait_for_timeout(300)
    assert updates(page) == n  # choosing the file does not start the fit; Run does
    page.click("#run")
    wait_updates(page, n + 1)
    assert page.is_hidden("#error"), page.text_content("#error")
    line = page.text_content("#command")
    assert line == "gpuplan calibrate fit meg21-t2.csv --json"
    want = calibrate_cli_json(monkeypatch, line, DATA)
    # the page's before / after MAPE, in-sample and leave-one-out, are the CLI's numbers exactly
    # (data-value holds JS's shortest round-trip text of the double)
    for key in ("mape_before_pct", "mape_after_pct", "loo_mape_before_pct", "loo_mape_after_pct"):
        cell = page.locator(f'[data-table="error"] td[data-key="{key}"]')
        assert float(cell.get_attribute("data-value")) == want["error"][key], key
    assert stat(page, "rows_used") == want["error"]["rows_used"] == 12
    assert page.locator('[data-table="knobs"] tbody tr').count() == len(want["values"])
    assert page.locator('[data-table="parameters"] tbody tr').count() == len(want["parameters"])
    assert page.locator('[data-table="rows"] tbody tr').count() == 12
    assert page.locator(".plot .scatterlayer .trace").count() >= 3  # y = x, before, after (leave-one-out: legend only)
    assert "leave-one-out" in page.text_content('[data-table="error"]') and "honest" in page.text_content('[data-table="error"]')
    # the download is profile.toml: the file `calibrate fit --out` writes (but for its time stamp)
    link = page.locator("#download-profile")
    assert link.get_attribute("download") == "profile.toml" and link.get_attribute("href").startswith("blob:")
    with page.expect_download() as dl:
        link.click()
    assert dl.value.suggested_filename == "profile.toml"
    got = Path(dl.value.path()).read_text()
    res = cli(["calibrate", "fit", "meg21-t2.csv", "--out", str(tmp_path / "profile.toml")])
    assert res.exit_code == 0, res.output
    strip = lambda t: [ln for ln in t.splitlines() if not ln.startswith("created = ")]  # noqa: E731
    assert strip(got) == strip((tmp_path / "profile.toml").read_text())
    assert "gpuplan --calibration profile.toml" in page.text_content("#results")
    assert page.problems == []
    if shot:
        page.evaluate("window.scrollTo(0, 0)")  # the inputs are sticky: put them at the top
        page.screenshot(path=str(shot), full_page=True)


def test_calibrate_bad_file_and_bad_knob_mark_their_fields(server, page, monkeypatch, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("id,metric,value\n")
    page.goto(server + "/calibrate")
    wait_updates(page, 1)
    n = updates(page)
    page.set_input_files("#f-file", str(empty))
    page.click("#run")
    wait_updates(page, n + 1)
    # the CLI's line after "error: " (exit 2 there), under the file picker: its field is `file`
    message = "empty.csv: no rows (a header and at least one measured row are needed)"
    res = cli(["calibrate", "fit", str(empty)])
    assert res.exit_code == 2 and res.output.strip() == "error: " + message
    field = page.locator('.field[data-field="file"]')
    assert "invalid" in field.get_attribute("class") and field.locator(".msg").text_content() == message
    assert page.text_content("#error") == "error: " + message
    assert page.text_content("#command") == "gpuplan calibrate fit empty.csv --json"

    # an unknown knob marks the knobs input; the rows are fine
    n = updates(page)
    page.set_input_files("#f-file", str(DATA / "sample_training.csv"))
    page.fill("#f-knobs", "efficiency.hbm,no.such.knob")
    page.click("#run")
    wait_updates(page, n + 1)
    assert "invalid" not in page.locator('.field[data-field="file"]').get_attribute("class")
    knobs = page.locator('.field[data-field="knobs"]')
    assert knobs.locator(".msg").text_content() == "knobs: unknown knob(s) no.such.knob; see `gpuplan calibrate knobs`"
    assert "knobs=efficiency.hbm" in page.url  # the options live in the URL (the file cannot)


def test_train_result_offers_the_launch_configs_as_downloads(server, page):
    page.goto(server + "/train?model=llama-3-8b&gpus=64&tokens=10B")
    wait_updates(page, 1)
    links = page.locator('[data-key="launch_configs"] a')
    assert [links.nth(i).get_attribute("data-target") for i in range(links.count())] == [
        "megatron", "nemo", "torchtitan", "deepspeed", "maxtext"]
    with page.expect_download() as info:
        page.click('[data-key="launch_configs"] a[data-target="torchtitan"]')
    download = info.value
    assert download.suggested_filename == "torchtitan.toml"
    text = open(download.path()).read()
    # the text `gpuplan train ... --emit torchtitan` prints for the page's inputs
    res = cli(["train", "llama-3-8b", "--gpus", "64", "--tokens", "10B", "--emit", "torchtitan"])
    assert res.exit_code == 0 and text == res.stdout
    assert page.problems == []


# ---- a product: offline, formatted, inputs on top, each page looked at ----------------------------

#: every page the app serves, and /docs (Swagger UI from bundled files)
ALL_PAGES = ["/", "/train", "/fit", "/serve", "/compare", "/kernel", "/formats", "/validate", "/calibrate", "/datacenter"]


def block_remote(context) -> list[str]:
    """Route every request of `context` through a check: one for another host than 127.0.0.1 is
    aborted and recorded (the list returned), so a page that needs the network shows it here."""
    attempted: list[str] = []

    def check(route):
        from urllib.parse import urlsplit

        url = route.request.url
        parts = urlsplit(url)
        if parts.scheme in ("data", "blob") or parts.hostname == "127.0.0.1":
            route.continue_()
        else:
            attempted.append(url)
            route.abort()

    context.route("**/*", check)
    return attempted


def shots_dir() -> Path:
    """Where the page screenshots go: $GPUPLAN_WEB_SHOTS, else a fresh temporary folder."""
    import tempfile

    folder = Path(os.environ.get("GPUPLAN_WEB_SHOTS") or tempfile.mkdtemp(prefix="gpuplan-shots-"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def docs_shot(pg, name: str) -> None:
    """With GPUPLAN_WEB_DOCS=docs, the top 1000 pixels of the page as docs/NAME (the pictures in docs/web.md)."""
    folder = os.environ.get("GPUPLAN_WEB_DOCS")
    if folder:
        pg.evaluate("window.scrollTo(0, 0)")
        pg.screenshot(path=str(Path(folder) / name), full_page=True, clip={"x": 0, "y": 0, "width": pg.viewport_size["width"], "height": 1000})


def test_docs_renders_every_operation_offline(server, browser):
    from gpuplan.web.endpoints import ENDPOINTS

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    attempted = block_remote(context)
    pg = context.new_page()
    problems: list[str] = []
    pg.on("console", lambda m: m.type == "error" and problems.append(m.text))
    pg.goto(server + "/docs")
    # one operation per api endpoint, plus the three uploads (validate, calibrate/fit, formats/compare-file)
    want = len(ENDPOINTS) + 3
    pg.wait_for_function(f"document.querySelectorAll('.opblock').length >= {want}", timeout=30_000)
    assert pg.locator(".opblock").count() == want
    paths = [t.replace("\u200b", "") for t in pg.locator(".opblock-summary-path").all_text_contents()]
    assert paths.count("/api/v1/serve/plan") == 1 and len(set(paths)) == want
    assert "gpuplan" in pg.text_content(".info .title")
    shot = shots_dir() / "docs.png"
    pg.screenshot(path=str(shot))
    assert attempted == [] and problems == [], (attempted, problems)
    context.close()


def test_every_page_fits_its_inputs_above_the_fold_offline(server, browser):
    # 1280x800: the whole input panel of every page sits above the fold, and no page asks for anything
    # from another host (scripts, styles, fonts, favicon); each page is screenshot (shots_dir)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    attempted = block_remote(context)
    pg = context.new_page()
    problems: list[str] = []
    pg.on("console", lambda m: m.type == "error" and problems.append(m.text))
    pg.on("pageerror", lambda e: problems.append(str(e)))
    folder = shots_dir()
    for path in ALL_PAGES:
        pg.goto(server + path)
        wait_updates(pg, 1)
        box = pg.locator("#inputs").bounding_box()
        assert box["y"] < 200 and box["y"] + box["height"] <= 800, (path, box)
        assert pg.is_hidden("#error"), (path, pg.text_content("#error"))
        name = path.strip("/") or "plan"
        pg.screenshot(path=str(folder / f"{name}.png"), full_page=True)
        if path == "/train":
            docs_shot(pg, "web-train.png")
    assert attempted == [] and problems == [], (attempted, problems)
    context.close()


def test_tables_show_units_and_the_csv_keeps_raw_values(server, page):
    # `fit train` of GPT-3 175B on 1,024 H100s at tp 8, pp 8: the memory table shows GiB, never raw bytes
    page.goto(server + "/fit?tp=8&pp=8")
    wait_updates(page, 1)
    want = cli_json(page.text_content("#command").splitlines()[0])
    rows = page.locator('[data-table="memory-bytes"] tbody tr')
    cells = {rows.nth(i).locator("td").nth(0).text_content(): rows.nth(i).locator("td").nth(1).text_content()
             for i in range(rows.count())}
    # 62,599,052,288 B / 2^30 = 58.30 GiB (58.2999...; four significant digits)
    assert want["per_gpu_bytes"]["total"] == 62599052288.0
    assert cells["Total"] == "58.3 GiB"
    # 536,870,912 B = 2^29 B = 512 MiB exactly
    assert cells["Other · cuda context"] == "512 MiB"
    assert not any(c.replace(",", "").replace(".", "").isdigit() for c in cells.values())  # no bare numbers
    with page.expect_download() as dl:
        page.locator('[data-table="memory-bytes"]').locator("xpath=ancestor::section").locator("button.export").click()
    csv = Path(dl.value.path()).read_text().splitlines()
    assert csv[0] == "quantity,value"
    assert "total,62599052288" in csv  # the raw JSON key and value


def test_memory_bar_marks_capacity_and_usable_memory(server, page):
    page.goto(server + "/fit?tp=8&pp=8")
    wait_updates(page, 1)
    want = cli_json(page.text_content("#command").splitlines()[0])
    # 90% of 80 GiB may be used (workloads.memory_headroom: memory.usable_fraction default 0.90)
    assert want["usable_gib"] == pytest.approx(72.0, rel=1e-12)
    notes = page.locator(".plot .annotation-text").all_text_contents()
    assert "h100-sxm5-80gb: 80 GiB" in notes and "usable: 72 GiB" in notes


def test_serve_frontier_marks_the_targets_and_this_deployment_and_plans_over_gpu_types(server, page):
    page.goto(server + "/serve?model=llama-3-8b&input_len=1024&output_len=128&ttft_ms=500&tpot_ms=25"
                       "&capacity=true&plan_rate=4&plan_gpus=h100-sxm5-80gb,a100-sxm4-80gb")
    wait_updates(page, 1)
    assert page.is_hidden("#error"), page.text_content("#error")
    lines = page.text_content("#command").splitlines()
    run = cli_json(next(ln for ln in lines if "serve run" in ln))
    # the deployment's frontier point: per GPU = output tokens/s / (tp x pp), per user = 1e3 / mean TPOT
    assert run["tp"] * run["pp"] == 1
    assert run["tokens_per_s_per_gpu"] == pytest.approx(run["output_tokens_per_s"], rel=1e-12)
    assert run["tokens_per_s_per_user"] == pytest.approx(1e3 / run["tpot_ms"], rel=1e-12)
    frontier = page.locator(".plot").nth(0)
    star = frontier.evaluate("el => el.data.find((t) => t.name.startsWith('this deployment'))")
    assert star["x"] == [run["tokens_per_s_per_user"]] and star["y"] == [run["tokens_per_s_per_gpu"]]
    # the TPOT target 25 ms is the vertical line at 1e3 / 25 = 40 tokens/s per user; the TTFT target
    # 500 ms the horizontal line of TTFT against load
    shapes = frontier.evaluate("el => el.layout.shapes.map((s) => [s.x0, s.x1])")
    assert shapes == [[40, 40]]
    ttft = page.locator(".plot").nth(1).evaluate("el => el.layout.shapes.map((s) => [s.y0, s.y1])")
    assert ttft == [[500, 500]]
    notes = page.locator(".plot .annotation-text").all_text_contents()
    assert "TPOT target 25 ms" in notes and "TTFT target 500 ms" in notes
    # the capacity plan over both GPU types, as `serve plan --gpu A --gpu B`
    line = next(ln for ln in lines if "serve plan" in ln)
    words = line.split()
    assert sorted(words[i + 1] for i, w in enumerate(words) if w == "--gpu") == ["a100-sxm4-80gb", "h100-sxm5-80gb"]
    plan = cli_json(line)
    layouts = page.locator('[data-table="capacity"] tbody tr td:first-child').all_text_contents()
    assert layouts == [c["layout"] for c in plan["candidates"]]
    assert {lay.split()[0] for lay in layouts} == {"h100-sxm5-80gb", "a100-sxm4-80gb"}
    assert stat(page, "capacity_gpus") == plan["best"]["gpus"]
    # a formatted cell: the best candidate's Poisson TTFT p90 with its unit, as format.js writes it
    # (thousands separators, at most four significant digits: within 0.05% of the JSON's double)
    import re

    cell = page.locator('[data-table="capacity"] tbody tr').nth(0).locator("td").nth(3).text_content()
    assert re.fullmatch(r"\d{1,3}(,\d{3})*(\.\d{1,2})? ms", cell), cell
    assert float(cell[:-3].replace(",", "")) == pytest.approx(plan["candidates"][0]["open_loop_ttft_p90_ms"], rel=5e-4)
    assert page.problems == []
    page.screenshot(path=str(shots_dir() / "serve-capacity.png"), full_page=True)
    docs_shot(page, "web-serve.png")


def test_fit_page_fine_tuning_seed_case_itemised_bytes_equal_the_api(server, page, tmp_path):
    # issue 31's seed case: llama-2-70b QLoRA r64 on two RTX 4090s, FSDP, parameters offloaded
    from gpuplan import api

    page.goto(server + "/fit?model=llama-2-70b&gpu=rtx-4090&gpus=2&tp=1&pp=1&sharding=fsdp")
    wait_updates(page, 1)
    for select, value in (("#f-finetune", "qlora"), ("#f-offload", "params")):
        n = updates(page)
        page.select_option(select, value)
        wait_updates(page, n + 1)
    n = updates(page)
    page.fill("#f-lora_rank", "64")
    wait_updates(page, n + 1)
    assert page.is_hidden("#error"), page.text_content("#error")
    line = page.text_content("#command").splitlines()[0]
    for flag in ("--finetune qlora", "--lora-rank 64", "--offload params", "--sharding fsdp"):
        assert flag in line, line
    want = api.fit_train("llama-2-70b", "rtx-4090", 2, sharding="fsdp",
                         fine_tuning={"finetune": "qlora", "lora_rank": 64, "offload": "params"}).to_dict()
    shown = {k: page.get_attribute(f'[data-table="memory-bytes"] tr[data-key="{k}"]', "data-value")
             for k in ("weights", "gradients", "optimizer", "total")}
    assert {k: float(v) for k, v in shown.items()} == {k: want["per_gpu_bytes"][k] for k in shown}
    for part in ("activations", "other"):
        for key, value in want[f"{part}_bytes"].items():
            cell = page.get_attribute(f'[data-table="memory-bytes"] tr[data-key="{part}.{key}"]', "data-value")
            assert float(cell) == value, (part, key)
    assert stat(page, "host_offload_gib") == want["host_offload_gib"]
    assert stat(page, "trainable_params_per_gpu") == want["trainable_params_per_gpu"]
    assert "qlora r64" in page.text_content('[data-key="fine_tuning"]')
    assert "training/memory/finetune" in page.text_content('[data-key="memory_band_80pct"]')
    # a paged optimizer: its states are shown apart, outside PyTorch's counters and not counted against fits
    n = updates(page)
    page.select_option("#f-offload", "none")
    wait_updates(page, n + 1)
    n = updates(page)
    page.select_option("#f-optimizer", "paged_adamw_8bit")
    wait_updates(page, n + 1)
    assert "not counted against fits" in page.text_content('[data-key="fine_tuning"]')
    page.screenshot(path=str(tmp_path / "fit_finetune.png"), full_page=True)
    assert page.problems == []
