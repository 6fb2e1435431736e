"""Inference and serving: per-operator step cost, KV-cache memory, a discrete-event serving
simulator, and the plans built on it.

Subpackages, each one stage of "a serving replica under a load" (docs/architecture.md):
- cost/: what one engine step costs and what one replica holds: dtypes (bytes per element),
  deployment (model, system, parallelism, formats of a replica), operators (per-operator roofline of
  a prefill / decode / mixed step), memory (weights, paged KV, workspace, reserve), tp_allreduce,
  kv_transfer, speculative decoding, prefix caching;
- sim/: the serving simulation: arrivals and lengths (the workload), schedulers, the simulator and its
  event loop and numba kernels, the front-end latency, decode-only pools, deferred first tokens;
- plan/: what is built on simulated replicas: the one-call estimate (service), the capacity plan and
  frontier (capacity), disaggregated prefill/decode plans (disaggregation);
- engines: each serving engine's documented defaults (scheduler, KV fraction, limits).
- jit: the kernels interpreted until the process's simulations repay numba's start-up, compiled after.
"""
