"""Golden files: the emitted text of small cases, written by hand from the programs' own argument
definitions (the expected text is derived in each comment from the source, never copied from
gpuplan's output). The first line of a command (the '# written for ...' header) carries the
prediction and is checked apart."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from gpuplan.cli.main import app

runner = CliRunner()


def cli(*args: str) -> str:
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def body(text: str) -> str:
    """The text after its header comment line(s)."""
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "".join(lines)


def test_megatron_fit_plan_golden():
    # Llama 3 8B config.json (meta-llama/Meta-Llama-3-8B): 32 layers, hidden 4096, intermediate 14336, 32 heads,
    # 8 KV heads (head_dim 4096 / 32 = 128), max_position_embeddings 8192, vocab 128256, RoPE, RMSNorm, SiLU-gated MLP,
    # untied embeddings, no biases, no dropout. Megatron-LM core_v0.15.0 arguments.py spells these --num-layers,
    # --hidden-size, --ffn-hidden-size, --num-attention-heads, --kv-channels, --group-query-attention +
    # --num-query-groups, --max-position-embeddings, --position-embedding-type rope, --normalization RMSNorm, --swiglu,
    # --untie-embeddings-and-output-weights, --disable-bias-linear (store_false of add_bias_linear),
    # --hidden-dropout / --attention-dropout (default 0.1, so stated), --tokenizer-type NullTokenizer + --vocab-size.
    # Plan: fit train --gpus 8 --tp 2 --recompute full: dp 4, micro-batch 1, no global batch, seq 8192 (Llama 3's
    # published training sequence, catalog/data/recipes.toml: Meta, "Introducing Meta Llama 3"), sequence parallelism on (tp > 1), bf16 with fp32 gradient accumulation, full recomputation
    # of every layer = --recompute-granularity full --recompute-method uniform --recompute-num-layers 1.
    expected = """torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py \\
  --num-layers 32 \\
  --hidden-size 4096 \\
  --ffn-hidden-size 14336 \\
  --num-attention-heads 32 \\
  --kv-channels 128 \\
  --group-query-attention \\
  --num-query-groups 8 \\
  --max-position-embeddings 8192 \\
  --position-embedding-type rope \\
  --normalization RMSNorm \\
  --swiglu \\
  --untie-embeddings-and-output-weights \\
  --disable-bias-linear \\
  --hidden-dropout 0.0 \\
  --attention-dropout 0.0 \\
  --tokenizer-type NullTokenizer \\
  --vocab-size 128256 \\
  --tensor-model-parallel-size 2 \\
  --pipeline-model-parallel-size 1 \\
  --context-parallel-size 1 \\
  --expert-model-parallel-size 1 \\
  --sequence-parallel \\
  --micro-batch-size 1 \\
  --seq-length 8192 \\
  --recompute-granularity full \\
  --recompute-method uniform \\
  --recompute-num-layers 1 \\
  --bf16 \\
  --accumulate-allreduce-grads-in-fp32 \\
  --attention-backend flash \\
  --mock-data
"""
    text = cli("fit", "train", "llama-3-8b", "--gpus", "8", "--tp", "2", "--recompute", "full", "--emit", "megatron")
    assert text.startswith("# written for Megatron-LM core_v0.15.0")
    assert body(text) == expected


def test_deepspeed_fit_plan_golden():
    # deepspeed/runtime/constants.py: train_batch_size = train_micro_batch_size_per_gpu x gradient_accumulation_steps x
    # GPUs; fit train --gpus 16 --micro-batch 2 --global-batch 64: 2 x 2 x 16 = 64. bf16.enabled / fp16.enabled;
    # zero_optimization.stage 2 (ZeroStageEnum.gradients); full recomputation -> the activation_checkpointing section.
    expected = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
                "bf16": {"enabled": True}, "fp16": {"enabled": False}, "zero_optimization": {"stage": 2},
                "activation_checkpointing": {"partition_activations": False}}
    r = runner.invoke(app, ["fit", "train", "llama-3-8b", "--gpus", "16", "--micro-batch", "2", "--global-batch", "64",
                            "--sharding", "zero2", "--recompute", "full", "--emit", "deepspeed"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == expected  # plain JSON on stdout
    assert r.stderr.startswith("# written for DeepSpeed 0.19.8")


def test_torchtitan_fit_plan_golden():
    # torchtitan v0.2.2 job_config.py sections and keys; llama3 flavor 8B (llama3/__init__.py: dim 4096, 32 layers,
    # 32 heads, 8 KV heads, ffn multiplier 1.3, multiple_of 1024 -> 14336). Plan: fit train --gpus 16 --tp 2 --pp 2
    # --vpp 2 --micro-batch 1 --global-batch 32 --sharding zero3 --recompute selective: seq 8192 (Llama 3's published
    # training sequence, catalog/data/recipes.toml), dp 4, each rank's batch
    # 32 / 4 = 8 as local_batch_size (pp > 1: split in micro-batches of 1); pp x vpp = 4 virtual stages of
    # layers_per_stage 32 / 4 = 8 with no layers less on the first and last stage (pipeline_parallel.py: stages =
    # ceil((32 + 0 + 0) / 8) = 4); FSDP2 shard degree 4; per-op SAC.
    expected = """
[model]
name = "llama3"
flavor = "8B"
hf_assets_path = "./assets/hf/Meta-Llama-3-8B"

[training]
local_batch_size = 8
global_batch_size = 32
seq_len = 8192
mixed_precision_param = "bfloat16"

[parallelism]
data_parallel_replicate_degree = 1
data_parallel_shard_degree = 4
fsdp_reshard_after_forward = "default"
tensor_parallel_degree = 2
enable_async_tensor_parallel = false
pipeline_parallel_degree = 2
pipeline_parallel_schedule = "Interleaved1F1B"
pipeline_parallel_first_stage_less_layers = 0
pipeline_parallel_last_stage_less_layers = 0
pipeline_parallel_layers_per_stage = 8
pipeline_parallel_microbatch_size = 1
context_parallel_degree = 1
expert_parallel_degree = 1
expert_tensor_parallel_degree = 1

[activation_checkpoint]
mode = "selective"
selective_ac_option = "op"
"""
    text = cli("fit", "train", "llama-3-8b", "--gpus", "16", "--tp", "2", "--pp", "2", "--vpp", "2", "--global-batch", "32",
               "--sharding", "zero3", "--recompute", "selective", "--emit", "torchtitan")
    assert body(text) == expected


def test_vllm_command_golden():
    # vLLM engine arguments (arg_utils.py): the vllm profile's documented defaults stated explicitly:
    # max_num_seqs 256, max_num_batched_tokens 8192, chunked prefill on, gpu_memory_utilization 0.9, block_size 16
    # (workloads/inference/engines.py "vllm"); bf16 weights -> --dtype bfloat16, KV in the model dtype -> auto.
    expected = """vllm serve meta-llama/Meta-Llama-3-8B \\
  --tensor-parallel-size 2 \\
  --pipeline-parallel-size 1 \\
  --dtype bfloat16 \\
  --kv-cache-dtype auto \\
  --max-num-seqs 256 \\
  --max-num-batched-tokens 8192 \\
  --enable-chunked-prefill \\
  --gpu-memory-utilization 0.9 \\
  --block-size 16
"""
    assert body(cli("serve", "run", "llama-3-8b", "--tp", "2", "--concurrency", "8", "--emit", "vllm")) == expected


def test_vllm_overrides_golden():
    # --scheduler continuous -> --no-enable-chunked-prefill (BooleanOptionalAction); --memory-fraction 0.85 ->
    # --gpu-memory-utilization 0.85; fp8 weights -> --quantization fp8 (bf16 activations); fp8 KV -> fp8.
    text = body(cli("serve", "run", "llama-3-8b", "--concurrency", "8", "--scheduler", "continuous", "--memory-fraction",
                    "0.85", "--weight-dtype", "fp8", "--kv-dtype", "fp8", "--emit", "vllm"))
    for line in ("--quantization fp8", "--kv-cache-dtype fp8", "--no-enable-chunked-prefill",
                 "--gpu-memory-utilization 0.85"):
        assert f"  {line}" in text.splitlines() or f"  {line} \\" in text.splitlines(), line


def test_sglang_command_golden():
    # SGLang 0.5.3 server_args.py: --model-path, --tp-size, --pp-size, --dtype, --kv-cache-dtype auto,
    # --max-running-requests / --chunked-prefill-size / --mem-fraction-static / --page-size from the sglang profile
    # (512, 8192, 0.88, 1: engines.py "sglang"); prefill-first scheduling is SGLang's default (no --enable-mixed-chunk).
    expected = """python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-8B \\
  --tp-size 1 \\
  --pp-size 1 \\
  --dtype bfloat16 \\
  --kv-cache-dtype auto \\
  --max-running-requests 512 \\
  --chunked-prefill-size 8192 \\
  --mem-fraction-static 0.88 \\
  --page-size 1
"""
    assert body(cli("serve", "run", "llama-3-8b", "--concurrency", "8", "--emit", "sglang")) == expected


def test_trtllm_script_golden():
    # trtllm-serve click options (commands/serve.py) and llm_args.py: --backend pytorch, --tp_size, --pp_size,
    # --max_batch_size 2048, --max_num_tokens 8192, --kv_cache_free_gpu_memory_fraction 0.95, chunked context on
    # (the tensorrt-llm profile, engines.py); kv_cache_config.tokens_per_block 64 and the CUDA-graph batch sizes
    # of perf-overview.md with enable_padding (engines.TRTLLM_CUDA_GRAPH_BATCH_SIZES), in the options file.
    sizes = [1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192]
    extra = {"kv_cache_config": {"tokens_per_block": 64, "dtype": "auto"}, "enable_attention_dp": False,
             "cuda_graph_config": {"batch_sizes": sizes, "enable_padding": True}}
    expected = ("cat > extra-llm-api-options.yaml <<'EOF'\n" + json.dumps(extra, separators=(", ", ": ")) + "\nEOF\n"
                "trtllm-serve meta-llama/Meta-Llama-3-8B \\\n"
                "  --backend pytorch \\\n  --tp_size 1 \\\n  --pp_size 1 \\\n  --max_batch_size 2048 \\\n"
                "  --max_num_tokens 8192 \\\n  --kv_cache_free_gpu_memory_fraction 0.95 \\\n  --enable_chunked_prefill \\\n"
                "  --extra_llm_api_options extra-llm-api-options.yaml\n")
    assert body(cli("serve", "run", "llama-3-8b", "--concurrency", "8", "--emit", "trtllm")) == expected
