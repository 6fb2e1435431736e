// gpuplan web: the training pages (Plan, Train, Fit) and what they draw: the 1F1B pipeline timeline
// of a plan and memory per GPU against the GPU's memory and its usable part.

import { MODELS, SYSTEMS, GPUS, api, pick } from "./client.js";
import { fmt, num, usd } from "./format.js";
import { downloads, h, kv, plot, section, stacked, stats, table } from "./widgets.js";

export const PRECISIONS = ["bf16", "fp16", "fp8"];
export const PLAN_FIELDS = [
  { name: "tp", type: "number" }, { name: "pp", type: "number" }, { name: "dp", type: "number" }, { name: "cp", type: "number" },
  { name: "ep", type: "number" }, { name: "vpp", type: "number" }, { name: "micro_batch", type: "number" },
  { name: "global_batch", type: "number" }, { name: "seq_len", type: "number" },
];
// the fine-tuning options of `gpuplan fit ...` and `gpuplan train` (cli/fine_tuning_options.py); the
// API takes them as one `fine_tuning` object, `grad_accum` beside it
const FT_DEFAULTS = { finetune: "full", lora_rank: "", lora_targets: "", lora_dropout: "", base_dtype: "", double_quant: true, optimizer: "adamw", optimizer_impl: "", offload: "none", master_weights: "fp32",
  chunked_loss: false, offload_activations: false, base_matmul_keeps_input: false, optimizer_in_backward: false,
  logits_held_in_backward: false, fused_qkv_views: false, quantized_head: false, loss_chunk_tokens: "" };
export const FINETUNE_FIELDS = [
  { name: "finetune", type: "select", options: ["full", "lora", "qlora"], def: "full", help: "full, LoRA, or QLoRA (frozen 4-bit base)" },
  { name: "lora_rank", type: "number", help: "LoRA rank r (default 8, PEFT's)" },
  { name: "lora_targets", type: "text", placeholder: "qv", help: "attn, qv, all_linear or q_proj+v_proj+down_proj" },
  { name: "lora_dropout", type: "number", placeholder: "0", help: "LoRA dropout (PEFT's default 0); > 0 keeps a dropped copy of each adapted input" },
  { name: "base_dtype", type: "select", options: ["", "bf16", "fp16", "fp32", "int8", "nf4", "fp4"], def: "", help: "frozen base storage (auto: nf4 for qlora)" },
  { name: "double_quant", type: "check", def: true, help: "4-bit base: block scales quantised to 8 bits (bitsandbytes bnb_4bit_use_double_quant)" },
  { name: "optimizer", type: "select", options: ["adamw", "adamw_8bit", "paged_adamw_8bit", "adamw_4bit", "adafactor", "sgd", "lion"], def: "adamw" },
  { name: "optimizer_impl", type: "select", options: ["", "loop", "foreach", "fused"], def: "",
    help: "AdamW kernels: loop (per-tensor eager), foreach (multi-tensor), fused; (auto): fused" },
  { name: "offload", type: "select", options: ["none", "optimizer", "params", "nvme"], def: "none", help: "optimizer: ZeRO-Offload; params: FSDP CPU offload" },
  { name: "master_weights", type: "select", options: ["fp32", "none"], def: "fp32", help: "none: pure bf16 (weights, grads, moments)" },
  { name: "chunked_loss", type: "check", help: "output head and cross-entropy in chunks (torchtune CEWithChunkedOutputLoss): no fp32 copy of all logits" },
  { name: "offload_activations", type: "check", help: "saved activations copied to host memory until backward (torchtune OffloadActivations)" },
  { name: "base_matmul_keeps_input", type: "check", help: "qlora: each 4-bit base matmul keeps its input for backward (bitsandbytes < 0.43.2)" },
  { name: "optimizer_in_backward", type: "check", help: "step each parameter as its gradient arrives (torchtune optimizer_in_bwd; one micro-batch per step)" },
  { name: "logits_held_in_backward", type: "check", help: "the loop keeps the fp32 logits until backward ends (Answer.AI fsdp_qlora train.py, LitGPT)" },
  { name: "fused_qkv_views", type: "check", help: "q, k, v split from one fused projection by views, one LoRA over it (LitGPT)" },
  { name: "quantized_head", type: "check", help: "quantised base: the output head quantised too, dequantised for its matmuls (LitGPT --quantize bnb.*)" },
  { name: "loss_chunk_tokens", type: "number", help: "chunked loss: tokens per chunk of the output head (LitGPT 128); empty: 8 chunks" },
  { name: "grad_accum", type: "number", help: "micro-batches per step: global batch = micro-batch x grad-accum x dp" },
];
// `train` and `plan`'s --framework and --deepspeed-release (cli/stack_options.py)
const FRAMEWORK = { name: "framework", type: "select", options: ["", "megatron", "deepspeed", "fsdp", "torchtitan", "maxtext", "transformers"], def: "",
  help: "(auto): maxtext on TPU pods, megatron elsewhere" };
const DEEPSPEED_RELEASE = { name: "deepspeed_release", type: "text", placeholder: "current",
  help: "deepspeed only: current (v0.6.0 on), or a version; below 0.6 (e.g. 0.5) runs the 2021 ZeRO-3 engine" };
// --sequence-parallel / --no-sequence-parallel / neither (the default: on where tp > 1), as a select
const SEQUENCE_PARALLEL = { name: "sequence_parallel", type: "select", options: ["", "on", "off"], def: "", label: "sequence parallel",
  help: "Megatron sequence parallelism; (auto): on where tp > 1" };
/** The inputs `v` with the sequence-parallel select as the API's bool (undefined: not given). */
function withSequenceParallel(v) {
  return { ...v, sequence_parallel: v.sequence_parallel === "on" ? true : v.sequence_parallel === "off" ? false : undefined };
}
/** The `fine_tuning` object of the inputs: the options that differ from the CLI's defaults (none: ordinary training). */
export function fineTuning(v) {
  const out = {};
  for (const [k, d] of Object.entries(FT_DEFAULTS)) if (v[k] !== undefined && v[k] !== "" && v[k] !== d) out[k] = v[k];
  // as the CLI (fine_tuning_options): --no-double-quant means something only with a 4-bit base, not for full
  if ((out.finetune || "full") === "full") delete out.double_quant;
  return Object.keys(out).length ? { fine_tuning: out } : {};
}
function fineTuningNotes(rec) {
  // what trains, and what is outside the GPU total: paged optimizer states (CUDA unified memory, outside
  // PyTorch's counters, not counted against fits) and bytes offloaded to the host
  if (!rec || !rec.fine_tuning || rec.fine_tuning === "full, adamw") return;
  stats([["trainable_params_per_gpu", "trainable parameters per GPU", rec.trainable_params_per_gpu],
    ["paged_optimizer_gib", "paged optimizer states", rec.paged_optimizer_gib, "GiB"], ["host_offload_gib", "offloaded to the host", rec.host_offload_gib, "GiB"]]);
  const items = [`fine-tuning: ${rec.fine_tuning}`];
  if (rec.paged_optimizer_bytes) items.push(`paged optimizer states: ${num(rec.paged_optimizer_gib)} GiB in CUDA unified memory, outside PyTorch's counters and not counted against fits`);
  if (rec.host_offload_bytes) items.push(`offloaded to the host: ${num(rec.host_offload_gib)} GiB per GPU (not in GPU memory)`);
  section("Fine-tuning", h("ul", { class: "notes", "data-key": "fine_tuning" }, items.map((n) => h("li", { text: n }))));
}
function memoryBand(rec) {
  const band = rec && rec.band_80pct;
  if (!band || !band.per_gpu_gib) return;
  const state = band.validated ? "" : " (unvalidated regime: band borrowed from a broader one)";
  section("80% band of memory per GPU", h("p", { class: "note", "data-key": "memory_band_80pct", text: `${num(band.per_gpu_gib[0])} - ${num(band.per_gpu_gib[1])} GiB from the cross-validated errors of ${band.rows} public rows of ${band.regime}; at the band's top it ${band.fits_at_band_high ? "still fits" : "would NOT fit"}${state}` }));
}

export const planLabel = (p) => `tp=${p.tp} pp=${p.pp} dp=${p.dp} cp=${p.cp}${p.ep > 1 ? " ep=" + p.ep : ""}${p.vpp > 1 ? " vpp=" + p.vpp : ""} mb=${p.micro_batch} ${p.recompute}${p.sequence_parallel ? " +sp" : ""}${p.tp_comm_overlap ? " +tp-overlap" : ""} ${p.sharding}`;

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
  // the GPU's memory and the part a plan may use (usable_gib: capacity less the memory headroom,
  // gpuplan.workloads.memory_headroom); a plan fits when its total stays left of the usable line
  const parts = { ...rec.per_gpu_gib };
  delete parts.total;
  const lines = [{ x: rec.capacity_gib, text: `${rec.gpu}: ${num(rec.capacity_gib)} GiB`, color: "#c00", dash: "solid", side: "right" }];
  if (rec.usable_gib !== undefined) lines.push({ x: rec.usable_gib, text: `usable: ${num(rec.usable_gib)} GiB`, color: "#e07b00", dash: "dash", side: "left" });
  stacked(title, parts, "GiB", { lines, y: "per GPU" });
}


export const TRAINING_PAGES = {
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
      // the training stack every search of goal train runs (gpuplan.api.plan: train's options of the same names)
      FRAMEWORK,
      { name: "compile", type: "select", options: ["", "none", "model", "loss", "model+loss"], def: "",
        help: "train: torch.compile'd parts (torchtitan); (auto): off" },
      { name: "optimizer_impl", type: "select", options: ["", "loop", "foreach", "fused"], def: "",
        help: "train: AdamW kernels: loop (per-tensor eager), foreach (multi-tensor), fused; (auto): fused" },
      DEEPSPEED_RELEASE,
    ],
    async run(v) {
      const { data: d } = await api("plan", pick(v, ["model", "system", "goal", "tokens", "days", "gpus", "rate", "years", "utilization", "cloud_usd_per_gpu_hour", "pue",
        "framework", "compile", "optimizer_impl", "deepspeed_release"]));
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
      if (d.framework_defaults_assumed) {
        // the stack the searches assumed (framework_given false: the system's default) and its defaults
        const p = d.best_plan;
        section(`Training stack: ${d.framework}${d.framework_given ? "" : " (the system's default)"}`,
          h("p", { class: "plan", "data-key": "best_plan", text: `${planLabel(p)} · compile ${d.compile} · optimizer step ${d.optimizer_impl || "fused"}` +
            (d.deepspeed_release ? ` · DeepSpeed release ${d.deepspeed_release}` : "") }),
          h("ul", { class: "notes", "data-key": "framework_defaults_assumed" }, d.framework_defaults_assumed.map((n) => h("li", { text: n }))));
      }
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
      FRAMEWORK,
      DEEPSPEED_RELEASE,
      { name: "compile", type: "select", options: ["", "none", "model", "loss", "model+loss"], def: "",
        help: "torch.compile: torchtitan; 'model' also for LoRA / QLoRA on fsdp or other; (auto): off" },
      ...PLAN_FIELDS,
      { name: "etp", type: "number", help: "expert tensor parallel size (with every other axis: one plan)" },
      { name: "recompute", type: "select", options: ["", "none", "selective", "full"], def: "" },
      { name: "sharding", type: "select", options: ["", "none", "zero1", "zero2", "zero3", "fsdp"], def: "" },
      SEQUENCE_PARALLEL,
      { name: "tp_comm_overlap", type: "check", help: "TransformerEngine TP comm overlap (userbuffers) where sequence parallelism is on" },
      { name: "pipeline_schedule", type: "select", options: ["", "1f1b", "dualpipe"], def: "", label: "pipeline schedule",
        help: "one plan (every axis given): 1f1b (interleaved with vpp > 1) or dualpipe (DeepSeek-V3: even pp, vpp 1, 2x parameters)" },
      { name: "pipeline_flushes", type: "number", label: "pipeline runs per step",
        help: "one plan: schedule runs per step (torchtitan / NeMo AutoModel: global batch / (local batch x dp)); each pays the bubble" },
      { name: "memory_savings", type: "text", label: "memory savings",
        help: "one plan: '+'-joined norm_recompute, up_projection_recompute, expert_activation_recompute, bf16_optimizer_states (DeepSeek-V3 report 3.2.3, 3.3.2)" },
      { name: "deterministic", type: "check", help: "Megatron-LM --deterministic-mode: collectives without NVLink SHARP, deterministic kernels (Megatron only)" },
      { name: "grad_accum_fusion", type: "check", def: true, help: "Megatron's gradient-accumulation fusion (off: --no-gradient-accumulation-fusion, a separate main_grad pass)" },
      { name: "checkpoint_early_stop", type: "select", options: ["", "on", "off"], def: "",
        help: "full AC recompute stops before the MLP down projection (PyTorch non-reentrant early stop; on: torchtitan before 2025-08-29); (auto): the framework's" },
      { name: "cuda_graph_scope", type: "select", options: ["", "full_iteration", "attn,moe_router,moe_preprocess", "moe_router,moe_preprocess", "attn"],
        def: "", label: "CUDA graphs", help: "Megatron --cuda-graph-scope (default none); only full_iteration removes a MoE layer's fixed launch / sync time (Megatron only)" },
      { name: "top", type: "number", def: "5", help: "plans to list" },
      ...FINETUNE_FIELDS,
    ],
    async run(v) {
      const names = ["model", "system", "gpus", "tokens", "precision", "framework", "deepspeed_release", "compile", "tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch", "global_batch", "seq_len", "recompute", "sharding", "sequence_parallel", "top", "grad_accum", "pipeline_schedule", "pipeline_flushes", "memory_savings", "cuda_graph_scope"];
      v = withSequenceParallel(v);
      if (v.tp_comm_overlap) names.push("tp_comm_overlap");
      if (v.deterministic) names.push("deterministic");
      if (!v.grad_accum_fusion) names.push("grad_accum_fusion");
      const earlyStop = v.checkpoint_early_stop ? { checkpoint_early_stop: v.checkpoint_early_stop === "on" } : {};
      const { data: d } = await api("train", { ...pick(v, names), ...fineTuning(v), ...earlyStop });
      const p = d.best_plan;
      stats([
        ["days", "days", d.days], ["step_time_s", "step time", d.step_time_s, "s"], ["mfu_pct", "MFU", d.mfu_pct, "%"],
        ["tokens_per_s", "tokens/s", d.tokens_per_s], ["memory_per_gpu_gib", "memory per GPU", d.memory_per_gpu_gib, "GiB"],
        ["gpu_hours", "GPU-hours", d.gpu_hours], ["cost_usd", "cost", d.cost_usd, "", usd], ["energy_mwh", "energy", d.energy_mwh, "MWh"],
        ["co2_tonnes", "CO2", d.co2_tonnes, "t"],
      ]);
      section("Best plan", h("p", { class: "plan", "data-key": "best_plan", text: planLabel(p) + (p.sequence_parallel ? " +SP" : "") + ` · global batch ${p.global_batch} x ${p.seq_len} tokens · ${p.precision}` }));
      downloads("train/config", () => pick(v, names), ["megatron", "nemo", "torchtitan", "deepspeed", "maxtext"]);
      const band = d.band_80pct || {};
      if (band.days) {
        // the 80% band of this regime's cross-validated errors (gpuplan.interfaces.error_bands)
        const state = band.validated ? "" : ` (${band.reason && band.novelty !== "seen" ? band.reason : "band borrowed from a broader regime"})`;
        section("80% band", h("p", { class: "note", "data-key": "band_80pct", text: `${fmt(band.days[0])} - ${fmt(band.days[1])} days, step ${fmt(band.step_time_s[0])} - ${fmt(band.step_time_s[1])} s, from the cross-validated errors of ${band.rows} public rows of ${band.regime}${state}` }));
      }
      stacked("Step time by term", d.step_breakdown_s, "s", { y: "step" });
      pipelineTimeline(d);
      // memory per GPU of the chosen plan: `gpuplan fit train` with the best plan's degrees
      const fitBody = { model: d.model, system: d.system, gpus: d.num_gpus, ...pick(p, ["tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "global_batch", "seq_len", "recompute", "sharding", "precision", "sequence_parallel"]), ...fineTuning(v),
        ...(p.compile && p.compile !== "none" ? { compile: p.compile, framework: d.framework } : {}) };
      try {
        const { data: m } = await api("fit/train", fitBody);
        memoryBar(`Memory per GPU of the best plan (${m.gpu})`, m);
        fineTuningNotes(m);
        memoryBand(m);
      } catch (e) { if (e.name === "AbortError") throw e; section("Memory per GPU", h("p", { class: "note", text: "fit: " + e.message })); }
      if (d.search) {
        const s = d.search;
        table("Top plans", [["rank", "#"], [(r) => planLabel(r.plan), "plan"], [(r) => r.plan.global_batch, "batch seqs"], ["step_time_s", "step time"], ["mfu_pct", "MFU"], ["memory_per_gpu_gib", "memory per GPU"]],
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
      { name: "grad_precision", type: "select", options: ["fp32", "bf16", "fp16"], def: "fp32", help: "gradient buffer dtype: fp32 (Megatron, 18 B/param) or bf16 / fp16 (16 B/param)" },
      SEQUENCE_PARALLEL,
      { name: "flash_attention", type: "check", def: true, help: "fused attention; off: the s x s scores are stored (unfused)" },
      { name: "framework", type: "select", options: ["", "megatron", "deepspeed", "fsdp", "torchtitan", "maxtext", "transformers", "other"], def: "",
        help: "(auto): fsdp for LoRA / QLoRA (deepspeed with a ZeRO sharding), megatron elsewhere" },
      { name: "compile", type: "select", options: ["", "none", "model", "loss", "model+loss"], def: "",
        help: "torch.compile: torchtitan; 'model' also for LoRA / QLoRA on fsdp or other; (auto): off" },
      ...FINETUNE_FIELDS,
    ],
    async run(v) {
      const q = v.question;
      const names = ["model", "gpu", "tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch", "global_batch", "seq_len", "recompute", "sharding", "precision", "grad_precision", "sequence_parallel", "framework", "compile", "grad_accum"];
      if (q === "min-gpus") names.push("max_gpus"); else names.push("gpus");
      v = withSequenceParallel(v);
      if (!v.flash_attention) names.push("flash_attention");
      const { data: d } = await api(`fit/${q}`, { ...pick(v, names), ...fineTuning(v) });
      const rec = d.memory || d;
      if (q === "train") stats([["fits", "fits", d.fits], ["total_gib", "memory per GPU", d.per_gpu_gib.total, "GiB"], ["capacity_gib", "GPU memory", d.capacity_gib, "GiB"], ["usable_gib", "usable (GPU memory less the headroom)", d.usable_gib, "GiB"], ["headroom_gib", "left of the usable part", d.headroom_gib, "GiB"]]);
      if (q === "max-batch") stats([["max_micro_batch", "largest micro-batch", d.max_micro_batch], ["seq_len", "at sequence length", d.seq_len]]);
      if (q === "max-seq") stats([["max_seq_len", "longest sequence", d.max_seq_len, "tokens"], ["micro_batch", "at micro-batch", d.micro_batch]]);
      if (q === "min-gpus") stats([["min_gpus", "fewest GPUs", d.min_gpus], ["layouts_tried", "layouts tried", d.layouts_tried]]);
      if (rec && rec.per_gpu_gib) memoryBar(`Memory per GPU (${rec.plan ? planLabel(rec.plan) : ""})`, rec);
      if (rec && rec.per_gpu_bytes) kv("Memory per GPU by part", { ...rec.per_gpu_bytes, ...{ activations: rec.activations_bytes, other: rec.other_bytes } }, { id: "memory-bytes", unit: "bytes" });
      fineTuningNotes(rec);
      memoryBand(rec);
    },
  },

};
