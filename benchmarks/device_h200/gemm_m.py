"""Microbenchmark: F.linear (cuBLAS) time vs token rows m for LLM projection shapes on one GPU, bf16 and fp8
(torch._scaled_mm, per-tensor scales). Weights rotate over copies totalling > 4x L2 so small-m GEMMs read HBM."""
import json, os, torch
import torch.nn.functional as F
OUT = os.environ.get("OUT", ".")
SHAPES = {"l8b_qkv": (6144, 4096), "l8b_o": (4096, 4096), "l8b_gateup": (28672, 4096), "l8b_down": (4096, 14336),
          "l70b_qkv": (10240, 8192), "l70b_o": (8192, 8192), "l70b_gateup": (57344, 8192), "l70b_down": (8192, 28672)}
MS = [1, 2, 4, 8, 16, 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048, 4096, 8192, 16384]
ev = lambda: torch.cuda.Event(enable_timing=True)
def bench(fn, copies, n=12):
    for i in range(3): fn(i % copies)
    torch.cuda.synchronize()
    times = []
    for i in range(n):
        s, e = ev(), ev(); s.record(); fn(i % copies); e.record(); e.synchronize(); times.append(s.elapsed_time(e) / 1e3)
    times.sort(); return times[len(times) // 2]
res = dict(torch=torch.__version__, gpu=torch.cuda.get_device_name(), rows=[])
for name, (n, k) in SHAPES.items():
    wbytes = n * k * 2
    copies = max(2, int(4 * 60e6 // wbytes) + 1)
    ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(copies)]
    w8 = [w.to(torch.float8_e4m3fn) for w in ws]
    one = torch.ones((), device="cuda")
    for m in MS:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        t = bench(lambda i: F.linear(x, ws[i]), copies)
        r = dict(shape=name, n=n, k=k, m=m, dtype="bf16", median_s=t, tflops=2 * m * n * k / t / 1e12,
                 weight_gbps=wbytes / t / 1e9)
        if m % 16 == 0:
            x8 = x.to(torch.float8_e4m3fn)
            try:
                t8 = bench(lambda i: torch._scaled_mm(x8, w8[i].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16), copies)
                r.update(fp8_median_s=t8, fp8_tflops=2 * m * n * k / t8 / 1e12, fp8_weight_gbps=wbytes / 2 / t8 / 1e9)
            except Exception as e:
                r["fp8_error"] = repr(e)[:120]
        res["rows"].append(r)
    print(name, [(r["m"], round(r["tflops"]), round(r.get("fp8_tflops", 0))) for r in res["rows"] if r["shape"] == name], flush=True)
    ws = w8 = None; torch.cuda.empty_cache()
json.dump(res, open(os.path.join(OUT, "gemm_m.json"), "w"), indent=1)
