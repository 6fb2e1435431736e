"""Megatron-LM: a TrainPlan as a `torchrun ... pretrain_gpt.py` command line, and such a command read
back (options: options.MEGATRON, megatron/training/arguments.py at core_v0.15.0).

Plan -> options (Megatron-LM's meaning of each, arguments.py help text):
  tp, pp, cp, ep, etp        --tensor-/pipeline-/context-/expert-model-/expert-tensor-parallel-size
  vpp                        --num-virtual-stages-per-pipeline-rank (interleaved 1F1B)
  micro-batch, global batch  --micro-batch-size, --global-batch-size (sequences)
  seq_len, steps             --seq-length, --train-iters
  recompute selective        --recompute-granularity selective (Korthikanti et al. 2022)
  recompute full             --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
                             (every layer keeps only its input: gpuplan's Recompute.FULL)
  sharding zero1             --use-distributed-optimizer (optimizer states over dp)
  sharding zero2 / zero3     --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads / optim_grads_params
  sharding fsdp              --use-torch-fsdp2
  sequence parallelism       --sequence-parallel; TP comm overlap --tp-comm-overlap
  deterministic mode         --deterministic-mode (Megatron-LM also asks NCCL_ALGO, e.g. Ring, in the environment)
  no grad-accum fusion       --no-gradient-accumulation-fusion
  precision                  --bf16 | --fp16; fp8: --bf16 --fp8-format hybrid --fp8-recipe delayed; mxfp8:
                             --fp8-format e4m3 --fp8-recipe mxfp8; nvfp4: --fp4-format e2m1 --fp4-recipe nvfp4
  fp32 gradients             --accumulate-allreduce-grads-in-fp32 (Megatron sets it itself under --bf16)
  attention kernel           --attention-backend flash | unfused
  world size                 torchrun --nnodes x --nproc-per-node (the system's GPUs per node)

The model is stated by its architecture flags (`model_options`), as Megatron-LM's own example
scripts do; a command read back is the bundled model whose flags are identical, else a ModelSpec
built from the flags (name `megatron-cmdline`). A model Megatron-LM's flags cannot state (per-layer
attention windows, attention sinks, four norms a layer, a bias on only some projections other than
QKV) is refused by name.
"""

from __future__ import annotations

import math
import re

from gpuplan.errors import InputError
from gpuplan.interfaces.deploy.commandline import (
    ParsedArgs,
    find_command,
    parse_args,
    render_command,
)
from gpuplan.interfaces.deploy.launch import TrainingLaunch
from gpuplan.interfaces.deploy.options import MEGATRON, TORCHRUN
from gpuplan.specs import ModelSpec, Precision, Recompute, Sharding, TrainPlan
from gpuplan.specs.execution import AttentionKernel, Framework
from gpuplan.specs.model import FfnKind, MlaSpec, MoeSpec, NormKind

T = MEGATRON
SCRIPT = "pretrain_gpt.py"
_LAYER_FREQ = re.compile(r"^\(?\[0\]\*(\d+)\+\[1\]\*(\d+)\)?$")
SHARDING_OPTIONS = {Sharding.ZERO2: "optim_grads", Sharding.ZERO3: "optim_grads_params"}


def _refuse(what: str) -> InputError:
    return InputError(f"model: {T.written_for} command lines cannot state {what}", field="model")


def model_options(model: ModelSpec) -> list[list[str]]:
    """The architecture flags of `model` (module docstring); InputError for what Megatron cannot state."""
    if any(w is not None for w in model.layer_windows):
        raise _refuse("per-layer attention windows")
    if model.attention_sinks:
        raise _refuse("attention sinks")
    if model.norms_per_layer != 2:
        raise _refuse(f"{model.norms_per_layer} norms per layer")
    biases = (model.qkv_bias, model.attn_out_bias, model.mlp_bias)
    if biases not in ((True, True, True), (False, False, False), (True, False, False)):
        raise _refuse("this combination of linear biases")
    g = [T.arg("--num-layers", model.layers), T.arg("--hidden-size", model.hidden),
         T.arg("--ffn-hidden-size", model.ffn), T.arg("--num-attention-heads", model.heads),
         T.arg("--kv-channels", model.head_dim)]
    if model.kv_heads != model.heads:
        g += [T.flag("--group-query-attention"), T.arg("--num-query-groups", model.kv_heads)]
    if model.max_position_embeddings is not None:
        g.append(T.arg("--max-position-embeddings", model.max_position_embeddings))
    g.append(T.arg("--position-embedding-type", "learned_absolute" if model.learned_position_embeddings else "rope"))
    g.append(T.arg("--normalization", "RMSNorm" if model.norm is NormKind.RMSNORM else "LayerNorm"))
    g += [T.flag("--swiglu", model.ffn_kind is FfnKind.SWIGLU),
          T.flag("--untie-embeddings-and-output-weights", not model.tied_embeddings),
          T.flag("--disable-bias-linear", not model.mlp_bias), T.flag("--add-qkv-bias", biases == (True, False, False)),
          T.flag("--qk-layernorm", model.qk_norm),
          T.arg("--hidden-dropout", model.hidden_dropout), T.arg("--attention-dropout", model.attention_dropout),
          T.arg("--tokenizer-type", "NullTokenizer"), T.arg("--vocab-size", model.vocab)]
    if model.moe is not None:
        g += _moe_options(model)
    if model.mla is not None:
        m = model.mla
        g += [T.flag("--multi-latent-attention"), T.arg("--kv-lora-rank", m.kv_lora_rank),
              T.arg("--qk-head-dim", m.qk_nope_head_dim), T.arg("--qk-pos-emb-head-dim", m.qk_rope_head_dim),
              T.arg("--v-head-dim", m.v_head_dim)]
        if m.q_lora_rank is not None:
            g.append(T.arg("--q-lora-rank", m.q_lora_rank))
    if model.mtp_layers:
        g.append(T.arg("--mtp-num-layers", model.mtp_layers))
    return [x for x in g if x]


def _moe_options(model: ModelSpec) -> list[list[str]]:
    e = model.moe
    if e.dense_layers and e.layer_freq != 1:
        raise _refuse("dense leading layers with an MoE layer frequency above 1")
    freq = f"([0]*{e.dense_layers}+[1]*{model.layers - e.dense_layers})" if e.dense_layers else str(e.layer_freq)
    g = [T.arg("--num-experts", e.num_experts), T.arg("--moe-router-topk", e.top_k),
         T.arg("--moe-ffn-hidden-size", e.expert_ffn), T.arg("--moe-layer-freq", freq),
         T.flag("--moe-router-enable-expert-bias", e.router_bias)]
    if e.shared_experts:
        g.append(T.arg("--moe-shared-expert-intermediate-size", e.shared_experts * (e.shared_expert_ffn or e.expert_ffn)))
    return g


def plan_options(plan: TrainPlan) -> list[list[str]]:
    """The parallelism, batch, recomputation, sharding and precision flags of `plan` (module docstring)."""
    if plan.attention_kernel is AttentionKernel.FLASH_V1:
        raise InputError("attention_kernel: Megatron-LM has no FlashAttention-1 backend; allowed: flash, unfused",
                         field="attention_kernel")
    g = [T.arg("--tensor-model-parallel-size", plan.tp), T.arg("--pipeline-model-parallel-size", plan.pp),
         T.arg("--context-parallel-size", plan.cp), T.arg("--expert-model-parallel-size", plan.ep)]
    if plan.etp is not None:
        g.append(T.arg("--expert-tensor-parallel-size", plan.etp))
    if plan.vpp > 1:
        g.append(T.arg("--num-virtual-stages-per-pipeline-rank", plan.vpp))
    g += [T.flag("--sequence-parallel", plan.sequence_parallel), T.flag("--tp-comm-overlap", plan.tp_comm_overlap),
          T.flag("--deterministic-mode", plan.deterministic),
          T.flag("--no-gradient-accumulation-fusion", not plan.grad_accum_fusion),
          T.arg("--micro-batch-size", plan.micro_batch)]
    if plan.global_batch is not None:
        g.append(T.arg("--global-batch-size", plan.global_batch))
    g.append(T.arg("--seq-length", plan.seq_len))
    if plan.recompute is Recompute.SELECTIVE:
        g.append(T.arg("--recompute-granularity", "selective"))
    elif plan.recompute is Recompute.FULL:
        g += [T.arg("--recompute-granularity", "full"), T.arg("--recompute-method", "uniform"),
              T.arg("--recompute-num-layers", 1)]
    if plan.sharding is Sharding.ZERO1:
        g.append(T.flag("--use-distributed-optimizer"))
    elif plan.sharding in SHARDING_OPTIONS:
        g += [T.flag("--use-megatron-fsdp"), T.arg("--data-parallel-sharding-strategy", SHARDING_OPTIONS[plan.sharding])]
    elif plan.sharding is Sharding.FSDP:
        g.append(T.flag("--use-torch-fsdp2"))
    g += _precision_options(plan)
    g.append(T.arg("--attention-backend", "unfused" if plan.attention_kernel is AttentionKernel.UNFUSED else "flash"))
    return [x for x in g if x]


def _precision_options(plan: TrainPlan) -> list[list[str]]:
    p = Precision(plan.precision)
    if p in (Precision.FP32, Precision.TF32):
        out = []
    elif p is Precision.FP16:
        out = [T.flag("--fp16")]
    else:
        out = [T.flag("--bf16")]
    if p is Precision.FP8:
        out += [T.arg("--fp8-format", "hybrid"), T.arg("--fp8-recipe", "delayed")]
    elif p is Precision.MXFP8:
        out += [T.arg("--fp8-format", "e4m3"), T.arg("--fp8-recipe", "mxfp8")]
    elif p is Precision.NVFP4:
        out += [T.arg("--fp4-format", "e2m1"), T.arg("--fp4-recipe", "nvfp4")]
    if Precision(plan.grad_precision) is Precision.FP32 and p is not Precision.FP32:
        out.append(T.flag("--accumulate-allreduce-grads-in-fp32"))
    elif Precision(plan.grad_precision) is not Precision.FP32:
        raise InputError(f"grad_precision: Megatron-LM accumulates gradients in fp32 under {p.value}; allowed: fp32",
                         field="grad_precision")
    return out


def emit(launch: TrainingLaunch, gpus_per_node: int, header: str = "") -> str:
    """The torchrun + pretrain_gpt.py command of `launch` (module docstring)."""
    per_node = gpus_per_node if launch.gpus % gpus_per_node == 0 else launch.gpus
    head = ["torchrun", *TORCHRUN.arg("--nnodes", str(launch.gpus // per_node)),
            *TORCHRUN.arg("--nproc-per-node", str(per_node)), SCRIPT]
    groups = model_options(launch.model) + plan_options(launch.plan)
    if launch.steps is not None:
        groups.append(T.arg("--train-iters", launch.steps))
    groups.append(T.flag("--mock-data"))
    return f"# written for {T.written_for} ({T.source}){header}\n" + render_command(head, groups)


# ---- read ------------------------------------------------------------------------------------------
def _is_script(word: str, _next: str) -> bool:
    return word.endswith((SCRIPT, "pretrain_gpt_hybrid.py"))


#: GPT-2's BPE vocabulary (Radford et al. 2019; the gpt2-vocab.json Megatron-LM's GPT examples use with
#: --tokenizer-type GPT2BPETokenizer / --vocab-file + --merge-file): 50,257 tokens
GPT2_BPE_VOCAB = 50257


def read(text: str, model: ModelSpec | None = None) -> TrainingLaunch:
    """A Megatron-LM command line (with or without its torchrun launcher) as a TrainingLaunch; `model`
    replaces the model its architecture flags state."""
    launcher, words = find_command(text, _is_script, expected=f"Megatron-LM {SCRIPT}")
    args = parse_args(words, T)
    if not args.has("--vocab-size") and (args.values.get("--tokenizer-type") == "GPT2BPETokenizer"
                                         or any(u.startswith("--merge-file") for u in args.unmodelled)):
        args.values["--vocab-size"] = str(GPT2_BPE_VOCAB)
    launched = parse_args(launcher, TORCHRUN)
    args.unmodelled = [f"(torchrun) {o}" for o in launched.unmodelled] + args.unmodelled
    gpus = _world_size(launched) if launcher else None
    if gpus is None:
        raise InputError("from: the command has no torchrun --nnodes / --nproc-per-node, so no GPU count; "
                         "prefix it with its torchrun launcher", field="gpus")
    model = model if model is not None else model_from_args(args)
    plan = plan_from_args(args, gpus, model)
    steps = args.integer("--train-iters")
    if steps is None and args.has("--train-samples"):
        steps = math.ceil(args.integer("--train-samples") / plan.global_batch)
    return TrainingLaunch("megatron", model, plan, gpus, steps, tuple(args.unmodelled))


def _world_size(args: ParsedArgs) -> int | None:
    nodes_text, per_text = args.text("--nnodes", "1"), args.text("--nproc-per-node")
    if per_text is None:
        return None
    lo, _, hi = nodes_text.partition(":")
    if hi and hi != lo:
        raise InputError(f"--nnodes: an elastic range '{nodes_text}' has no fixed GPU count; give one number", field="nnodes")
    try:
        nodes, per = int(lo), int(per_text)
    except ValueError:
        raise InputError(f"--nproc-per-node / --nnodes: '{per_text}' x '{nodes_text}' are not GPU counts", field="gpus") from None
    if nodes < 1 or per < 1:
        raise InputError("--nnodes / --nproc-per-node: must be >= 1", field="gpus")
    return nodes * per


def model_from_args(args: ParsedArgs) -> ModelSpec:
    """The model the architecture flags state: the bundled model with identical flags, else one built from them."""
    for name in ("--num-layers", "--hidden-size", "--num-attention-heads", "--vocab-size"):
        if not args.has(name):
            raise InputError(f"{name}: the command does not state it, so the model is unknown", field=name.lstrip("-"))
    hidden, heads = args.integer("--hidden-size"), args.integer("--num-attention-heads")
    layers = args.integer("--num-layers")
    moe = None
    if args.has("--num-experts"):
        moe = _moe_from_args(args, layers)
    mla = None
    if args.values.get("--multi-latent-attention"):
        mla = MlaSpec(q_lora_rank=args.integer("--q-lora-rank"), kv_lora_rank=args.integer("--kv-lora-rank", 32),
                      qk_nope_head_dim=args.integer("--qk-head-dim", 128),
                      qk_rope_head_dim=args.integer("--qk-pos-emb-head-dim", 64), v_head_dim=args.integer("--v-head-dim", 128))
    with_bias = not args.values.get("--disable-bias-linear", False)
    qkv_bias = with_bias or bool(args.values.get("--add-qkv-bias", False))
    try:
        spec = ModelSpec(
            name="megatron-cmdline", family="megatron", layers=layers, hidden=hidden, heads=heads,
            kv_heads=args.integer("--num-query-groups", heads) if args.values.get("--group-query-attention") else heads,
            head_dim=args.integer("--kv-channels", hidden // heads), ffn=args.integer("--ffn-hidden-size", 4 * hidden),
            ffn_kind=FfnKind.SWIGLU if args.values.get("--swiglu") else FfnKind.GELU, vocab=args.integer("--vocab-size"),
            tied_embeddings=not args.values.get("--untie-embeddings-and-output-weights", False),
            max_position_embeddings=args.integer("--max-position-embeddings"),
            learned_position_embeddings=args.choice("--position-embedding-type", ("learned_absolute", "rope", "mrope",
                                                                                  "relative", "none"),
                                                    "learned_absolute") == "learned_absolute",
            norm=NormKind.RMSNORM if args.choice("--normalization", ("LayerNorm", "RMSNorm"), "LayerNorm") == "RMSNorm"
            else NormKind.LAYERNORM,
            qkv_bias=qkv_bias, attn_out_bias=with_bias, mlp_bias=with_bias, qk_norm=bool(args.values.get("--qk-layernorm")),
            mla=mla, moe=moe, mtp_layers=args.integer("--mtp-num-layers", 0, minimum=0),
            hidden_dropout=_rate(args, "--hidden-dropout"), attention_dropout=_rate(args, "--attention-dropout"),
            source="Megatron-LM command line")
    except ValueError as exc:  # pydantic: heads / kv_heads, ranges
        raise InputError(f"model flags: {str(exc).splitlines()[-1].strip()}", field="model") from None
    return recognise(spec)


def _rate(args: ParsedArgs, name: str) -> float:
    raw = args.values.get(name, "0.1")  # Megatron-LM's default dropout (arguments.py)
    try:
        value = float(str(raw))
    except ValueError:
        raise InputError(f"{name}: '{raw}' is not a number", field=name.lstrip("-")) from None
    if not 0 <= value < 1:
        raise InputError(f"{name}: {value:g} must be in [0, 1)", field=name.lstrip("-"))
    return value


def _moe_from_args(args: ParsedArgs, layers: int) -> MoeSpec:
    freq = args.text("--moe-layer-freq", "1").replace(" ", "")
    dense, every = 0, 1
    m = _LAYER_FREQ.match(freq)
    if m:
        dense = int(m.group(1))
        if dense + int(m.group(2)) != layers:
            raise InputError(f"--moe-layer-freq: {freq} covers {dense + int(m.group(2))} layers, not {layers}",
                             field="moe-layer-freq")
    elif freq.isdigit() and int(freq) >= 1:
        every = int(freq)
    else:
        raise InputError(f"--moe-layer-freq: '{freq}' is not N or ([0]*D+[1]*M)", field="moe-layer-freq")
    experts = args.integer("--num-experts")
    expert_ffn = args.integer("--moe-ffn-hidden-size", args.integer("--ffn-hidden-size"))
    shared = args.integer("--moe-shared-expert-intermediate-size")
    try:
        return MoeSpec(num_experts=experts, top_k=args.integer("--moe-router-topk", 2), expert_ffn=expert_ffn,
                       shared_experts=1 if shared else 0, shared_expert_ffn=shared, dense_layers=dense,
                       layer_freq=every, router_bias=bool(args.values.get("--moe-router-enable-expert-bias")))
    except ValueError as exc:
        raise InputError(f"MoE flags: {str(exc).splitlines()[-1].strip()}", field="num-experts") from None


def recognise(spec: ModelSpec) -> ModelSpec:
    """The bundled model whose architecture flags equal `spec`'s, else `spec` (module docstring)."""
    from gpuplan.models.bundled import bundled_model_names, load_model

    try:
        mine = model_options(spec)
    except InputError:
        return spec
    for name in bundled_model_names():
        other = load_model(name)
        try:
            if model_options(other) == mine:
                return other
        except InputError:
            continue
    return spec


def plan_from_args(args: ParsedArgs, gpus: int, model: ModelSpec) -> TrainPlan:
    """The TrainPlan the parallelism, batch, recomputation, sharding and precision flags state."""
    tp = args.integer("--tensor-model-parallel-size", 1)
    pp = args.integer("--pipeline-model-parallel-size", 1)
    cp = args.integer("--context-parallel-size", 1)
    if gpus % (tp * pp * cp):
        raise InputError(f"--tensor-/pipeline-/context-parallel-size: {tp} x {pp} x {cp} does not divide the "
                         f"{gpus} GPUs", field="tp")
    dp = gpus // (tp * pp * cp)
    vpp = args.integer("--num-virtual-stages-per-pipeline-rank", 1)
    if args.has("--num-layers-per-virtual-pipeline-stage"):
        per = args.integer("--num-layers-per-virtual-pipeline-stage")
        vpp = max(1, model.layers // (pp * per))
    if not args.has("--micro-batch-size") or not args.has("--seq-length"):
        raise InputError("--micro-batch-size / --seq-length: the command must state both", field="micro_batch")
    mb = args.integer("--micro-batch-size")
    try:
        return TrainPlan(
            tp=tp, pp=pp, dp=dp, cp=cp, ep=args.integer("--expert-model-parallel-size", 1),
            etp=args.integer("--expert-tensor-parallel-size"), vpp=vpp, micro_batch=mb,
            global_batch=args.integer("--global-batch-size", mb * dp), seq_len=args.integer("--seq-length"),
            recompute=_recompute(args), sequence_parallel=bool(args.values.get("--sequence-parallel")),
            tp_comm_overlap=bool(args.values.get("--tp-comm-overlap")), precision=_precision(args),
            deterministic=bool(args.values.get("--deterministic-mode")),
            grad_accum_fusion=not args.values.get("--no-gradient-accumulation-fusion"),
            sharding=_sharding(args), framework=Framework.MEGATRON,
            attention_kernel=AttentionKernel.UNFUSED if args.values.get("--attention-backend") in ("unfused", "local")
            else AttentionKernel.FLASH)
    except ValueError as exc:
        raise InputError(f"plan: {str(exc).splitlines()[-1].strip()}", field="plan") from None


def _recompute(args: ParsedArgs) -> Recompute:
    gran = args.choice("--recompute-granularity", ("full", "selective"))
    if gran == "full":
        method, layers = args.text("--recompute-method"), args.integer("--recompute-num-layers", 1)
        if method not in (None, "uniform") or layers != 1:
            args.unmodelled.append(f"--recompute-method {method} --recompute-num-layers {layers} "
                                   "(modelled as full recomputation of every layer)")
        return Recompute.FULL
    if gran == "selective" or args.values.get("--recompute-activations"):
        return Recompute.SELECTIVE
    return Recompute.NONE


def _sharding(args: ParsedArgs) -> Sharding:
    if args.values.get("--use-torch-fsdp2"):
        return Sharding.FSDP
    if args.values.get("--use-megatron-fsdp"):
        strategy = args.choice("--data-parallel-sharding-strategy",
                               ("no_shard", "optim", "optim_grads", "optim_grads_params"), "no_shard")
        return {"no_shard": Sharding.NONE, "optim": Sharding.ZERO1, "optim_grads": Sharding.ZERO2,
                "optim_grads_params": Sharding.ZERO3}[strategy]
    return Sharding.ZERO1 if args.values.get("--use-distributed-optimizer") else Sharding.NONE


def _precision(args: ParsedArgs) -> Precision:
    if args.has("--fp4-format"):
        return Precision.NVFP4
    if args.has("--fp8-format"):
        recipe = args.choice("--fp8-recipe", ("tensorwise", "delayed", "mxfp8", "blockwise"), "delayed")
        if recipe == "blockwise":
            args.unmodelled.append("--fp8-recipe blockwise (modelled as per-tensor fp8)")
        return Precision.MXFP8 if recipe == "mxfp8" else Precision.FP8
    if args.values.get("--bf16"):
        return Precision.BF16
    if args.values.get("--fp16"):
        return Precision.FP16
    return Precision.FP32
