"""Microbenchmark: torch SDPA causal attention (bf16, batch 2, 4,096 tokens, heads x head_dim = 4,096) per head_dim
and backend, forward and forward+backward TFLOP/s (FLOPs: fwd 4 b h s^2 d / 2, bwd 2.5 x fwd)."""
import json, os, torch
from torch.nn.attention import sdpa_kernel, SDPBackend
from torch.nn.functional import scaled_dot_product_attention as sdpa
OUT = os.environ.get("OUT", ".")
res = dict(torch=torch.__version__, gpu=torch.cuda.get_device_name(), cudnn=torch.backends.cudnn.version(), rows=[])
b, s = 2, 4096
def timeit(fn, n=10):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = 1e9
    for _ in range(n):
        st.record(); fn(); en.record(); en.synchronize(); best = min(best, st.elapsed_time(en) / 1e3)
    return best
for d in (64, 80, 96, 128, 192, 256):
    h = 4096 // d
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    go = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    fl = 4.0 * b * h * s * s * d / 2
    for name, be in (("default", None), ("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
                     ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
        try:
            ctx = sdpa_kernel([be]) if be else sdpa_kernel(list(SDPBackend))
            with ctx:
                tf = timeit(lambda: sdpa(q, k, v, is_causal=True))
                def fb():
                    o = sdpa(q, k, v, is_causal=True); o.backward(go)
                tfb = timeit(fb)
            r = dict(head_dim=d, heads=h, backend=name, fwd_s=tf, fwd_bwd_s=tfb, fwd_tflops=fl / tf / 1e12,
                     bwd_tflops=2.5 * fl / max(tfb - tf, 1e-9) / 1e12, fwd_bwd_tflops=3.5 * fl / tfb / 1e12)
        except Exception as e:
            r = dict(head_dim=d, backend=name, error=repr(e)[:200])
        print(json.dumps(r), flush=True); res["rows"].append(r)
    q.grad = k.grad = v.grad = None
json.dump(res, open(os.path.join(OUT, "sdpa_hd.json"), "w"), indent=1)
