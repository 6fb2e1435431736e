"""Independent end-to-end measurements on the device's H200 (test data for gpuplan, never fitted).
A: phi-3-mini full training, fp32 params + bf16 autocast, fused AdamW, SDPA, micro-batch 2 x 4096 tokens.
B: llama-3-8b LoRA r=16 on q,k,v,o, bf16 base, fp32 adapters (peft default), bf16 autocast, fused AdamW, mb 2 x 4096."""
import json, os, time
import torch, transformers
from transformers import AutoModelForCausalLM
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

OUT = os.environ.get("OUT", ".")
M = "src/gpuplan/catalog/data/models/"

def cfg(name):
    d = json.load(open(M + name))
    d.pop("architectures", None)
    c = CONFIG_MAPPING[d.pop("model_type")](**d)
    c.use_cache = False
    return c

def measure(tag, model, params, mb, seq, steps=6, warm=3):
    opt = torch.optim.AdamW(params, lr=1e-5, fused=True)
    vocab = model.config.vocab_size
    x = torch.randint(0, vocab, (mb, seq), device="cuda")
    torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(warm + steps):
        torch.cuda.synchronize(); t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize(); times.append(time.perf_counter() - t0)
    st = sorted(times[warm:])[len(times[warm:]) // 2]
    r = dict(tag=tag, micro_batch=mb, seq_len=seq, step_time_s=st, tokens_per_s=mb * seq / st,
             step_times_s=times, max_allocated_gib=torch.cuda.max_memory_allocated() / 2**30,
             max_reserved_gib=torch.cuda.max_memory_reserved() / 2**30,
             attn_impl=getattr(model.config, "_attn_implementation", None))
    print(json.dumps(r), flush=True)
    return r

def main():
  res = dict(torch=torch.__version__, transformers=transformers.__version__, gpu=torch.cuda.get_device_name(),
             runs=[])
  torch.manual_seed(0)
  with torch.device("cuda"):
      m = AutoModelForCausalLM.from_config(cfg("microsoft--Phi-3-mini-4k-instruct.json"), torch_dtype=torch.float32)
  m.train()
  res["runs"].append(measure("phi3-mini-full-amp", m, m.parameters(), 2, 4096))
  del m; torch.cuda.empty_cache()
  try:
      import peft
      with torch.device("cuda"):
          m = AutoModelForCausalLM.from_config(cfg("meta-llama--Meta-Llama-3-8B.json"), torch_dtype=torch.bfloat16)
      m = peft.get_peft_model(m, peft.LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
      m.train()
      tp = [p for p in m.parameters() if p.requires_grad]
      res["lora_param_dtype"] = str(tp[0].dtype); res["lora_params"] = sum(p.numel() for p in tp)
      res["peft"] = peft.__version__
      res["runs"].append(measure("llama3-8b-lora16-qkvo", m, tp, 2, 4096))
  except Exception as e:
      res["lora_error"] = repr(e)
  json.dump(res, open(os.path.join(OUT, "e2e.json"), "w"), indent=1)

if __name__ == "__main__":
  main()
