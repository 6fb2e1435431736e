// gpuplan web: one small module for every page (no build step). Each page declares its inputs
// (named as gpuplan.api's keyword arguments, so an error's `field` finds its input), the API calls
// it makes and how it draws the answers. The URL's query string holds every input that differs
// from its default, so a URL restores a page; each call's `gpuplan ... --json` line is shown.

const $ = (sel, el = document) => el.querySelector(sel);

function h(tag, attrs = {}, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat()) if (kid !== null && kid !== undefined) el.append(kid);
  return el;
}

class ApiError extends Error {
  constructor(message, field, status) { super(message); this.field = field; this.status = status; }
}

let controller = null; // the calls of the current update (aborted by the next one or Cancel)

async function answer(r) {
  let data;
  try { data = await r.json(); } catch { throw new ApiError(`HTTP ${r.status}`, null, r.status); }
  if (!r.ok) {
    const err = data.error || {}; // {field, allowed, message}: the object `gpuplan ... --json` prints
    const e = new ApiError(err.message || `HTTP ${r.status}`, err.field, r.status);
    e.command = r.headers.get("X-Gpuplan-Command"); // the line that prints the same error
    throw e;
  }
  return { data, command: r.headers.get("X-Gpuplan-Command") };
}

async function call(path, body = {}) {
  const r = await fetch(`/api/v1/${path}`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    signal: controller && controller.signal,
  });
  return answer(r);
}

async function upload(path, file, form = {}) {
  const fd = new FormData();
  if (file) fd.append("file", file); // no file: the form fields alone (validate --builtin NAME)
  for (const [k, v] of Object.entries(form)) if (v !== undefined && v !== "") fd.append(k, v);
  return answer(await fetch(`/api/v1/${path}`, { method: "POST", body: fd, signal: controller && controller.signal }));
}

const cache = {};
async function listOf(path, key) {
  if (!cache[path]) cache[path] = call(path).then((r) => r.data.map((x) => x[key]));
  return cache[path];
}
const MODELS = () => listOf("model/list", "name");
const SYSTEMS = () => listOf("systems/list", "id");
const GPUS = () => listOf("hw/list", "id");

// ---- formatting -----------------------------------------------------------------------------
function fmt(v, digits = 3) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return v.toLocaleString("en-US");
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e9 || a < 1e-3)) return v.toExponential(digits - 1);
  const d = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : digits;
  return v.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: 0 });
}
const usd = (v) => (v === null || v === undefined ? "–" : "$" + Math.round(v).toLocaleString("en-US"));
const label = (k) => k.replace(/_/g, " ");

// ---- outputs --------------------------------------------------------------------------------
const out = () => $("#results");

function section(title, ...kids) {
  const s = h("section", { class: "card" }, title ? h("h2", { text: title }) : null, ...kids);
  out().append(s);
  return s;
}

function stats(items) {
  // items: [key, label, value, unit, formatter]; data-value holds the number as the API gave it
  const row = h("div", { class: "stats" });
  for (const [key, lab, value, unit, f] of items) {
    const text = (f || fmt)(value) + (unit ? " " + unit : "");
    row.append(h("div", { class: "stat", "data-key": key, "data-value": value === null ? "" : String(value) },
      h("div", { class: text.length > 10 ? "v long" : "v", text }), h("div", { class: "l", text: lab }))); // long: smaller, not broken
  }
  out().append(row);
  return row;
}

function csvCell(v) {
  const s = v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v);
  return /[",\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
}

function download(name, text, type = "text/csv") {
  const a = h("a", { href: URL.createObjectURL(new Blob([text], { type })), download: name });
  document.body.append(a); a.click(); a.remove();
}

function table(title, columns, rows, opts = {}) {
  // columns: [key, label, formatter?]; rows: objects (a key may be a function of the row)
  const get = (r, c) => (typeof c[0] === "function" ? c[0](r) : r[c[0]]);
  const t = h("table", { "data-table": opts.id || title },
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { text: c[1] })))),
    h("tbody", {}, rows.map((r) => h("tr", { class: opts.rowClass ? opts.rowClass(r) : null },
      columns.map((c) => { const v = get(r, c); return h("td", { class: typeof v === "number" ? "num" : null, text: (c[2] || fmt)(v) }); })))));
  const csv = () => [columns.map((c) => csvCell(c[1])).join(","),
    ...rows.map((r) => columns.map((c) => csvCell(get(r, c))).join(","))].join("\n");
  const btn = h("button", { type: "button", class: "export", onclick: () => download(`${(opts.id || title || "table").replace(/\W+/g, "-")}.csv`, csv()), text: "CSV" });
  return section(title, btn, h("div", { class: "scroll" }, t), opts.note ? h("p", { class: "note", text: opts.note }) : null);
}

function flatten(obj, prefix = "") {
  const rows = [];
  for (const [k, v] of Object.entries(obj || {})) {
    if (v && typeof v === "object" && !Array.isArray(v)) rows.push(...flatten(v, prefix + k + "."));
    else rows.push({ key: prefix + k, value: Array.isArray(v) ? v.join("; ") : v });
  }
  return rows;
}

function kv(title, obj, opts = {}) {
  return table(title, [["key", "quantity", label], ["value", "value"]], flatten(obj), { id: opts.id || title, note: opts.note });
}

const LAYOUT = {
  margin: { l: 60, r: 60, t: 30, b: 50 }, font: { family: "system-ui, sans-serif", size: 12 },
  paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "#fbfbfd", legend: { orientation: "h", y: -0.2 },
};

function axisTitles(layout) {
  // plotly.js 3+ (the bundled copy is 4.x) ignores an axis `title` given as a plain string: {text}
  const out = { ...layout };
  for (const [k, v] of Object.entries(out)) {
    if (/^[xy]axis\d*$/.test(k) && v && typeof v.title === "string") out[k] = { ...v, title: { text: v.title } };
  }
  // a horizontal legend under an x-axis title: pinned to the figure's bottom edge, below the title
  // (at a fixed fraction of a short plot's height it would sit on the title)
  if (out.legend === LAYOUT.legend && out.xaxis && out.xaxis.title) {
    out.legend = { ...LAYOUT.legend, yref: "container", y: 0, yanchor: "bottom" };
    out.margin = { ...out.margin, b: Math.max(out.margin.b, 80) };
  }
  return out;
}

function plot(title, traces, layout = {}, height = 340) {
  const div = h("div", { class: "plot", style: `height:${height}px` });
  const s = section(title, div);
  Plotly.newPlot(div, traces, axisTitles({ ...LAYOUT, ...layout }), {
    responsive: true, displaylogo: false,
    toImageButtonOptions: { format: "png", filename: (title || "plot").replace(/\W+/g, "-"), scale: 2 },
  });
  return s;
}

function stacked(title, parts, unit, opts = {}) {
  // one horizontal bar split into named parts (a breakdown that sums to its total)
  const traces = Object.entries(parts).filter(([, v]) => v > 0).map(([k, v]) => ({
    type: "bar", orientation: "h", name: label(k), x: [v], y: [opts.y || ""],
    hovertemplate: `${label(k)}: %{x:.4g} ${unit}<extra></extra>`,
  }));
  const shapes = opts.limit ? [{ type: "line", x0: opts.limit, x1: opts.limit, yref: "paper", y0: 0, y1: 1, line: { color: "#c00", width: 2, dash: "dash" } }] : [];
  const annotations = opts.limit ? [{ x: opts.limit, yref: "paper", y: 1, text: opts.limitLabel, showarrow: false, yanchor: "bottom", font: { color: "#c00" } }] : [];
  return plot(title, traces, { barmode: "stack", xaxis: { title: unit }, shapes, annotations, showlegend: true }, 240);
}

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
      input = h("div", { id, class: "multi", "data-name": f.name },
        opts.map((o) => h("label", {}, h("input", { type: "checkbox", value: o, checked: v.includes(o) }), " " + o)));
    } else if (f.type === "check") {
      input = h("input", { id, name: f.name, type: "checkbox", checked: v });
    } else if (f.type === "file") {
      input = h("input", { id, name: f.name, type: "file", accept: f.accept });
    } else {
      input = h("input", { id, name: f.name, type: f.type === "number" ? "number" : "text", value: v, step: f.step || "any", placeholder: f.placeholder || "" });
    }
    form.append(h("div", { class: "field", "data-field": f.name },
      h("label", { for: id, text: f.label || label(f.name) }), input,
      f.help ? h("small", { class: "help", text: f.help }) : null, h("small", { class: "msg" })));
  }
  form.append(h("div", { class: "buttons" },
    page.manual ? h("button", { type: "button", id: "run", class: "primary", onclick: () => update(page), text: "Run" }) : null,
    h("button", { type: "button", id: "cancel", hidden: true, onclick: () => { if (controller) controller.abort(); }, text: "Cancel" }),
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

/** The body of an API call: the named inputs that are set (undefined ones left to the API's defaults). */
function pick(v, names, rename = {}) {
  const b = {};
  for (const n of names) if (v[n] !== undefined && v[n] !== "" && !(Array.isArray(v[n]) && !v[n].length)) b[rename[n] || n] = v[n];
  return b;
}

// ---- one update -----------------------------------------------------------------------------
let calls = [];
function track(promise) { return promise.then((r) => { calls.push(r); return r; }); }
const api = (path, body) => track(call(path, body));
const apiUpload = (path, file, form) => track(upload(path, file, form));

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
  if (controller) controller.abort();
  controller = new AbortController();
  const mine = controller;
  const v = values(page);
  syncUrl(page, v);
  document.querySelectorAll(".field.invalid").forEach((f) => { f.classList.remove("invalid"); $(".msg", f).textContent = ""; });
  $("#error").hidden = true;
  $("#status").textContent = "computing…";
  $("#cancel").hidden = false;
  document.body.classList.add("busy");
  calls = [];
  const results = out();
  results.replaceChildren();
  try {
    await page.run(v);
    if (mine !== controller) return;
    $("#status").textContent = "";
  } catch (e) {
    if (mine !== controller) return;
    if (e.name === "AbortError") { $("#status").textContent = "cancelled"; }
    else {
      $("#status").textContent = "";
      showError(e);
      if (e.command) calls.push({ command: e.command, data: { error: e.message, field: e.field } });
    }
  } finally {
    if (mine === controller) { $("#cancel").hidden = true; document.body.classList.remove("busy"); }
  }
  $("#command").textContent = calls.map((c) => c.command).join("\n");
  $("#json").textContent = calls.length === 1 ? JSON.stringify(calls[0].data, null, 2)
    : JSON.stringify(calls.map((c) => ({ command: c.command, json: c.data })), null, 2);
  document.body.dataset.ready = String(Number(document.body.dataset.ready || 0) + 1);
}

// ---- pages ----------------------------------------------------------------------------------
const PRECISIONS = ["bf16", "fp16", "fp8"];
const SERVE_DTYPES = ["bf16", "fp16", "fp32", "tf32", "fp8", "mxfp8", "int8", "mxfp6", "int4", "mxfp4", "nvfp4"];  // specs.dtypes.StoredFormat
// `serve run|plan --engine` (gpuplan.api.SERVING_ENGINES; tests/web/test_api.py keeps them equal)
const SERVE_ENGINES = ["generic", "tensorrt-llm", "vllm", "sglang", "lmdeploy", "tgi"];
const PLAN_FIELDS = [
  { name: "tp", type: "number" }, { name: "pp", type: "number" }, { name: "dp", type: "number" }, { name: "cp", type: "number" },
  { name: "ep", type: "number" }, { name: "vpp", type: "number" }, { name: "micro_batch", type: "number" },
  { name: "global_batch", type: "number" }, { name: "seq_len", type: "number" },
];
const planLabel = (p) => `tp=${p.tp} pp=${p.pp} dp=${p.dp} cp=${p.cp}${p.ep > 1 ? " ep=" + p.ep : ""}${p.vpp > 1 ? " vpp=" + p.vpp : ""} mb=${p.micro_batch} ${p.recompute}${p.sequence_parallel ? " +sp" : ""}${p.tp_comm_overlap ? " +tp-overlap" : ""} ${p.sharding}`;

function pipelineTimeline(d) {
  // The 1F1B schedule (Narayanan et al. 2021 sec. 2.2) of the chosen plan, drawn from its own step
  // terms: per micro-batch and stage, forward = compute / m / 3 (backward = 2 x forward, the step-time
  // model's rule) and backward adds the recompute. Stage s runs min(pp - s - 1, m) warm-up forwards,
  // then one forward / one backward, then the remaining backwards; F(s,i) waits for F(s-1,i) and
  // B(s,i) for B(s+1,i). Interleaving (vpp > 1) is not drawn; at most 24 micro-batches are shown.
  const p = d.best_plan, b = d.step_breakdown_s, mAll = d.num_micro_batches;
  const pp = p.pp, m = Math.min(mAll, 24);
  if (pp < 2) return;
  const f = b.compute_s / mAll / 3, bw = 2 * f + (b.recompute_s || 0) / mAll;
  const order = [];
  for (let s = 0; s < pp; s++) {
    const w = Math.min(pp - s - 1, m), ops = [];
    for (let i = 0; i < w; i++) ops.push(["F", i]);
    for (let i = 0; i < m - w; i++) { ops.push(["F", w + i]); ops.push(["B", i]); }
    for (let i = m - w; i < m; i++) ops.push(["B", i]);
    order.push(ops);
  }
  const done = {}, free = new Array(pp).fill(0), next = new Array(pp).fill(0), bars = { F: [], B: [] };
  let progress = true;
  while (progress) {
    progress = false;
    for (let s = 0; s < pp; s++) {
      while (next[s] < order[s].length) {
        const [k, i] = order[s][next[s]];
        const dep = k === "F" ? (s > 0 ? done[`F${s - 1},${i}`] : 0) : (s < pp - 1 ? done[`B${s + 1},${i}`] : done[`F${s},${i}`]);
        if (dep === undefined) break;
        const start = Math.max(free[s], dep), dur = k === "F" ? f : bw;
        done[`${k}${s},${i}`] = start + dur;
        free[s] = start + dur;
        bars[k].push({ s, i, start, dur });
        next[s]++;
        progress = true;
      }
    }
  }
  const trace = (k, name, color) => ({
    type: "bar", orientation: "h", name, base: bars[k].map((x) => x.start), x: bars[k].map((x) => x.dur),
    y: bars[k].map((x) => `stage ${x.s}`), marker: { color, line: { color: "#fff", width: 1 } },
    text: bars[k].map((x) => String(x.i)), textposition: "inside", insidetextanchor: "middle",
    hovertemplate: `${name} of micro-batch %{text} on %{y}: %{base:.3g} .. +%{x:.3g} s<extra></extra>`,
  });
  const shown = m < mAll ? ` (first ${m} of ${mAll} micro-batches)` : "";
  plot(`Pipeline timeline: 1F1B over ${pp} stages${shown}${p.vpp > 1 ? `; interleaving (vpp ${p.vpp}) not drawn` : ""}`,
    [trace("F", "forward", "#4c78a8"), trace("B", "backward", "#f58518")],
    { barmode: "overlay", xaxis: { title: "s" }, yaxis: { autorange: "reversed" }, showlegend: true }, Math.max(220, 26 * pp + 120));
}

function memoryBar(title, rec) {
  const parts = { ...rec.per_gpu_gib };
  delete parts.total;
  stacked(title, parts, "GiB", { limit: rec.capacity_gib, limitLabel: `${rec.gpu}: ${fmt(rec.capacity_gib)} GiB`, y: "per GPU" });
}

const PAGES = {
  plan: {
    fields: [
      { name: "model", type: "select", options: MODELS, def: "gpt3-175b" },
      { name: "system", type: "select", options: SYSTEMS, def: "dgx-h100" },
      { name: "goal", type: "select", options: ["train", "serve"], def: "train" },
      { name: "tokens", type: "text", def: "300B", help: "training tokens, e.g. 300B, 15T" },
      { name: "days", type: "number", def: "30", help: "target training time" },
      { name: "gpus", type: "number", help: "fix the GPU count (default: fewest meeting --days)" },
      { name: "rate", type: "number", def: "10", label: "rate (req/s, serve)" },
      { name: "years", type: "number", def: "4" }, { name: "utilization", type: "number", def: "0.7" },
      { name: "cloud_usd_per_gpu_hour", type: "number", label: "cloud $/GPU-hour" },
      { name: "pue", type: "number" },
    ],
    async run(v) {
      const { data: d } = await api("plan", pick(v, ["model", "system", "goal", "tokens", "days", "gpus", "rate", "years", "utilization", "cloud_usd_per_gpu_hour", "pue"]));
      section(null, h("p", { class: "answer", text: d.answer }));
      const c = d.workload_cost_usd || {};
      stats([
        ["gpus", "GPUs", d.gpus], ["nodes", "nodes", d.nodes], ["days", "days", d.days],
        ["facility_power_kw", "facility power", d.power && d.power.facility_power_kw, "kW"],
        ["racks", "racks", d.racks && d.racks.racks],
        ["on_prem_usd", "run cost on-prem", c.on_prem_usd, "", usd], ["cloud_usd", "run cost in the cloud", c.cloud_usd, "", usd],
        ["breakeven_months", "buying breaks even after", d.tco && d.tco.breakeven_months, "months"],
      ]);
      if (c.on_prem_usd !== undefined) {
        plot("This run: on-prem vs cloud", [{ type: "bar", x: ["on-prem", "cloud"], y: [c.on_prem_usd, c.cloud_usd], marker: { color: ["#2756c5", "#e07b00"] },
          text: [usd(c.on_prem_usd), usd(c.cloud_usd)], textposition: "auto", hovertemplate: "%{x}: %{text}<extra></extra>" }], { yaxis: { title: "USD" }, showlegend: false }, 280);
      }
      if (d.tco) kv("Cost of ownership of the cluster", d.tco, { id: "tco" });
      if (d.workload_details) kv("Workload", d.workload_details);
      if (d.fabric) kv("Fabric (rail-optimised fat tree)", d.fabric);
      if (d.racks) kv("Racks and cooling", d.racks);
      if (d.power) kv("Power", d.power);
      if (d.serving_day) kv("One day of serving", d.serving_day);
      if (d.notes && d.notes.length) section("Notes", h("ul", {}, d.notes.map((n) => h("li", { text: n }))));
    },
  },

  train: {
    fields: [
      { name: "model", type: "select", options: MODELS, def: "gpt3-175b" },
      { name: "system", type: "select", options: SYSTEMS, def: "dgx-h100" },
      { name: "gpus", type: "number", def: "1024" },
      { name: "tokens", type: "text", placeholder: "300B" },
      { name: "precision", type: "select", options: PRECISIONS, def: "bf16" },
      { name: "framework", type: "select", options: ["", "megatron", "deepspeed", "fsdp", "torchtitan", "maxtext"], def: "",
        help: "(auto): maxtext on TPU pods, megatron elsewhere" },
      ...PLAN_FIELDS,
      { name: "recompute", type: "select", options: ["", "none", "selective", "full"], def: "" },
      { name: "sharding", type: "select", options: ["", "none", "zero1", "zero2", "zero3", "fsdp"], def: "" },
      { name: "top", type: "number", def: "5", help: "plans to list" },
    ],
    async run(v) {
      const names = ["model", "system", "gpus", "tokens", "precision", "framework", "tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "global_batch", "seq_len", "recompute", "sharding", "top"];
      const { data: d } = await api("train", pick(v, names));
      const p = d.best_plan;
      stats([
        ["days", "days", d.days], ["step_time_s", "step time", d.step_time_s, "s"], ["mfu_pct", "MFU", d.mfu_pct, "%"],
        ["tokens_per_s", "tokens/s", d.tokens_per_s], ["memory_per_gpu_gib", "memory per GPU", d.memory_per_gpu_gib, "GiB"],
        ["gpu_hours", "GPU-hours", d.gpu_hours], ["cost_usd", "cost", d.cost_usd, "", usd], ["energy_mwh", "energy", d.energy_mwh, "MWh"],
        ["co2_tonnes", "CO2", d.co2_tonnes, "t"],
      ]);
      section("Best plan", h("p", { class: "plan", "data-key": "best_plan", text: planLabel(p) + (p.sequence_parallel ? " +SP" : "") + ` · global batch ${p.global_batch} x ${p.seq_len} tokens · ${p.precision}` }));
      const band = d.band_80pct || {};
      if (band.days) {
        // the 80% band of this regime's cross-validated errors (gpuplan.interfaces.error_bands)
        const state = band.validated ? "" : ` (${band.reason && band.novelty !== "seen" ? band.reason : "band borrowed from a broader regime"})`;
        section("80% band", h("p", { class: "note", "data-key": "band_80pct", text: `${fmt(band.days[0])} - ${fmt(band.days[1])} days, step ${fmt(band.step_time_s[0])} - ${fmt(band.step_time_s[1])} s, from the cross-validated errors of ${band.rows} public rows of ${band.regime}${state}` }));
      }
      stacked("Step time by term", d.step_breakdown_s, "s", { y: "step" });
      pipelineTimeline(d);
      // memory per GPU of the chosen plan: `gpuplan fit train` with the best plan's degrees
      const fitBody = { model: d.model, system: d.system, gpus: d.num_gpus, ...pick(p, ["tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "global_batch", "seq_len", "recompute", "sharding", "precision", "sequence_parallel"]) };
      try {
        const { data: m } = await api("fit/train", fitBody);
        memoryBar(`Memory per GPU of the best plan (${m.gpu})`, m);
      } catch (e) { if (e.name === "AbortError") throw e; section("Memory per GPU", h("p", { class: "note", text: "fit: " + e.message })); }
      if (d.search) {
        const s = d.search;
        table("Top plans", [["rank", "#"], [(r) => planLabel(r.plan), "plan"], [(r) => r.plan.global_batch, "batch seqs"], ["step_time_s", "step s"], ["mfu_pct", "MFU %"], ["memory_per_gpu_gib", "GiB/GPU"]],
          s.top_plans, { id: "top-plans", note: `${fmt(s.plans_evaluated)} plans evaluated, ${fmt(s.plans_valid)} valid, ${fmt(s.plans_fitting)} fit in memory` +
            (d.global_batch_default ? "; ranked by time per token (each plan's default global batch: the multiple of dp x micro-batch nearest 2^22 tokens)" : "") });
        section("Why the others lose", h("ul", { class: "why" }, s.why_others_lose.map((w) => h("li", { text: w }))));
        table("Plans rejected, by reason", [["key", "reason"], ["value", "plans"]], Object.entries(s.rejected).map(([key, value]) => ({ key, value })), { id: "rejected" });
      }
    },
  },

  fit: {
    fields: [
      { name: "question", type: "select", options: ["train", "max-batch", "max-seq", "min-gpus"], def: "train", label: "question" },
      { name: "model", type: "select", options: MODELS, def: "gpt3-175b" },
      { name: "gpu", type: "select", options: GPUS, def: "h100-sxm5-80gb" },
      { name: "gpus", type: "number", def: "1024", help: "= tp x pp x dp x cp (not for min-gpus)" },
      { name: "max_gpus", type: "number", def: "16384", help: "min-gpus: search limit" },
      ...PLAN_FIELDS.map((f) => ({ ...f, def: f.name === "tp" || f.name === "pp" ? "8" : f.def })),
      { name: "recompute", type: "select", options: ["none", "selective", "full"], def: "none" },
      { name: "sharding", type: "select", options: ["none", "zero1", "zero2", "zero3", "fsdp"], def: "none" },
      { name: "precision", type: "select", options: PRECISIONS, def: "bf16" },
    ],
    async run(v) {
      const q = v.question;
      const names = ["model", "gpu", "tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "global_batch", "seq_len", "recompute", "sharding", "precision"];
      if (q === "min-gpus") names.push("max_gpus"); else names.push("gpus");
      const { data: d } = await api(`fit/${q}`, pick(v, names));
      const rec = d.memory || d;
      if (q === "train") stats([["fits", "fits", d.fits], ["total_gib", "memory per GPU", d.per_gpu_gib.total, "GiB"], ["capacity_gib", "GPU memory", d.capacity_gib, "GiB"], ["headroom_gib", "headroom", d.headroom_gib, "GiB"]]);
      if (q === "max-batch") stats([["max_micro_batch", "largest micro-batch", d.max_micro_batch], ["seq_len", "at sequence length", d.seq_len]]);
      if (q === "max-seq") stats([["max_seq_len", "longest sequence", d.max_seq_len, "tokens"], ["micro_batch", "at micro-batch", d.micro_batch]]);
      if (q === "min-gpus") stats([["min_gpus", "fewest GPUs", d.min_gpus], ["layouts_tried", "layouts tried", d.layouts_tried]]);
      if (rec && rec.per_gpu_gib) memoryBar(`Memory per GPU (${rec.plan ? planLabel(rec.plan) : ""})`, rec);
      if (rec && rec.per_gpu_bytes) kv("Memory per GPU, bytes", { ...rec.per_gpu_bytes, ...{ activations: rec.activations_bytes, other: rec.other_bytes } });
    },
  },

  serve: {
    fields: [
      { name: "model", type: "select", options: MODELS, def: "llama-3-8b" },
      { name: "gpu", type: "select", options: GPUS, def: "h100-sxm5-80gb" },
      { name: "tp", type: "number", def: "1" },
      { name: "input_len", type: "number", def: "2048" }, { name: "output_len", type: "number", def: "256" },
      { name: "rate", type: "number", help: "Poisson req/s (blank: saturated closed loop)" },
      { name: "concurrency", type: "number" },
      { name: "weight_dtype", type: "select", options: SERVE_DTYPES, def: "bf16" },
      { name: "kv_dtype", type: "select", options: SERVE_DTYPES, def: "bf16" },
      { name: "engine", type: "select", options: SERVE_ENGINES, def: "generic",
        help: "serving engine whose defaults run: scheduler, KV memory rule and block size, batch limits, CUDA graphs, TP all-reduce (generic: gpuplan's own)" },
      { name: "capacity", type: "check", label: "capacity plan (slow: ~20 s)" },
      { name: "plan_rate", type: "number", def: "10", label: "capacity: req/s to serve" },
      { name: "ttft_ms", type: "number", def: "2000", label: "capacity: p90 TTFT ms" },
      { name: "tpot_ms", type: "number", def: "50", label: "capacity: p90 TPOT ms" },
      { name: "disaggregated", type: "check", label: "capacity: also disaggregated prefill/decode" },
    ],
    async run(v) {
      const common = pick(v, ["model", "input_len", "output_len", "weight_dtype", "kv_dtype"]);
      const [run, fr] = await Promise.all([
        api("serve/run", { ...common, ...pick(v, ["gpu", "tp", "rate", "concurrency", "engine"]) }),
        api("serve/frontier", { ...common, ...pick(v, ["gpu"]) }),
      ]);
      const d = run.data;
      stats([["ttft_p90_ms", "TTFT p90", d.ttft_p90_ms, "ms"], ["tpot_p90_ms", "TPOT p90", d.tpot_p90_ms, "ms"],
        ["output_tokens_per_s", "output tokens/s", d.output_tokens_per_s], ["requests_per_s", "requests/s", d.requests_per_s],
        ["kv_cache_gib_per_gpu", "KV cache per GPU", d.kv_cache_gib_per_gpu, "GiB"], ["max_concurrent_sequences", "max sequences", d.max_concurrent_sequences]]);
      const pts = fr.data.points;
      const tps = [...new Set(pts.map((p) => p.tp))].sort((a, b) => a - b);
      plot("Latency-throughput frontier (each point: tp x concurrency)", tps.map((tp) => {
        const q = pts.filter((p) => p.tp === tp).sort((a, b) => a.concurrency - b.concurrency);
        return { type: "scatter", mode: "lines+markers", name: `tp=${tp}`, x: q.map((p) => p.tokens_per_s_per_user), y: q.map((p) => p.tokens_per_s_per_gpu),
          text: q.map((p) => `concurrency ${p.concurrency}, TTFT p90 ${fmt(p.ttft_p90_ms)} ms`), hovertemplate: "%{text}<br>%{x:.1f} tok/s/user, %{y:.0f} tok/s/GPU<extra></extra>" };
      }), { xaxis: { title: "tokens/s per user (interactivity)" }, yaxis: { title: "tokens/s per GPU (throughput)" } });
      plot("TTFT p90 against load", tps.map((tp) => {
        const q = pts.filter((p) => p.tp === tp).sort((a, b) => a.concurrency - b.concurrency);
        return { type: "scatter", mode: "lines+markers", name: `tp=${tp}`, x: q.map((p) => p.concurrency), y: q.map((p) => p.ttft_p90_ms) };
      }), { xaxis: { title: "requests in flight (closed loop)", type: "log" }, yaxis: { title: "TTFT p90, ms", type: "log" } });
      kv("This deployment", d, { id: "serve-run" });
      // the 80% bands and whether public rows share this deployment's regime (gpuplan.interfaces.validation.error_bands)
      for (const [cls, info] of Object.entries((d.band_80pct || {}).regimes || {})) {
        section(`80% ${cls} band`, h("p", { class: "note", "data-key": `band_${cls}`, text: `${info.reason}; band from the cross-validated errors of ${info.rows} public rows (${info.regime})` }));
      }
      if (v.capacity && v.disaggregated) {
        const { data: c } = await api("serve/plan", { ...common, ...pick(v, ["ttft_ms", "tpot_ms", "engine"]), ...pick(v, ["plan_rate"], { plan_rate: "rate" }), gpus: v.gpu ? [v.gpu] : undefined, disaggregated: true });
        stats([["capacity_gpus", "GPUs needed", c.best.gpus], ["usd_per_million_output_tokens", "$ per M output tokens", c.best.usd_per_million_output_tokens, "", (x) => "$" + fmt(x)],
          ["disaggregated_saving_percent", "disaggregated saving vs co-located", c.disaggregated_saving_percent, "%"]]);
        table("Serving options: co-located and disaggregated", [["mode", "mode"], ["layout", "layout"], ["gpus", "GPUs"], ["kv_link", "KV link"], ["ttft_p90_ms", "TTFT p90 ms"], ["tpot_p90_ms", "TPOT p90 ms"],
          ["usd_per_million_output_tokens", "$/M out tok"], ["why_not_best", "why not"]], c.options.slice(0, 20), { id: "disaggregated" });
      } else if (v.capacity) {
        const { data: c } = await api("serve/plan", { ...common, ...pick(v, ["ttft_ms", "tpot_ms", "engine"]), ...pick(v, ["plan_rate"], { plan_rate: "rate" }), gpus: v.gpu ? [v.gpu] : undefined });
        stats([["capacity_gpus", "GPUs needed", c.best.gpus], ["usd_per_million_output_tokens", "$ per M output tokens", c.best.usd_per_million_output_tokens, "", (x) => "$" + fmt(x)]]);
        table("Capacity plan: candidates (closed loop sizes, Poisson arrivals verify)", [["layout", "layout"], ["replicas", "replicas"], ["gpus", "GPUs"], ["ttft_p90_ms", "TTFT p90 ms (closed)"], ["tpot_p90_ms", "TPOT p90 ms (closed)"],
          ["open_loop_ttft_p90_ms", "TTFT p90 ms (Poisson)"], ["open_loop_tpot_p90_ms", "TPOT p90 ms (Poisson)"], ["usd_per_million_output_tokens", "$/M out tok"], ["why_not_best", "why not"]], c.candidates, { id: "capacity" });
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
        table("One workload on each system", [["system", "system"], ["days", "days"], ["mfu_pct", "MFU %"], ["cost_usd", "cost", usd], ["usd_per_gpu_hour", "$/GPU-h"], ["energy_mwh", "MWh"], [(r) => r.best_plan && planLabel(r.best_plan), "best plan"], ["price_source", "price source"], ["error", "error"]], runs, { id: "workload" });
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
      table("Kernels on the roofline", [["name", "kernel"], ["intensity_flop_per_byte", "FLOP/byte"], ["attainable_tflops", "attainable TFLOP/s"], ["bound", "bound"], ["min_time_s", "min time s"], ["achieved_tflops", "achieved"], ["fraction_of_roof", "of roof"]], r.workloads, { id: "roofline", note: `peak ${fmt(r.peak_tflops)} TFLOP/s: ${r.peak_source}` });
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
      table("Quantisation error per format", [["format", "format"], ["snr_db", "SNR dB"], ["mse", "MSE"], ["max_abs_error", "max abs err"], ["fraction_saturated", "saturated"], ["fraction_flushed_to_zero", "flushed to 0"], ["bits_per_element", "bits/elem"], ["storage_bytes", "bytes"]], d.results, { id: "formats" });
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
      table("Per family", [["family", "family"], ["count", "rows"], ["mape_pct", "MAPE %"], ["median_abs_error_pct", "median |err| %"], ["max_abs_error_pct", "max |err| %"], ["mean_error_pct", "mean err %"], ["skipped", "skipped"]], fams, { id: "families" });
      table("Per row", [["id", "id"], ["family", "family"], ["metric", "metric"], ["measured", "measured"], ["predicted", "predicted"], ["error_pct", "error %"], ["skipped", "skipped"], ["reason", "reason"]], d.rows, { id: "rows", rowClass: (r) => (r.skipped ? "skipped" : Math.abs(r.error_pct) > 25 ? "far" : null) });
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
        api("dc/power", { ...size, ...pick(v, ["pue", "electricity_usd_per_kwh"]) }),
        api("dc/tco", { ...size, ...pick(v, ["years", "utilization", "pue", "electricity_usd_per_kwh", "cloud_usd_per_gpu_hour"]) }),
      ]);
      const f = fab.data, p = pow.data, t = tco.data;
      stats([["gpus", "GPUs", f.gpus], ["switches", "switches", f.switches], ["cables", "cables", f.cables], ["facility_power_kw", "facility power", p.facility_power_kw, "kW"],
        ["racks", "racks", p.racks], ["capex_usd", "capex", t.capex_usd, "", usd], ["on_prem_usd_per_gpu_hour", "on-prem $/GPU-h", t.on_prem_usd_per_gpu_hour], ["breakeven_months", "break-even", t.breakeven_months, "months"]]);
      table("Fabric bill of materials", [["item", "item"], ["count", "count"]], [
        ["leaf switches", f.leaf_switches], ["spine switches", f.spine_switches], ["core switches", f.core_switches], ["node-leaf cables", f.node_leaf_cables],
        ["leaf-spine cables", f.leaf_spine_cables], ["spine-core cables", f.spine_core_cables], ["transceivers", f.transceivers], ["racks", f.racks.racks]].map(([item, count]) => ({ item, count })),
        { id: "bom", note: `${f.tiers_count}-tier rail-optimised fat tree, radix ${f.switch_radix_ports}, ${fmt(f.bisection_tbps)} TB/s bisection, ${fmt(f.scaleout_gbps_per_gpu)} GB/s per GPU` });
      stacked(`Facility power (PUE ${fmt(p.pue)})`, { nodes_kw: p.nodes_power_kw, switches_kw: p.switch_power_kw, storage_kw: p.storage_power_kw, "cooling and losses (facility - IT)_kw": p.facility_power_kw - p.it_power_kw }, "kW", { y: "facility" });
      plot(`Total cost over ${t.years} years at ${fmt(t.utilization * 100)}% utilisation`, [{ type: "bar", x: ["on-prem", "cloud on-demand", "cloud reserved"],
        y: [t.on_prem_total_usd, t.cloud_total_usd, t.cloud_reserved_total_usd], text: [t.on_prem_total_usd, t.cloud_total_usd, t.cloud_reserved_total_usd].map(usd),
        textposition: "auto", marker: { color: ["#2756c5", "#e07b00", "#b8860b"] }, hovertemplate: "%{x}: %{text}<extra></extra>" }], { yaxis: { title: "USD" }, showlegend: false }, 300);
      plot("Capital cost", Object.entries(t.capex_breakdown_usd).map(([k, x]) => ({ type: "bar", orientation: "h", name: k, y: ["capex"], x: [x] })), { barmode: "stack", xaxis: { title: "USD" } }, 220);
      kv("Power", p, { id: "power" });
      table("Prices and their sources", [["key", "item"], ["value", "value"], ["description", "what"], ["source", "source"], ["date", "date"]], t.prices, { id: "prices" });
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
