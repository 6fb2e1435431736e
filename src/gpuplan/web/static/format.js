// gpuplan web: how numbers read on a page. A JSON key carries its unit (`_gib`, `_ms`, `_bytes`,
// `_pct`, `_usd`, ...: docs/architecture.md "units in their keys"); a cell shows the value with that
// unit, thousands separators and about four significant digits, and the key as words ("KV cache
// per GPU", not "kv_cache_gib_per_gpu"). Tables' CSV exports keep the raw values (app.js `table`).

/** A number with thousands separators and three to four significant digits (integers exact): 0 decimals
 *  from 1,000, 1 from 100, 2 from 1, three significant digits below; scientific below 1e-3 and from 1e12. */
export function num(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  if (!Number.isFinite(v)) return v > 0 ? "∞" : "-∞";
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return v.toLocaleString("en-US");
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e12 || a < 1e-3)) return v.toExponential(2);
  if (a < 1) return v.toLocaleString("en-US", { maximumSignificantDigits: 3 });
  const d = a >= 1000 ? 0 : a >= 100 ? 1 : 2;
  return v.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: 0 });
}

/** Any value as text: numbers by `num`, booleans yes / no, null as a dash, arrays joined. */
export function fmt(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v === "number") return num(v);
  if (Array.isArray(v)) return v.map(fmt).join("; ");
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

/** Bytes with binary prefixes (DESIGN.md: memory capacity in GiB): 131072 -> "128 KiB". */
export function bytes(v) {
  if (typeof v !== "number") return fmt(v);
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let x = v, i = 0;
  // from 1023.5 up the next unit (num would round it to "1,024")
  while (Math.abs(x) >= (i === 0 ? 1024 : 1023.5) && i < units.length - 1) { x /= 1024; i++; }
  return `${num(i === 0 ? Math.round(x) : x)} ${units[i]}`;
}

/** US dollars: whole dollars from $100 up, cents below ("$1,234,567", "$2.35"). */
export function usd(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v !== "number") return fmt(v);
  const a = Math.abs(v);
  const d = a >= 100 ? 0 : a >= 0.01 || a === 0 ? 2 : 4;
  return (v < 0 ? "-$" : "$") + a.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d === 4 ? 0 : d });
}

/** Seconds, in ms or µs below one second ("0.0123" -> "12.3 ms"). */
export function seconds(v) {
  if (typeof v !== "number" || v === 0 || !Number.isFinite(v)) return typeof v === "number" ? `${num(v)} s` : fmt(v);
  const a = Math.abs(v);
  return a >= 1 ? `${num(v)} s` : a >= 1e-3 ? `${num(v * 1e3)} ms` : `${num(v * 1e6)} µs`;
}

// unit words of a key (the last `_`-separated words that name a unit), longest first, and how a value shows
const UNITS = [
  ["usd_per_gpu_hour", (v) => usd(v), "$ per GPU-hour"], ["usd_per_kwh", (v) => usd(v), "$ per kWh"],
  ["usd_per_million_output_tokens", (v) => usd(v), "$ per million output tokens"],
  ["kg_co2_per_kwh", (v) => `${num(v)} kg CO₂/kWh`, "carbon intensity"], ["flop_per_byte", (v) => `${num(v)} FLOP/B`], ["bytes_per_token", (v) => bytes(v), "per token"],
  ["bytes_per_param", (v) => `${num(v)} B`, "bytes per parameter"], ["tokens_per_s", (v) => `${num(v)} tok/s`, "tokens/s"],
  ["requests_per_s", (v) => `${num(v)} req/s`, "requests/s"], ["gbit_s", (v) => `${num(v)} Gbit/s`],
  ["bytes", bytes], ["gib", (v) => `${num(v)} GiB`], ["mib", (v) => `${num(v)} MiB`], ["ms", (v) => `${num(v)} ms`],
  ["s", seconds], ["pct", (v) => `${num(v)}%`], ["percent", (v) => `${num(v)}%`], ["usd", usd],
  ["kw", (v) => `${num(v)} kW`], ["w", (v) => `${num(v)} W`], ["kwh", (v) => `${num(v)} kWh`], ["mwh", (v) => `${num(v)} MWh`],
  ["gbps", (v) => `${num(v)} GB/s`], ["tbps", (v) => `${num(v)} TB/s`], ["tflops", (v) => `${num(v)} TFLOP/s`],
  ["db", (v) => `${num(v)} dB`], ["tonnes", (v) => `${num(v)} t`], ["kg", (v) => `${num(v)} kg`], ["months", (v) => `${num(v)} months`],
  ["hours", (v) => `${num(v)} h`], ["days", (v) => `${num(v)} days`],
].map(([words, show, said]) => ({ words: words.split("_"), show, said }));

const WORDS = {
  ttft: "TTFT", tpot: "TPOT", kv: "KV", gpu: "GPU", gpus: "GPUs", cpu: "CPU", mfu: "MFU", pue: "PUE", tco: "TCO", it: "IT",
  co2: "CO₂", tp: "TP", pp: "PP", dp: "DP", ep: "EP", cp: "CP", vpp: "VPP", e2e: "end-to-end", nic: "NIC", nics: "NICs",
  nvlink: "NVLink", hbm: "HBM", mla: "MLA", moe: "MoE", slo: "SLO", snr: "SNR", mse: "MSE", id: "id", pd: "P:D",
  adp: "attention DP", mtbf: "MTBF", mape: "MAPE", len: "length", "80pct": "(80%)", ape: "APE", usd: "$", dtype: "dtype", scaleup: "scale-up", scaleout: "scale-out", num: "number of", spec: "speculative",
};

function unitOf(key) {
  // the last dotted part's unit, else its container's ("capex_breakdown_usd.gpus" is in $)
  const parts = String(key).split(".");
  for (let i = parts.length - 1; i >= 0; i--) {
    const u = partUnit(parts[i]);
    if (u) return i === parts.length - 1 ? u : { ...u, at: 0, n: 0, inherited: true };
  }
  return null;
}

function partUnit(part) {
  const words = part.split("_");
  for (const u of UNITS) {
    const n = u.words.length;
    for (let i = words.length - n; i >= 0; i--) {
      if (u.words.every((w, j) => words[i + j] === w) && (n > 1 || i === words.length - 1 || words[i + 1] === "per")) {
        return { unit: u, at: i, n };
      }
    }
  }
  return null;
}

/** A JSON key as words: "kv_cache_gib_per_gpu" -> "KV cache per GPU", "ttft_p90_ms" -> "TTFT p90";
 *  a dotted path ("capex_breakdown_usd.gpus") -> "capex breakdown · GPUs". */
export function label(key) {
  return String(key).split(".").map((part) => {
    const u = partUnit(part);
    let words = part.split("_");
    if (u) words = [...words.slice(0, u.at), ...(u.unit.said ? [u.unit.said] : []), ...words.slice(u.at + u.n)];
    const text = words.filter(Boolean).map((w) => WORDS[w] ?? w).join(" ");
    return text || part;
  }).join(" · ").replace(/\bon prem\b/g, "on-prem").replace(/^./, (c) => c.toUpperCase());
}

/** A value shown with the unit its key names ("ttft_p90_ms", 1234.56 -> "1,235 ms"; an [low, high]
 *  pair -> "low – high"); keys without a unit are shown by `fmt`. */
export function withUnit(key, v) {
  if (typeof v === "boolean" || v === null || v === undefined) return fmt(v);
  const u = unitOf(key);
  if (!u) return fmt(v);
  if (Array.isArray(v) && v.length === 2 && v.every((x) => typeof x === "number")) return `${u.unit.show(v[0])} – ${u.unit.show(v[1])}`;
  return typeof v === "number" ? u.unit.show(v) : fmt(v);
}
