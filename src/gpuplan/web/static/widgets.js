// gpuplan web: the pieces a page draws with (no build step): elements, stat cards, tables with a
// CSV export (raw values), key/value tables, plotly plots and stacked bars with marked lines.

import { call } from "./client.js";
import { fmt, label, num, withUnit } from "./format.js";

export const $ = (sel, el = document) => el.querySelector(sel);

export function h(tag, attrs = {}, ...kids) {
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

// ---- outputs --------------------------------------------------------------------------------
export const out = () => $("#results");

export function section(title, ...kids) {
  const s = h("section", { class: "card" }, title ? h("h2", { text: title }) : null, ...kids);
  out().append(s);
  return s;
}

// The emitted launch configs of a result as downloads: each link asks POST /api/v1/<path> (the text of
// `gpuplan ... --emit TARGET`, interfaces.api.launch_configs) and saves it under the file name it gives.
export function downloads(path, bodyFor, targets) {
  const get = async (e, t) => {
    e.preventDefault();
    try {
      const { data } = await call(path, { ...bodyFor(t), target: t });
      const a = h("a", { href: URL.createObjectURL(new Blob([data.text], { type: "text/plain" })), download: data.filename });
      a.click();
      setTimeout(() => URL.revokeObjectURL(a.href), 0);
    } catch (err) { e.target.after(h("span", { class: "note", text: ` ${t}: ${err.message}` })); }
  };
  section("Launch configs", h("p", { class: "note", text: "Each runs the prediction as that framework or engine runs it (docs/deploy.md)." }),
    h("ul", { class: "downloads", "data-key": "launch_configs" }, targets.map((t) => h("li", {}, h("a", { href: "#", "data-target": t, onclick: (e) => get(e, t) }, t)))));
}

export function stats(items) {
  // items: [key, label, value, unit, formatter]; data-value holds the number as the API gave it
  const row = h("div", { class: "stats" });
  for (const [key, lab, value, unit, f] of items) {
    const text = (f || fmt)(value) + (unit === "%" ? "%" : unit ? " " + unit : "");
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

export function download(name, text, type = "text/csv") {
  const a = h("a", { href: URL.createObjectURL(new Blob([text], { type })), download: name });
  document.body.append(a); a.click(); a.remove();
}

export function table(title, columns, rows, opts = {}) {
  // columns: [key, label, formatter(value, row)?]; rows: objects (a key may be a function of the row);
  // a cell shows its value with the unit its key names (format.js withUnit), the CSV the raw value
  const get = (r, c) => (typeof c[0] === "function" ? c[0](r) : r[c[0]]);
  const show = (c) => c[2] || (typeof c[0] === "string" ? (v) => withUnit(c[0], v) : fmt);
  const t = h("table", { "data-table": opts.id || title, class: opts.cls },
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { text: c[1] })))),
    h("tbody", {}, rows.map((r) => h("tr", { class: opts.rowClass ? opts.rowClass(r) : null, ...(opts.rowData ? opts.rowData(r) : {}) },
      columns.map((c) => { const v = get(r, c); return h("td", { class: typeof v === "number" ? "num" : null, text: show(c)(v, r) }); })))));
  const csv = () => [columns.map((c) => csvCell(c[1])).join(","),
    ...rows.map((r) => columns.map((c) => csvCell(get(r, c))).join(","))].join("\n");
  const btn = h("button", { type: "button", class: "export", onclick: () => download(`${(opts.id || title || "table").replace(/\W+/g, "-")}.csv`, csv()), text: "CSV" });
  return section(title, btn, h("div", { class: "scroll" }, t), opts.note ? h("p", { class: "note", text: opts.note }) : null);
}

export function flatten(obj, prefix = "") {
  const rows = [];
  for (const [k, v] of Object.entries(obj || {})) {
    if (v && typeof v === "object" && !Array.isArray(v)) rows.push(...flatten(v, prefix + k + "."));
    else rows.push({ key: prefix + k, value: Array.isArray(v) ? v.join("; ") : v });
  }
  return rows;
}

export function kv(title, obj, opts = {}) {
  // quantity as words, value with its key's unit (opts.unit: the unit of keys that name none, e.g. "bytes");
  // the CSV keeps the JSON key and the raw value
  const unitKey = (k) => (opts.unit && !/_(bytes|gib|ms|s|pct|usd)$/.test(k) ? `${k}_${opts.unit}` : k);
  return table(title, [["key", "quantity", (k) => label(k)], ["value", "value", (v, r) => withUnit(unitKey(r.key), v)]], flatten(obj),
    // each row carries its JSON key and raw value (data-key, data-value), as the stats tiles do
    { id: opts.id || title, note: opts.note, cls: "kv", rowData: (r) => ({ "data-key": r.key, "data-value": r.value === null || r.value === undefined ? "" : String(r.value) }) });
}

export const LAYOUT = {
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

export function plot(title, traces, layout = {}, height = 340) {
  const div = h("div", { class: "plot", style: `height:${height}px` });
  const s = section(title, div);
  Plotly.newPlot(div, traces, axisTitles({ ...LAYOUT, ...layout }), {
    responsive: true, displaylogo: false,
    toImageButtonOptions: { format: "png", filename: (title || "plot").replace(/\W+/g, "-"), scale: 2 },
  });
  return s;
}

export function stacked(title, parts, unit, opts = {}) {
  // one horizontal bar split into named parts (a breakdown that sums to its total)
  const traces = Object.entries(parts).filter(([, v]) => v > 0).map(([k, v]) => ({
    type: "bar", orientation: "h", name: label(k), x: [v], y: [opts.y || ""],
    hovertemplate: `${label(k)}: %{x:.4g} ${unit}<extra></extra>`,
  }));
  // opts.lines: vertical marks [{x, text, color, dash, side: "left"|"right"}] (a GPU's memory, the part a plan may use)
  const lines = opts.lines || [];
  // (marks' labels run right of their line into a wider right margin)
  const shapes = lines.map((l) => ({ type: "line", x0: l.x, x1: l.x, yref: "paper", y0: 0, y1: 1, line: { color: l.color, width: 2, dash: l.dash || "dash" } }));
  const annotations = lines.map((l) => ({ x: l.x, yref: "paper", y: 1, text: l.text, showarrow: false, yanchor: "bottom",
    xanchor: l.side === "left" ? "right" : "left", font: { color: l.color } }));
  const total = Object.values(parts).filter((v) => v > 0).reduce((a, b) => a + b, 0);
  const xmax = Math.max(total, ...lines.map((l) => l.x)) * 1.05; // every mark inside the axis
  return plot(title, traces, { barmode: "stack", xaxis: { title: unit, range: [0, xmax] }, shapes, annotations, showlegend: true,
    margin: { ...LAYOUT.margin, t: 40, r: lines.some((l) => l.side !== "left") ? 170 : LAYOUT.margin.r } }, 250);
}
