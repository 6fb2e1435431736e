// gpuplan web: the HTTP API as the pages call it. Each call of an update is recorded (its
// `gpuplan ... --json` line and JSON, shown under "Reproduce this page"); the next update or Cancel
// aborts the calls in flight.

export class ApiError extends Error {
  constructor(message, field, status) { super(message); this.field = field; this.status = status; }
}

let controller = null; // the calls of the current update (aborted by the next one or Cancel)
/** Abort the calls in flight; the returned controller is the new update's. */
export function newController() { if (controller) controller.abort(); controller = new AbortController(); return controller; }
export const currentController = () => controller;
export function abortCurrent() { if (controller) controller.abort(); }

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

export async function call(path, body = {}) {
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
export const MODELS = () => listOf("model/list", "name");
export const SYSTEMS = () => listOf("systems/list", "id");
export const GPUS = () => listOf("hw/list", "id");

/** The body of an API call: the named inputs that are set (undefined ones left to the API's defaults). */
export function pick(v, names, rename = {}) {
  const b = {};
  for (const n of names) if (v[n] !== undefined && v[n] !== "" && !(Array.isArray(v[n]) && !v[n].length)) b[rename[n] || n] = v[n];
  return b;
}

let calls = [];
function track(promise) { return promise.then((r) => { calls.push(r); return r; }); }
export const api = (path, body) => track(call(path, body));
export const apiUpload = (path, file, form) => track(upload(path, file, form));
export function resetCalls() { calls = []; }
export function recordCall(c) { calls.push(c); }
export const recordedCalls = () => calls;
