"""Inference and serving: per-operator prefill/decode time, KV-cache memory, a discrete-event
serving simulator, capacity planning and the validation-row predictor.

Modules, each one concept:
- dtypes: bytes per element of weight / KV / activation formats (incl. block-scale overhead)
- deployment: the (model, system, parallelism, dtypes) a replica runs with
- operators: per-operator roofline of one engine step (prefill, decode, mixed)
- memory: weights, KV cache per token, paged blocks, workspace, reserve, what fits
- arrivals, schedulers, simulator: the serving simulation
- capacity: fewest GPUs under TTFT/TPOT objectives, cost per million tokens, frontier
- kv_transfer, decode_pool, disaggregation: disaggregated prefill / decode pools (KV moved over
  NVLink or the network, decode-only instances) and the plan comparing them with co-located serving
- validation: the predictor `gpuplan validate` calls for inference.csv rows
"""
