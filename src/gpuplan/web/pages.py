"""The pages of `gpuplan web`: one path each (a URL names a page), one HTML shell; the page's
inputs, calls and plots live in static/app.js under the same name."""

from __future__ import annotations

import html
from dataclasses import dataclass


@dataclass(frozen=True)
class Page:
    name: str
    path: str
    title: str
    blurb: str


PAGES: tuple[Page, ...] = (
    Page("plan", "/plan", "Plan", "The cluster for one job: GPUs, fabric, racks, power, cost, break-even."),
    Page("train", "/train", "Train", "Best parallel plan, why the others lose, step time and memory per GPU."),
    Page("fit", "/fit", "Fit", "Largest batch, longest sequence, fewest GPUs that fit in memory."),
    Page("serve", "/serve", "Serve", "TTFT/TPOT and throughput, the latency-throughput frontier, capacity and $/M tokens."),
    Page("compare", "/compare", "Compare", "GPUs and systems side by side with sources; one workload's time and cost on each."),
    Page("kernel", "/kernel", "Kernel", "Occupancy against block size; the roofline with your kernels as points."),
    Page("formats", "/formats", "Formats", "Quantisation error per number format, for a random or uploaded tensor."),
    Page("validate", "/validate", "Validate", "Published measurements shipped with gpuplan, or your own CSV: "
         "predicted vs measured, per row and per family."),
    Page("calibrate", "/calibrate", "Calibrate", "Fit the efficiency knobs to your own measurements (CSV) and "
         "download the profile."),
    Page("datacenter", "/datacenter", "Data centre", "Fabric bill of materials, power and total cost of ownership."),
)

BY_NAME = {p.name: p for p in PAGES}

SHELL = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gpuplan · {title}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/static/style.css">
<script src="/static/vendor/plotly.min.js"></script>
</head><body data-page="{name}">
<header><a class="brand" href="/">gpuplan</a><nav>{nav}</nav><a class="docs" href="/docs">API</a></header>
<main>
<h1>{title}</h1><p class="blurb">{blurb}</p>
<div class="layout">
<form id="inputs" autocomplete="off" onsubmit="return false"></form>
<section id="out"><div id="status" role="status"></div><div id="error" role="alert" hidden></div><div id="results"></div>
<details id="repro" open><summary>Reproduce this page</summary><pre id="command"></pre>
<details><summary>JSON</summary><pre id="json"></pre></details></details></section>
</div></main>
<script type="module" src="/static/app.js"></script>
</body></html>
"""


def page_html(name: str) -> str:
    page = BY_NAME[name]
    here = ' class="here" aria-current="page"'
    nav = "".join(f'<a href="{p.path}"{here if p.name == name else ""}>{html.escape(p.title)}</a>' for p in PAGES)
    return SHELL.format(name=page.name, title=html.escape(page.title), blurb=html.escape(page.blurb), nav=nav)
