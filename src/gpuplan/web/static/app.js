// gpuplan web: the page shell's module (no build step; client.js calls the API, widgets.js draws,
// format.js writes numbers, training_pages.js holds Plan / Train / Fit). Each page declares its inputs
// (named as gpuplan.api's keyword arguments, so an error's `field` finds its input), the API calls
// it makes and how it draws the answers. The URL's query string holds every input that differs
// from its default, so a URL restores a page; each call's `gpuplan ... --json` line is shown.

import { GPUS, MODELS, SYSTEMS, abortCurrent, api, apiUpload, call, currentController, newController, pick, recordCall, recordedCalls, resetCalls } from "./client.js";
import { fmt, label, num, usd } from "./format.js";
import { TRAINING_PAGES, planLabel } from "./training_pages.js";
import { $, downloads, h, kv, out, plot, section, stacked, stats, table } from "./widgets.js";

// ---- inputs ---------------------------------------------------------------------------------
// field: {name, label, type: text|number|select|check|multi|file, def, options (array or async fn), help}
const params = new URLSearchParams(location.search);

function initial(f) {
  if (f.type === "file") return null;
  if (params.has(f.name)) {
    const v = params.get(f.name);
    if (f.type === "check") return v === "1" || v === "true";
    if (f.type === "multi") return v ? v.split(",") : [];
    return v;
  }
  return f.def ?? (f.type === "multi" ? [] : f.type === "check" ? false : "");
}

async function buildForm(page) {
  const form = $("#inputs");
  for (const f of page.fields) {
    const id = `f-${f.name}`;
    const v = initial(f);
    let input;
    const opts = typeof f.options === "function" ? await f.options() : f.options || [];
    if (f.type === "select") {
      input = h("select", { id, name: f.name }, opts.map((o) => h("option", { value: o, text: o === "" ? "(auto)" : o })));
      input.value = v;
    } else if (f.type === "multi") {
      const order = [...opts.filter((o) => v.includes(o)), ...opts.filter((o) => !v.includes(o))]; // the chosen ones in sight
      input = h("div", { id, class: "multi", "data-name": f.name },
        order.map((o) => h("label", {}, h("input", { type: "checkbox", value: o, checked: v.includes(o) }), " " + o)));
    } else if (f.type === "check") {
      input = h("input", { id, name: f.name, type: "checkbox", checked: v });
    } else if (f.type === "file") {
      input = h("input", { id, name: f.name, type: "file", accept: f.accept });
    } else {
      input = h("input", { id, name: f.name, type: f.type === "number" ? "number" : "text", value: v, step: f.step || "any", placeholder: f.placeholder || "" });
    }
    // a help line is cut to the field's width (the whole text in its tooltip): the inputs stay compact
    const text = f.label || f.name.replace(/_/g, " ");
    const cls = f.type === "multi" || f.type === "file" ? "field wide" : f.type === "check" ? "field check" : "field";
    form.append(h("div", { class: cls, "data-field": f.name, title: f.help },
      ...(f.type === "check" ? [h("label", { for: id }, input, " " + text)] : [h("label", { for: id, text }), input]),
      f.help ? h("small", { class: "help", text: f.help }) : null, h("small", { class: "msg" })));
  }
  form.append(h("div", { class: "buttons" },
    page.manual ? h("button", { type: "button", id: "run", class: "primary", onclick: () => update(page), text: "Run" }) : null,
    h("button", { type: "button", id: "cancel", hidden: true, onclick: abortCurrent, text: "Cancel" }),
    h("button", { type: "button", id: "reset", onclick: () => { location.search = ""; }, text: "Defaults" })));
}

function values(page) {
  const v = {};
  for (const f of page.fields) {
    const el = document.getElementById(`f-${f.name}`);
    if (f.type === "multi") v[f.name] = [...el.querySelectorAll("input:checked")].map((i) => i.value);
    else if (f.type === "check") v[f.name] = el.checked;
    else if (f.type === "file") v[f.name] = el.files && el.files[0];
    else if (f.type === "number") v[f.name] = el.value === "" ? undefined : Number(el.value);
    else v[f.name] = el.value === "" ? undefined : el.value;
  }
  return v;
}

function syncUrl(page, v) {
  const q = new URLSearchParams();
  for (const f of page.fields) {
    if (f.type === "file") continue;
    const x = v[f.name];
    const d = f.def ?? (f.type === "multi" ? [] : f.type === "check" ? false : "");
    const same = Array.isArray(x) ? x.join(",") === d.join(",") : String(x ?? "") === String(d);
    if (!same) q.set(f.name, Array.isArray(x) ? x.join(",") : f.type === "check" ? (x ? "1" : "0") : x);
  }
  const s = q.toString();
  history.replaceState(null, "", location.pathname + (s ? "?" + s : ""));
}
// ---- one update -----------------------------------------------------------------------------

let PAGE = null;
let profileUrl = null; // the Calibrate page's Blob URL of profile.toml (revoked on the next run) // the page being shown (start)

function showError(e) {
  const box = $("#error");
  box.hidden = false;
  box.textContent = "error: " + e.message;
  if (e.field) {
    // a field the page has no input for (an uploaded file's column, say) marks the page's fallback input
    const f = document.querySelector(`.field[data-field="${e.field}"]`)
      || (PAGE && PAGE.fieldFallback ? document.querySelector(`.field[data-field="${PAGE.fieldFallback}"]`) : null);
    if (f) { f.classList.add("invalid"); $(".msg", f).textContent = e.message; }
  }
}

async function update(page) {
  const mine = newController();
  const v = values(page);
  syncUrl(page, v);
  document.querySelectorAll(".field.invalid").forEach((f) => { f.classList.remove("invalid"); $(".msg", f).textContent = ""; });
  $("#error").hidden = true;
  $("#status").textContent = "computing…";
  $("#cancel").hidden = false;
  document.body.classList.add("busy");
  resetCalls();
  const results = out();
  results.replaceChildren();
  try {
    await page.run(v);
    if (mine !== currentController()) return;
    $("#status").textContent = "";
  } catch (e) {
    if (mine !== currentController()) return;
    if (e.name === "AbortError") { $("#status").textContent = "cancelled"; }
    else {
      $("#status").textContent = "";
      showError(e);
      if (e.command) recordCall({ command: e.command, data: { error: e.message, field: e.field } });
    }
  } finally {
    if (mine === currentController()) { $("#cancel").hidden = true; document.body.classList.remove("busy"); }
  }
  const calls = recordedCalls();
  $("#command").textContent = calls.map((c) => c.command).join("\n");
  $("#json").textContent = calls.length === 1 ? JSON.stringify(calls[0].data, null, 2)
    : JSON.stringify(calls.map((c) => ({ command: c.command, json: c.data })), null, 2);
  document.body.dataset.ready = String(Number(document.body.dataset.ready || 0) + 1);
}

// ---- pages ----------------------------------------------------------------------------------
const SERVE_DTYPES = ["bf16", "fp16", "fp32", "tf32", "fp8", "mxfp8", "int8", "mxfp6", "int4", "mxfp4", "nvfp4"];  // specs.dtypes.StoredFormat
// `serve run|plan --engine` (gpuplan.api.SERVING_ENGINES; tests/web/test_api.py keeps them equal)
const SERVE_ENGINES = ["generic", "tensorrt-llm", "vllm", "sglang", "lmdeploy", "tgi"];

const PAGES = {
  ...TRAINING_PAGES,

  serve: {
    fields: [
      { name: "model", type: "select", options: MODELS, def: "llama-3-8b" },
      { name: "gpu", type: "select", options: GPUS, def: "h100-sxm5-80gb" },
      { name: "tp", type: "number", def: "1" },
      { name: "input_len", type: "number", def: "2048" }, { name: "output_len", type: "number", def: "256" },
      { name: "rate", type: "number", help: "Poisson req/s (blank: saturated closed loop)" },
      { name: "concurrency", type: "number" },
      { name: "weight_dtype", type: "select", options: SERVE_DTYPES, def: "bf16" },
      { name: "kv_dtype", type: "select", options: ["", ...SERVE_DTYPES], def: "",
        help: "(auto): the engine's choice for the weights (tensorrt-llm: fp8 for fp8 / nvfp4 checkpoints), else bf16" },
      { name: "engine", type: "select", options: SERVE_ENGINES, def: "generic",
        help: "serving engine whose defaults run: scheduler, KV memory rule and block size, batch limits, CUDA graphs, TP all-reduce (generic: gpuplan's own)" },
      // the objectives: drawn on the frontier and on TTFT against load, and the capacity plan's targets
      { name: "ttft_ms", type: "number", def: "2000", label: "target p90 TTFT, ms" },
      { name: "tpot_ms", type: "number", def: "50", label: "target p90 TPOT, ms" },
      { name: "capacity", type: "check", label: "capacity plan (slow: ~20 s)" },
      { name: "plan_rate", type: "number", def: "10", label: "capacity: req/s to serve" },
      { name: "plan_gpus", type: "multi", options: GPUS, def: [], label: "capacity: GPU types",
        help: "several: the plan picks the cheapest that meets the targets; none: the GPU above" },
      { name: "disaggregated", type: "check", label: "capacity: also disaggregated prefill/decode" },
      { name: "confident", type: "check", label: "capacity: meet the targets at the 80% band's pessimistic edge",
        help: "serve plan --confidence 0.8: each GPU type's p90s x its latency band's upper factor must meet the targets (co-located only)" },
    ],
    async run(v) {
      const common = pick(v, ["model", "input_len", "output_len", "weight_dtype", "kv_dtype"]);
      const [run, fr] = await Promise.all([
        api("serve/run", { ...common, ...pick(v, ["gpu", "tp", "rate", "concurrency", "engine"]) }),
        api("serve/frontier", { ...common, ...pick(v, ["gpu", "engine"]) }),
      ]);
      const d = run.data;
      stats([["ttft_p90_ms", "TTFT p90", d.ttft_p90_ms, "ms"], ["tpot_p90_ms", "TPOT p90", d.tpot_p90_ms, "ms"],
        ["output_tokens_per_s", "output tokens/s", d.output_tokens_per_s], ["requests_per_s", "requests/s", d.requests_per_s],
        ["kv_cache_gib_per_gpu", "KV cache per GPU", d.kv_cache_gib_per_gpu, "GiB"], ["max_concurrent_sequences", "max sequences", d.max_concurrent_sequences]]);
      const pts = fr.data.points;
      const tps = [...new Set(pts.map((p) => p.tp))].sort((a, b) => a - b);
      // the objectives (p90 TTFT and TPOT): a point meets them when both its p90s are within (filled
      // marker; hollow when not). The x axis is 1e3 / mean TPOT (capacity.frontier_coordinates), so the
      // TPOT target is the vertical line x = 1e3 / target: points left of it are slower than the target
      const meets = (p) => p.ttft_p90_ms <= v.ttft_ms && (p.tpot_p90_ms ?? 1e3 / p.tokens_per_s_per_user) <= v.tpot_ms;
      const targets = v.ttft_ms !== undefined && v.tpot_ms !== undefined;
      const line = (k, x0, x1, y0, y1, text, refs) => ({ shape: { type: "line", x0, x1, y0, y1, xref: refs.xref, yref: refs.yref, line: { color: "#c00", width: 1.5, dash: "dash" } },
        // an annotation on a log axis is placed at log10 of the value (plotly.js), a shape at the value
        note: { x: refs.xref === "paper" ? 1 : x0, y: refs.yref === "paper" ? 1 : refs.ylog ? Math.log10(y0) : y0, xref: refs.xref, yref: refs.yref, text, showarrow: false, xanchor: refs.xref === "paper" ? "right" : "left", yanchor: "bottom", font: { color: "#c00", size: 11 } } });
      const tpotLine = v.tpot_ms ? line("tpot", 1e3 / v.tpot_ms, 1e3 / v.tpot_ms, 0, 1, `TPOT target ${num(v.tpot_ms)} ms`, { yref: "paper" }) : null;
      const here = { type: "scatter", mode: "markers", name: `this deployment (tp=${d.tp}, ${d.load})`, x: [d.tokens_per_s_per_user], y: [d.tokens_per_s_per_gpu],
        marker: { symbol: "star", size: 16, color: "#111", line: { color: "#fff", width: 1 } },
        hovertemplate: `this deployment: TTFT p90 ${num(d.ttft_p90_ms)} ms, TPOT p90 ${num(d.tpot_p90_ms)} ms<br>%{x:.1f} tok/s/user, %{y:.0f} tok/s/GPU<extra></extra>` };
      plot(`Latency-throughput frontier (each point: tp x concurrency${targets ? "; filled: meets both p90 targets" : ""})`, [...tps.map((tp) => {
        const q = pts.filter((p) => p.tp === tp).sort((a, b) => a.concurrency - b.concurrency);
        return { type: "scatter", mode: "lines+markers", name: `tp=${tp}`, x: q.map((p) => p.tokens_per_s_per_user), y: q.map((p) => p.tokens_per_s_per_gpu),
          marker: { size: 8, symbol: q.map((p) => (!targets || meets(p) ? "circle" : "circle-open")) },
          text: q.map((p) => `concurrency ${p.concurrency}, TTFT p90 ${num(p.ttft_p90_ms)} ms${p.tpot_p90_ms ? `, TPOT p90 ${num(p.tpot_p90_ms)} ms` : ""}`), hovertemplate: "%{text}<br>%{x:.1f} tok/s/user, %{y:.0f} tok/s/GPU<extra></extra>" };
      }), here], { xaxis: { title: "tokens/s per user (interactivity)" }, yaxis: { title: "tokens/s per GPU (throughput)" },
        shapes: tpotLine ? [tpotLine.shape] : [], annotations: tpotLine ? [tpotLine.note] : [] }, 380);
      const ttftLine = v.ttft_ms ? line("ttft", 0, 1, v.ttft_ms, v.ttft_ms, `TTFT target ${num(v.ttft_ms)} ms`, { xref: "paper", ylog: true }) : null;
      plot("TTFT p90 against load", tps.map((tp) => {
        const q = pts.filter((p) => p.tp === tp).sort((a, b) => a.concurrency - b.concurrency);
        return { type: "scatter", mode: "lines+markers", name: `tp=${tp}`, x: q.map((p) => p.concurrency), y: q.map((p) => p.ttft_p90_ms) };
      }), { xaxis: { title: "requests in flight (closed loop)", type: "log" }, yaxis: { title: "TTFT p90, ms", type: "log" },
        shapes: ttftLine ? [ttftLine.shape] : [], annotations: ttftLine ? [ttftLine.note] : [] });
      kv("This deployment", d, { id: "serve-run" });
      // k8s runs an engine's container: the generic profile has none, so vLLM's
      const runBody = (t) => ({ ...common, ...pick(v, ["gpu", "tp", "rate", "concurrency", "engine"]), ...(t === "k8s" && v.engine === "generic" ? { engine: "vllm" } : {}) });
      downloads("serve/run/config", runBody, ["vllm", "sglang", "trtllm", "k8s", "vllm-bench", "sglang-bench", "trtllm-bench"]);
      // the 80% bands and whether public rows share this deployment's regime (gpuplan.interfaces.validation.error_bands)
      for (const [cls, info] of Object.entries((d.band_80pct || {}).regimes || {})) {
        section(`80% ${cls} band`, h("p", { class: "note", "data-key": `band_${cls}`, text: `${info.reason}; band from the cross-validated errors of ${info.rows} public rows (${info.regime})` }));
      }
      const planGpus = v.plan_gpus.length ? v.plan_gpus : v.gpu ? [v.gpu] : undefined; // `serve plan --gpu A --gpu B`
      if (v.capacity && v.disaggregated) {
        const { data: c } = await api("serve/plan", { ...common, ...pick(v, ["ttft_ms", "tpot_ms", "engine"]), ...pick(v, ["plan_rate"], { plan_rate: "rate" }), gpus: planGpus, disaggregated: true });
        stats([["capacity_gpus", "GPUs needed", c.best.gpus], ["usd_per_million_output_tokens", "$ per M output tokens", c.best.usd_per_million_output_tokens, "", (x) => "$" + fmt(x)],
          ["disaggregated_saving_percent", "disaggregated saving vs co-located", c.disaggregated_saving_percent, "%"]]);
        table("Serving options: co-located and disaggregated", [["mode", "mode"], ["layout", "layout"], ["gpus", "GPUs"], ["kv_link", "KV link"], ["ttft_p90_ms", "TTFT p90"], ["tpot_p90_ms", "TPOT p90"],
          ["usd_per_million_output_tokens", "$ per M output tokens"], ["why_not_best", "why not"]], c.options.slice(0, 20), { id: "disaggregated" });
      } else if (v.capacity) {
        const { data: c } = await api("serve/plan", { ...common, ...pick(v, ["ttft_ms", "tpot_ms", "engine"]), ...pick(v, ["plan_rate"], { plan_rate: "rate" }), gpus: planGpus, ...(v.confident ? { confidence: 0.8 } : {}) });
        stats([["capacity_gpus", "GPUs needed", c.best.gpus], ["usd_per_million_output_tokens", "$ per M output tokens", c.best.usd_per_million_output_tokens, "", (x) => "$" + fmt(x)]]);
        for (const [g, m] of Object.entries((c.confidence || {}).by_gpu || {})) {
          section(`Planned at the 80% band's pessimistic edge: ${g}`, h("p", { class: "note", "data-key": `confidence_${g}`,
            text: `p90s x${num(m.latency_factor)} must meet the targets (TTFT <= ${num(m.ttft_objective_ms)} ms, TPOT <= ${num(m.tpot_objective_ms)} ms predicted); band ${m.band_regime}: ${m.reason}` }));
        }
        table("Capacity plan: candidates (closed loop sizes, Poisson arrivals verify)", [["layout", "layout"], ["replicas", "replicas"], ["gpus", "GPUs"], ["open_loop_ttft_p90_ms", "TTFT p90 (Poisson)"], ["open_loop_tpot_p90_ms", "TPOT p90 (Poisson)"],
          ["ttft_p90_ms", "TTFT p90 (closed loop)"], ["tpot_p90_ms", "TPOT p90 (closed loop)"], ["usd_per_million_output_tokens", "$ per M output tokens"], ["why_not_best", "why not"]], c.candidates, { id: "capacity" });
        if (c.rejected && c.rejected.length) table("Layouts that cannot serve", [["layout", "layout"], ["why", "why"]], c.rejected, { id: "capacity-rejected" });
      }
    },
  },

  compare: {
    fields: [
      { name: "gpus", type: "multi", options: GPUS, def: ["h100-sxm5-80gb", "h200-sxm-141gb", "b200", "mi300x"], label: "GPUs" },
      { name: "systems", type: "multi", options: SYSTEMS, def: ["dgx-h100", "dgx-h200", "dgx-b200"], label: "systems (for the workload)" },
      { name: "model", type: "select", options: MODELS, def: "gpt3-175b", label: "workload: model" },
      { name: "num_gpus", type: "number", def: "1024", label: "workload: GPUs" },
      { name: "tokens", type: "text", def: "300B", label: "workload: tokens" },
    ],
    async run(v) {
      if (v.gpus.length) {
        const { data: c } = await api("hw/compare", { gpus: v.gpus });
        table("GPUs side by side (ratio to the first)", [["label", "metric"], ["unit", "unit"],
          ...c.gpus.map((g) => [(m) => m.values[g], g]), ...c.gpus.slice(1).map((g) => [(m) => m.ratio_to_baseline[g], "x " + g])], c.metrics, { id: "hw-compare" });
        const all = (await api("hw/list")).data;
        table("Sources", [["id", "GPU"], [(g) => g.sources && g.sources.default, "source"]], all.filter((g) => v.gpus.includes(g.id)), { id: "gpu-sources" });
      }
      if (v.systems.length) {
        const sys = (await api("systems/list")).data.filter((x) => v.systems.includes(x.id));
        const rows = [["gpu", "GPU"], ["gpus_per_node", "GPUs per node"], ["scaleup_domain_gpus", "scale-up domain, GPUs"], ["scaleup_interconnect", "scale-up link"],
          ["scaleup_bandwidth_gbps", "scale-up GB/s per GPU per direction"], ["nic_gbit_s", "NIC Gbit/s"], ["nics_per_node", "NICs per node"], ["scaleout_interconnect", "scale-out fabric"],
          ["scaleout_gbps_per_gpu", "scale-out GB/s per GPU"], ["node_gpu_memory_gib", "GPU memory per node, GiB"], ["system_power_w", "power, W"], ["rack_units", "rack units"],
          ["price_usd", "price, USD"]].map(([key, lab]) => ({ metric: lab, ...Object.fromEntries(sys.map((x) => [x.id, x[key]])) }));
        table("Systems side by side", [["metric", "metric"], ...sys.map((x) => [x.id, x.id])], rows, { id: "systems-compare" });
        table("System sources", [["id", "system"], [(x) => x.sources && x.sources.default, "source"]], sys, { id: "system-sources" });
        const runs = await Promise.all(v.systems.map((s) => api("train", { system: s, ...pick(v, ["model", "tokens"]), ...pick(v, ["num_gpus"], { num_gpus: "gpus" }) })
          .then((r) => r.data, (e) => { if (e.name === "AbortError") throw e; return { system: s, error: e.message }; })));
        const ok = runs.filter((r) => !r.error);
        plot(`Training ${v.model} on ${v.num_gpus} GPUs: days and cost`, [
          { type: "bar", name: "days", x: ok.map((r) => r.system), y: ok.map((r) => r.days), yaxis: "y", offsetgroup: "days" },
          { type: "bar", name: "cost (USD, right axis)", x: ok.map((r) => r.system), y: ok.map((r) => r.cost_usd), yaxis: "y2", offsetgroup: "cost" },
        ], { barmode: "group", yaxis: { title: "days" }, yaxis2: { title: "USD", overlaying: "y", side: "right" } });
        table("One workload on each system", [["system", "system"], ["days", "days"], ["mfu_pct", "MFU"], ["cost_usd", "cost", usd], ["usd_per_gpu_hour", "$ per GPU-hour"], ["energy_mwh", "energy"], [(r) => r.best_plan && planLabel(r.best_plan), "best plan"], ["price_source", "price source"], ["error", "error"]], runs, { id: "workload" });
      }
    },
  },

  kernel: {
    fields: [
      { name: "gpu", type: "select", options: GPUS, def: "h100-sxm5-80gb" },
      { name: "threads", type: "number", def: "256", label: "threads per block" },
      { name: "regs", type: "number", def: "64", label: "registers per thread" },
      { name: "smem", type: "text", def: "0", label: "shared memory per block", help: "e.g. 48KiB" },
      { name: "dtype", type: "select", options: ["bf16", "fp16", "fp8", "tf32", "fp32", "fp64"], def: "bf16" },
      { name: "gemm", type: "text", def: "4096x4096x4096;8x4096x4096", label: "GEMMs MxNxK[@TFLOP/s]", help: "separated by ;" },
      { name: "elementwise", type: "text", label: "elementwise N[:BYTES[:FLOPS]][@TFLOP/s]", help: "separated by ;" },
    ],
    async run(v) {
      const occ = pick(v, ["gpu", "threads", "regs", "smem"]);
      const { data: o } = await api("kernel/occupancy", occ);
      stats([["occupancy", "occupancy", o.occupancy], ["active_warps_per_sm", "warps per SM", o.active_warps_per_sm], ["active_blocks_per_sm", "blocks per SM", o.active_blocks_per_sm], ["limiters", "limited by", o.limiters.join(", ")]]);
      const sizes = Array.from({ length: 32 }, (_, i) => 32 * (i + 1));
      const curve = await Promise.all(sizes.map((t) => call("kernel/occupancy", { ...occ, threads: t }).then((r) => r.data)));
      plot("Occupancy against block size", [
        { type: "scatter", mode: "lines+markers", name: "occupancy", x: sizes, y: curve.map((c) => c.occupancy), text: curve.map((c) => c.limiters.join(", ")), hovertemplate: "%{x} threads: %{y:.3f} (%{text})<extra></extra>" },
        { type: "scatter", mode: "markers", name: "this kernel", x: [o.threads_per_block], y: [o.occupancy], marker: { size: 14, color: "#c00" } },
      ], { xaxis: { title: "threads per block" }, yaxis: { title: "occupancy", range: [0, 1.05] } });
      const split = (s) => (s || "").split(";").map((x) => x.trim()).filter(Boolean);
      const { data: r } = await api("kernel/roofline", { ...pick(v, ["gpu", "dtype"]), gemm: split(v.gemm), elementwise: split(v.elementwise) });
      const xs = (c) => [0.01, c.ridge_flop_per_byte, 1e5]; // the roof bends at the ridge point
      plot(`Roofline: ${r.gpu} ${r.dtype}`, [
        ...r.ceilings.map((c) => ({ type: "scatter", mode: "lines", name: `${c.name} (${fmt(c.bandwidth_gbps)} GB/s)`, x: xs(c), y: xs(c).map((x) => Math.min(r.peak_tflops, c.bandwidth_gbps * x / 1000)) })),
        { type: "scatter", mode: "markers+text", name: "your kernels (attainable)", x: r.workloads.map((w) => w.intensity_flop_per_byte), y: r.workloads.map((w) => w.achieved_tflops ?? w.attainable_tflops),
          text: r.workloads.map((w) => w.name), textposition: "bottom right", marker: { size: 11, color: "#c00" } },
      ], { xaxis: { title: "arithmetic intensity, FLOP/byte", type: "log" }, yaxis: { title: "TFLOP/s", type: "log" } }, 420);
      table("Kernels on the roofline", [["name", "kernel"], ["intensity_flop_per_byte", "intensity"], ["attainable_tflops", "attainable"], ["bound", "bound"], ["min_time_s", "min time"], ["achieved_tflops", "achieved"], ["fraction_of_roof", "of roof"]], r.workloads, { id: "roofline", note: `peak ${fmt(r.peak_tflops)} TFLOP/s: ${r.peak_source}` });
    },
  },

  formats: {
    fields: [
      { name: "file", type: "file", accept: ".npy,.safetensors", label: "tensor file (.npy / .safetensors, up to 5 MiB)" },
      { name: "tensor", type: "text", label: "tensor name (safetensors)" },
      { name: "random", type: "text", def: "normal:16384", help: "without a file: KIND:COUNT" },
      { name: "seed", type: "number", def: "0" },
      { name: "formats", type: "text", placeholder: "default set", help: "comma-separated" },
      { name: "scale_rule", type: "select", options: ["floor", "rceil", "ceil", "even"], def: "floor" },
    ],
    async run(v) {
      const { data: d } = v.file ? await apiUpload("formats/compare-file", v.file, pick(v, ["tensor", "formats", "scale_rule"]))
        : await api("formats/compare", pick(v, ["random", "seed", "formats", "scale_rule"]));
      stats([["input", "input", d.input], ["elements", "elements", d.shape.reduce((a, b) => a * b, 1)], ["dtype", "dtype", d.dtype]]);
      plot("Signal-to-noise ratio per format (higher is better)", [
        { type: "bar", name: "SNR dB", x: d.results.map((r) => r.format), y: d.results.map((r) => r.snr_db), yaxis: "y" },
        { type: "scatter", mode: "markers", name: "bits per element", x: d.results.map((r) => r.format), y: d.results.map((r) => r.bits_per_element), yaxis: "y2", marker: { size: 12 } },
      ], { yaxis: { title: "SNR, dB" }, yaxis2: { title: "bits/element", overlaying: "y", side: "right" } });
      table("Quantisation error per format", [["format", "format"], ["snr_db", "SNR"], ["mse", "MSE"], ["max_abs_error", "max abs err"], ["fraction_saturated", "saturated"], ["fraction_flushed_to_zero", "flushed to 0"], ["bits_per_element", "bits/elem"], ["storage_bytes", "storage"]], d.results, { id: "formats" });
    },
  },

  validate: {
    // `gpuplan validate --builtin NAME` (api.VALIDATION_SETS; tests/web/test_api.py keeps them equal) unless a file is chosen
    fields: [
      { name: "builtin", type: "select", options: ["training", "inference", "collectives"], def: "training", label: "public measurements shipped with gpuplan", help: "used when no file is chosen" },
      { name: "file", type: "file", accept: ".csv", label: "or your measurements CSV (SCHEMA.md rows, up to 5 MiB)", help: "an upload is not kept in the URL" },
    ],
    async run(v) {
      const { data: d } = v.file ? await apiUpload("validate", v.file) : await apiUpload("validate", null, pick(v, ["builtin"]));
      const rows = d.rows.filter((r) => !r.skipped && r.predicted !== null && r.measured !== null);
      const fams = Object.entries(d.summary.families || {}).map(([family, b]) => ({ family, ...b }));
      const overall = d.summary.overall || {};
      stats([["rows", "rows", d.rows.length], ["compared", "compared", rows.length], ["mape_pct", "MAPE", overall.mape_pct, "%"], ["median_abs_error_pct", "median |error|", overall.median_abs_error_pct, "%"]]);
      const band = overall.median_abs_error_pct;
      const lo = Math.min(...rows.map((r) => Math.min(r.measured, r.predicted))), hi = Math.max(...rows.map((r) => Math.max(r.measured, r.predicted)));
      const line = (f, name, dash) => ({ type: "scatter", mode: "lines", name, x: [lo, hi], y: [lo * f, hi * f], line: { dash, color: "#888" }, hoverinfo: "skip" });
      const groups = [...new Set(rows.map((r) => r.family))];
      plot("Predicted against measured", [
        line(1, "predicted = measured", "solid"),
        ...(band ? [line(1 + band / 100, `± median |error| (${fmt(band)}%)`, "dot"), { ...line(1 - band / 100, "", "dot"), showlegend: false }] : []),
        ...groups.map((g) => { const q = rows.filter((r) => r.family === g); return { type: "scatter", mode: "markers", name: g, x: q.map((r) => r.measured), y: q.map((r) => r.predicted), text: q.map((r) => `${r.id} ${r.metric}: ${fmt(r.error_pct)}%`), hovertemplate: "%{text}<extra></extra>" }; }),
      ], { xaxis: { title: "measured", type: "log" }, yaxis: { title: "predicted", type: "log" }, legend: { orientation: "v", x: 1.02, y: 1 } }, 480);
      table("Per family", [["family", "family"], ["count", "rows"], ["mape_pct", "MAPE"], ["median_abs_error_pct", "median |error|"], ["max_abs_error_pct", "max |error|"], ["mean_error_pct", "mean error"], ["skipped", "skipped"]], fams, { id: "families" });
      table("Per row", [["id", "id"], ["family", "family"], ["metric", "metric"], ["measured", "measured"], ["predicted", "predicted"], ["error_pct", "error"], ["skipped", "skipped"], ["reason", "reason"]], d.rows, { id: "rows", rowClass: (r) => (r.skipped ? "skipped" : Math.abs(r.error_pct) > 25 ? "far" : null) });
    },
  },

  calibrate: {
    // `gpuplan calibrate fit FILE`: the fit runs for seconds, so the page runs on its Run button
    manual: true,
    fieldFallback: "file", // errors about the upload's rows (field measurements, id, value, ...) mark the file picker
    fields: [
      { name: "file", type: "file", accept: ".csv,text/csv", label: "measurements CSV (SCHEMA.md rows, up to 5 MiB)" },
      { name: "method", type: "select", options: ["auto", "hierarchical", "flat"], def: "auto",
        help: "hierarchical: a few site factors, then single knobs kept only where they lower the leave-one-out error; flat: every knob free; auto: hierarchical, flat when knobs are named" },
      { name: "knobs", type: "text", placeholder: "all the rows inform", help: "comma-separated knob names (gpuplan calibrate knobs)" },
    ],
    async run(v) {
      if (profileUrl) { URL.revokeObjectURL(profileUrl); profileUrl = null; }
      if (!v.file) {
        section("Calibrate gpuplan to your cluster", h("p", { class: "note" }, "Choose a CSV of your own measured rows (the columns of validation/SCHEMA.md: training, inference, collectives or matmul rows; ",
          h("code", { text: "gpuplan calibrate import" }), " makes them from tool logs), pick a method and press Run. The fit takes a few seconds. You get the fitted knobs with their uncertainty, the error before and after, and a profile.toml to download. Nothing is kept on the server, and an upload is not kept in the URL."));
        return;
      }
      const { data: d } = await apiUpload("calibrate/fit", v.file, pick(v, ["method", "knobs"]));
      const e = d.error, name = d.sources.map((s) => s.path).join(" ");
      const used = d.rows.filter((r) => r.used);
      stats([["rows_used", "rows used", e.rows_used, `of ${d.rows.length}`], ["method", "method", d.method],
        ["parameters", "parameters fitted", d.parameters.length], ["knobs_set", "knobs in the profile", Object.keys(d.values).length]]);

      // error before / after: leave-one-out first (the figure to trust), then in-sample
      const pct = (x) => (x === null || x === undefined ? "–" : fmt(x) + "%");
      const cell = (key) => h("td", { class: "num", "data-key": key, "data-value": e[key] === null ? "" : String(e[key]), text: pct(e[key]) });
      const per = e.loo_mode === "family" ? "per family: each family predicted by a fit on the other families" : "per row: each row predicted by a fit on the other rows";
      section(`Error before and after the fit (MAPE over the ${e.rows_used} rows used)`,
        h("div", { class: "scroll" }, h("table", { "data-table": "error" },
          h("thead", {}, h("tr", {}, h("th", { text: "" }), h("th", { text: "before (values in effect)" }), h("th", { text: "after (fitted)" }))),
          h("tbody", {},
            h("tr", { class: "honest" }, h("td", {}, h("b", { text: "leave-one-out" }), ` (${per}): the honest figure, what to expect on configurations the fit has not seen`), cell("loo_mape_before_pct"), cell("loo_mape_after_pct")),
            h("tr", {}, h("td", { text: "in-sample: the rows the fit saw (flatters the fit)" }), cell("mape_before_pct"), cell("mape_after_pct")),
            h("tr", {}, h("td", { text: "in-sample median absolute error" }), cell("median_ape_before_pct"), cell("median_ape_after_pct"))))),
        h("p", { class: "note", text: "Before the fit nothing is fitted, so leaving rows out changes nothing: both \"before\" figures are the same. A profile corrects efficiencies; it does not add missing physics: if the leave-one-out error does not fall, the rows' error is not in the knobs." }));

      const pm = (x) => `${fmt(x.value)}\u00a0±\u00a0${fmt(x.uncertainty)}`; // one line: no break around ±
      if (d.method === "hierarchical") {
        table("Parameters fitted (site factors, then single knobs)", [["name", "parameter"], [pm, "value ± 1σ"], ["unit", "unit"], ["start", "start"], ["at_bound", "at its bound"]],
          d.parameters, { id: "parameters", note: "A site factor scales every knob of its kind (compute, memory, network, host) by one ratio; the knobs below carry it." });
      }
      const informed = d.knobs.filter((k) => k.informed);
      const notes = [];
      if (d.not_selected.length) notes.push(`Informed, but not worth a parameter of their own (leave-one-out): ${d.not_selected.join(", ")}.`);
      if (d.not_informed.length) notes.push(`Not informed by these rows (left as they were): ${d.not_informed.join(", ")}.`);
      table("Knobs in the profile", [["name", "knob"], [pm, "value ± 1σ"], ["unit", "unit"], ["start", "start (in effect)"], ["default", "default"],
        [(k) => `${fmt(k.low)} .. ${fmt(k.high)}`, "allowed range"], ...(d.method === "hierarchical" ? [[(k) => (k.via || []).join(", "), "via"]] : []), ["at_bound", "at its bound"]],
        informed, { id: "knobs", note: notes.join(" ") });

      // predicted against measured, before and after (log-log, like the Validate page)
      const rows = used.filter((r) => r.predicted_before !== null && r.predicted_after !== null);
      const all = rows.flatMap((r) => [r.measured, r.predicted_before, r.predicted_after, r.predicted_loo].filter((x) => x !== null && x > 0));
      const lo = Math.min(...all) / 1.2, hi = Math.max(...all) * 1.2;
      const err = (p, m) => `${p >= m ? "+" : ""}${fmt(100 * (p / m - 1))}%`;
      const hover = (key) => rows.map((r) => `${r.id} ${r.metric}: measured ${fmt(r.measured)}, predicted ${fmt(r[key])} (${err(r[key], r.measured)})`);
      plot(`Predicted against measured: MAPE ${pct(e.mape_before_pct)} before, ${pct(e.mape_after_pct)} after (in-sample)`, [
        { type: "scatter", mode: "lines", name: "predicted = measured", x: [lo, hi], y: [lo, hi], line: { color: "#888" }, hoverinfo: "skip" },
        { type: "scatter", mode: "lines", name: "each row's move", x: rows.flatMap((r) => [r.measured, r.measured, null]), y: rows.flatMap((r) => [r.predicted_before, r.predicted_after, null]),
          line: { color: "#c5cbd3", width: 1 }, hoverinfo: "skip", showlegend: false },
        { type: "scatter", mode: "markers", name: "before (values in effect)", x: rows.map((r) => r.measured), y: rows.map((r) => r.predicted_before), text: hover("predicted_before"),
          hovertemplate: "before: %{text}<extra></extra>", marker: { size: 9, color: "rgba(0,0,0,0)", line: { color: "#7a828c", width: 1.5 } } },
        { type: "scatter", mode: "markers", name: "after (fitted)", x: rows.map((r) => r.measured), y: rows.map((r) => r.predicted_after), text: hover("predicted_after"),
          hovertemplate: "after: %{text}<extra></extra>", marker: { size: 9, color: "#2756c5" } },
        { type: "scatter", mode: "markers", name: "leave-one-out", x: rows.filter((r) => r.predicted_loo !== null).map((r) => r.measured), y: rows.filter((r) => r.predicted_loo !== null).map((r) => r.predicted_loo),
          text: hover("predicted_loo").filter((_, i) => rows[i].predicted_loo !== null), hovertemplate: "leave-one-out: %{text}<extra></extra>",
          marker: { size: 9, symbol: "diamond-open", color: "#e07b00", line: { width: 1.5 } }, visible: "legendonly" },
      ], { xaxis: { title: "measured (each row in its metric's unit)", type: "log" }, yaxis: { title: "predicted", type: "log" }, legend: { orientation: "v", x: 1.02, y: 1 } }, 460);

      profileUrl = URL.createObjectURL(new Blob([d.profile_toml], { type: "application/toml" }));
      section("Calibration profile",
        h("p", { class: "download" }, h("a", { id: "download-profile", class: "button primary", href: profileUrl, download: "profile.toml", text: "Download profile.toml" })),
        h("p", {}, "Use it with any command: ", h("code", { text: "gpuplan --calibration profile.toml train ..." }), " (or set ", h("code", { text: "GPUPLAN_CALIBRATION=profile.toml" }), ")."),
        h("p", { class: "note" }, "Nothing was written on the server. The CLI writes the same profile with ", h("code", { text: `gpuplan calibrate fit ${name} --out profile.toml` }), "."),
        h("details", {}, h("summary", { text: "profile.toml" }), h("pre", { class: "toml", text: d.profile_toml })));

      const rel = (k) => (r) => (r[k] === null ? null : 100 * (r[k] / r.measured - 1));
      table("Per row", [["id", "id"], ["metric", "metric"], ["measured", "measured"], ["predicted_before", "before"], ["predicted_after", "after"], ["predicted_loo", "leave-one-out"],
        [rel("predicted_before"), "error before %"], [rel("predicted_after"), "error after %"], [rel("predicted_loo"), "leave-one-out error %"], ["band_pct", "± 1σ %"], [(r) => (r.used ? "" : r.reason || "skipped"), "not used: why"]],
        d.rows, { id: "rows", rowClass: (r) => (!r.used ? "skipped" : null), note: "± 1σ: the band of the calibrated prediction (the fit's residual spread and the knobs' uncertainty)." });
    },
  },

  datacenter: {
    fields: [
      { name: "system", type: "select", options: SYSTEMS, def: "dgx-h100" },
      { name: "nodes", type: "number", help: "default: one scalable unit (32 nodes)" },
      { name: "scalable_units", type: "number" },
      { name: "oversubscription", type: "number", def: "1" },
      { name: "years", type: "number", def: "4" }, { name: "utilization", type: "number", def: "0.7" },
      { name: "pue", type: "number" }, { name: "electricity_usd_per_kwh", type: "number", label: "electricity $/kWh" },
      { name: "cloud_usd_per_gpu_hour", type: "number", label: "cloud $/GPU-hour" },
    ],
    async run(v) {
      const size = pick(v, ["system", "nodes", "scalable_units"]);
      const [fab, pow, tco] = await Promise.all([
        api("dc/fabric", { ...size, ...pick(v, ["oversubscription"]) }),
        api("dc/power", { ...size, ...pick(v, ["pue", "electricity_usd_per_kwh", "utilization"]) }),
        api("dc/tco", { ...size, ...pick(v, ["years", "utilization", "pue", "electricity_usd_per_kwh", "cloud_usd_per_gpu_hour"]) }),
      ]);
      const f = fab.data, p = pow.data, t = tco.data;
      stats([["gpus", "GPUs", f.gpus], ["switches", "switches", f.switches], ["cables", "cables", f.cables], ["facility_power_kw", "facility power", p.facility_power_kw, "kW"],
        ["racks", "racks", p.racks], ["average_facility_power_kw", "average draw", p.average_facility_power_kw, "kW"],
        ["average_annual_cost_usd", "electricity / year", p.average_annual_cost_usd, "", usd], ["capex_usd", "capex", t.capex_usd, "", usd], ["on_prem_usd_per_gpu_hour", "on-prem per GPU-hour", t.on_prem_usd_per_gpu_hour, "", usd], ["breakeven_months", "break-even", t.breakeven_months, "months"]]);
      table("Fabric bill of materials", [["item", "item"], ["count", "count"]], [
        ["leaf switches", f.leaf_switches], ["spine switches", f.spine_switches], ["core switches", f.core_switches], ["node-leaf cables", f.node_leaf_cables],
        ["leaf-spine cables", f.leaf_spine_cables], ["spine-core cables", f.spine_core_cables], ["transceivers", f.transceivers], ["racks", f.racks.racks]].map(([item, count]) => ({ item, count })),
        { id: "bom", note: `${f.tiers_count}-tier rail-optimised fat tree, radix ${f.switch_radix_ports}, ${fmt(f.bisection_tbps)} TB/s bisection, ${fmt(f.scaleout_gbps_per_gpu)} GB/s per GPU` });
      stacked(`Facility power (PUE ${fmt(p.pue)})`, { nodes_kw: p.nodes_power_kw, switches_kw: p.switch_power_kw, storage_kw: p.storage_power_kw, "cooling and losses (facility - IT)_kw": p.facility_power_kw - p.it_power_kw }, "kW", { y: "facility" });
      // like for like: on-prem against each provider's offers, one bar per (provider, term), a provider's terms side by side
      const offers = t.cloud_comparison || [];
      const offerLabel = (o) => `${o.provider} ${o.term}`;
      plot(`Total cost over ${t.years} years at ${fmt(t.utilization * 100)}% utilisation: on-prem vs each provider and term`, [{ type: "bar",
        x: ["on-prem"].concat(offers.map(offerLabel)), y: [t.on_prem_total_usd].concat(offers.map((o) => o.cloud_total_usd)),
        text: [t.on_prem_total_usd].concat(offers.map((o) => o.cloud_total_usd)).map(usd), textposition: "auto",
        marker: { color: ["#2756c5"].concat(offers.map((o) => (o.pricing_model === "on-demand" ? "#e07b00" : "#b8860b"))) },
        hovertemplate: "%{x}: %{text}<extra></extra>" }], { yaxis: { title: "USD" }, showlegend: false }, 320);
      table("Cloud offers, like for like (one row per provider and term; savings and break-even from the same cash flow)",
        [["provider", "provider"], ["instance", "instance"], ["term", "term"], ["usd_per_gpu_hour", "$/GPU-h"], ["cloud_total_usd", "cloud total $"],
         ["savings_usd", "on-prem saves $"], ["breakeven_months", "break-even months"], ["date", "price date"]], offers,
        { id: "clouds", note: t.cloud_reserved_label ? `headline: ${t.cloud_price_source.split(":")[0]}; reserved beside it: ${t.cloud_reserved_label}` +
          (t.cloud_reserved_same_provider ? " (same provider)" : " (another provider: compare within a provider in the table)") : "" });
      plot("Capital cost", Object.entries(t.capex_breakdown_usd).map(([k, x]) => ({ type: "bar", orientation: "h", name: label(k), y: ["capex"], x: [x], hovertemplate: `${label(k)}: ${usd(x)}<extra></extra>` })), { barmode: "stack", xaxis: { title: "USD" } }, 220);
      kv("Power", p, { id: "power", note: `Energy from a stated average draw: nodes at ${fmt(p.loaded_power_fraction_of_nameplate * 100)}% of nameplate while busy (measured under training load), busy ${fmt(p.utilization * 100)}% of the year, idle otherwise, x PUE ${fmt(p.pue)} (the average_* rows); racks, cooling and facility power are sized at nameplate, and annual_* rows are nameplate all year. Set loaded_power_fraction_of_nameplate=1 for nameplate.` });
      table("Prices and their sources", [["key", "item"], ["value", "value"], ["description", "what"], ["source", "source"], ["date", "date"]], t.prices, { id: "prices" });
      table("Assumptions (gpuplan dc assumptions; override with --set KEY=VALUE)", [["key", "key"], ["value", "value"], ["description", "what"], ["source", "source"], ["date", "date"]],
        t.assumptions, { id: "assumptions" });
    },
  },
};

// ---- start ----------------------------------------------------------------------------------
async function start() {
  const name = document.body.dataset.page;
  const page = PAGES[name];
  PAGE = page;
  await buildForm(page);
  if (!page.manual) { // a manual page (a computation of seconds) runs on its Run button only
    let timer = null;
    const later = () => { clearTimeout(timer); timer = setTimeout(() => update(page), 350); };
    $("#inputs").addEventListener("input", (e) => { if (e.target.type !== "file" && e.target.type !== "checkbox" && e.target.tagName !== "SELECT") later(); });
    $("#inputs").addEventListener("change", (e) => { if (e.target.type === "file" || e.target.tagName === "SELECT" || e.target.type === "checkbox") update(page); });
  }
  await update(page);
}

start().catch((e) => showError(e));
