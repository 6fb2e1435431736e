"""Kernel-time breakdown of the two e2e steps by category (torch.profiler). Used to find which mechanisms
a model misses, never to set a constant: the measurements are test data."""
import json, os, sys, time, re
import torch
sys.path.insert(0, os.path.dirname(__file__))
from e2e import cfg
from transformers import AutoModelForCausalLM
from torch.profiler import profile, ProfilerActivity

OUT = os.environ.get("OUT", ".")
CATS = [("gemm", r"gemm|nvjet|cutlass|sm90_xmma|cublas|splitKreduce"), ("attention", r"flash|fmha|attention"),
        ("adam", r"adam|Adam"), ("cross_entropy", r"log_softmax|nll_loss|softmax"),
        ("reduce", r"reduce|Reduce"), ("copy_cast", r"copy|Copy|cat|Cat"), ("elementwise", r"elementwise|vectorized|Elementwise")]

def cat(name):
    for c, rx in CATS:
        if re.search(rx, name): return c
    return "other"

def run(tag, model, params, mb=2, seq=4096):
    opt = torch.optim.AdamW(params, lr=1e-5, fused=True)
    x = torch.randint(0, model.config.vocab_size, (mb, seq), device="cuda")
    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    for _ in range(3): step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(2): step()
        torch.cuda.synchronize(); wall = (time.perf_counter() - t0) / 2
    by = {}; n = 0; top = []
    for e in prof.key_averages():
        dt = e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
        if e.device_type.name != "CUDA" or dt <= 0: continue
        c = cat(e.key); by[c] = by.get(c, 0.0) + dt / 2e6; n += e.count
        top.append((dt / 2e6, e.count // 2, e.key[:110]))
    top.sort(reverse=True)
    r = dict(tag=tag, wall_step_s=wall, gpu_kernel_s=sum(by.values()), kernels_per_step=n // 2,
             by_category_s=by, top=top[:45])
    print(json.dumps({k: v for k, v in r.items() if k != "top"}), flush=True)
    return r

res = []
with torch.device("cuda"):
    m = AutoModelForCausalLM.from_config(cfg("microsoft--Phi-3-mini-4k-instruct.json"), dtype=torch.float32)
m.train(); res.append(run("phi3-mini-full-amp", m, m.parameters()))
del m; torch.cuda.empty_cache()
import peft
with torch.device("cuda"):
    m = AutoModelForCausalLM.from_config(cfg("meta-llama--Meta-Llama-3-8B.json"), dtype=torch.bfloat16)
m = peft.get_peft_model(m, peft.LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
m.train(); res.append(run("llama3-8b-lora16-qkvo", m, [p for p in m.parameters() if p.requires_grad]))
json.dump(res, open(os.path.join(OUT, "prof.json"), "w"), indent=1)
