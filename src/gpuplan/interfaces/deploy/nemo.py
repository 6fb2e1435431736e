"""NeMo 2: a TrainPlan as a `nemo llm pretrain --factory RECIPE key=value ...` command (NeMo-Run
CLI overrides of a pretraining recipe), and such a command read back (options.NEMO, NVIDIA/NeMo at
v2.4.0; NeMo 2 trains with Megatron-core, so the plan runs as Framework.MEGATRON).

The recipe (`--factory`) names the model: its `model()` is a Megatron-core GPT config of fixed
architecture (nemo/collections/llm/gpt/model/llama.py Llama3Config8B / 70B, Llama31Config405B), so a
plan is emitted only for the bundled model whose architecture equals the recipe's (RECIPES), and a
command read back is that model (or MODEL, given). Every override the prediction relies on is stated,
the recipe's own values included (the 70B recipe's trainer defaults to tp 4 pp 4 vpp 5 cp 2), so
the command runs what was predicted whatever the recipe's defaults are.

Plan -> overrides (MegatronStrategy.__init__, Megatron-core configs):
  tp, pp, cp, ep, etp   trainer.strategy.tensor_/pipeline_/context_/expert_model_/expert_tensor_parallel_size
  vpp                   trainer.strategy.virtual_pipeline_model_parallel_size (None: no interleaving)
  sequence parallelism  trainer.strategy.sequence_parallel
  batch, sequence       data.micro_batch_size, data.global_batch_size, data.seq_length (= model.config.seq_length)
  GPUs, steps           trainer.num_nodes x trainer.devices; trainer.max_steps
  recompute             model.config.recompute_granularity None | selective | full (full: recompute_method
                        uniform, recompute_num_layers 1, as interfaces.deploy.megatron)
  sharding              none / zero1: optim.config.use_distributed_optimizer False / True; zero2 / zero3:
                        trainer.strategy.fsdp megatron with trainer.strategy.ddp.data_parallel_sharding_strategy
                        optim_grads / optim_grads_params (Megatron FSDP; NeMo refuses fsdp=pytorch)
  precision             trainer.plugins bf16_mixed | bf16_with_fp8_mixed (fp8 hybrid, delayed scaling) |
                        bf16_with_mxfp8_mixed; all reduce gradients in fp32 (grad_reduce_in_fp32=True)
Not stated, so refused: TP communication overlap (a callback, MegatronCommOverlapCallback, not an
override), fp16 (fp16_mixed reduces gradients in fp16), an attention kernel other than the default
fused one, torch FSDP2.
"""

from __future__ import annotations

from gpuplan.errors import InputError
from gpuplan.interfaces.deploy import overrides
from gpuplan.interfaces.deploy.commandline import find_command
from gpuplan.interfaces.deploy.launch import TrainingLaunch
from gpuplan.interfaces.deploy.options import NEMO
from gpuplan.specs import ModelSpec, Precision, Recompute, Sharding, TrainPlan
from gpuplan.specs.execution import AttentionKernel, Framework

T = NEMO
PROGRAM = ["nemo", "llm", "pretrain"]
#: the search axes a NeMo recipe override can state (interfaces.api.deploy limits the plan search to them)
SEARCH_LIMITS = {"sharding": [Sharding.NONE, Sharding.ZERO1, Sharding.ZERO2, Sharding.ZERO3]}
#: recipe -> (bundled model, its config's (num_layers, hidden_size, ffn_hidden_size, num_attention_heads,
#: num_query_groups)): nemo/collections/llm/gpt/model/llama.py at v2.4.0 (Llama3Config8B, Llama3Config70B,
#: Llama31Config405B; num_query_groups 8 from Llama3Config / Llama31Config)
RECIPES = {
    "llama3_8b": ("llama-3-8b", (32, 4096, 14336, 32, 8)),
    "llama3_70b": ("llama-3-70b", (80, 8192, 28672, 64, 8)),
    "llama31_405b": ("llama-3.1-405b", (126, 16384, 53248, 128, 8)),
}
PLUGINS = {Precision.BF16: "bf16_mixed", Precision.FP8: "bf16_with_fp8_mixed", Precision.MXFP8: "bf16_with_mxfp8_mixed"}
SHARDING_STRATEGY = {Sharding.ZERO2: "optim_grads", Sharding.ZERO3: "optim_grads_params"}


def _architecture(model: ModelSpec) -> tuple[int, ...]:
    return (model.layers, model.hidden, model.ffn, model.heads, model.kv_heads)


def recipe_of(model: ModelSpec) -> str:
    """The recipe whose model config has `model`'s architecture (and is that bundled model)."""
    for name, (bundled, arch) in RECIPES.items():
        if model.name == bundled and _architecture(model) == arch:
            return name
    names = ", ".join(f"{r} ({m})" for r, (m, _) in RECIPES.items())
    raise InputError(f"model: NeMo {T.version} has no pretraining recipe gpuplan maps to {model.name}; recipes: {names}",
                     field="model", allowed=names)


def _check_plan(plan: TrainPlan) -> Precision:
    if plan.tp_comm_overlap:
        raise InputError("tp_comm_overlap: NeMo sets TP overlap through a callback, not a recipe override; leave "
                         "--tp-comm-overlap out", field="tp_comm_overlap")
    if plan.deterministic or not plan.grad_accum_fusion:  # no recorded recipe override for either (options.NEMO)
        name = "deterministic" if plan.deterministic else "no_grad_accum_fusion"
        raise InputError(f"{name}: the NeMo emitter writes no override for it; leave --{name.replace('_', '-')} out "
                         "or --emit megatron", field=name)
    if plan.sharding is Sharding.FSDP:
        raise InputError("sharding: NeMo's MegatronStrategy refuses torch FSDP2; allowed: none, zero1, zero2, zero3",
                         field="sharding", allowed="none, zero1, zero2, zero3")
    if plan.attention_kernel is not AttentionKernel.FLASH:
        raise InputError("attention_kernel: NeMo recipes run the fused (flash) attention kernel; allowed: flash",
                         field="attention_kernel", allowed="flash")
    p = Precision(plan.precision)
    if p not in PLUGINS:
        allowed = ", ".join(x.value for x in PLUGINS)
        raise InputError(f"precision: NeMo {T.version}'s recipe plugins train in {allowed}, not {p.value}",
                         field="precision", allowed=allowed)
    if Precision(plan.grad_precision) is not Precision.FP32:
        raise InputError("grad_precision: NeMo's bf16 plugins reduce gradients in fp32; allowed: fp32",
                         field="grad_precision", allowed="fp32")
    return p


def pairs(launch: TrainingLaunch, gpus_per_node: int) -> list[tuple[str, object]]:
    """The overrides of `launch` (module docstring), in the order they are printed."""
    plan = launch.plan
    p = _check_plan(plan)
    per_node = gpus_per_node if launch.gpus % gpus_per_node == 0 else launch.gpus
    s = "trainer.strategy."
    out: list[tuple[str, object]] = [
        ("trainer.num_nodes", launch.gpus // per_node), ("trainer.devices", per_node)]
    if launch.steps is not None:
        out.append(("trainer.max_steps", launch.steps))
    out += [(s + "tensor_model_parallel_size", plan.tp), (s + "pipeline_model_parallel_size", plan.pp),
            (s + "virtual_pipeline_model_parallel_size", plan.vpp if plan.vpp > 1 else None),
            (s + "context_parallel_size", plan.cp), (s + "sequence_parallel", bool(plan.sequence_parallel)),
            (s + "expert_model_parallel_size", plan.ep)]
    if plan.etp is not None:
        out.append((s + "expert_tensor_parallel_size", plan.etp))
    if plan.sharding in SHARDING_STRATEGY:
        out += [(s + "fsdp", "megatron"), (s + "ddp.data_parallel_sharding_strategy", SHARDING_STRATEGY[plan.sharding])]
    out.append(("optim.config.use_distributed_optimizer", plan.sharding is not Sharding.NONE))
    out += [("data.seq_length", plan.seq_len), ("model.config.seq_length", plan.seq_len),
            ("data.micro_batch_size", plan.micro_batch),
            ("data.global_batch_size", plan.global_batch or plan.micro_batch * plan.dp)]
    if plan.recompute is Recompute.FULL:
        out += [("model.config.recompute_granularity", "full"), ("model.config.recompute_method", "uniform"),
                ("model.config.recompute_num_layers", 1)]
    else:
        out.append(("model.config.recompute_granularity", "selective" if plan.recompute is Recompute.SELECTIVE else None))
    out.append(("trainer.plugins", PLUGINS[p]))
    return out


def emit(launch: TrainingLaunch, gpus_per_node: int, header: str = "") -> str:
    """The `nemo llm pretrain` command of `launch` (module docstring)."""
    recipe = recipe_of(launch.model)
    head = [*PROGRAM, "--factory", T.value_text("--factory", recipe), "-y"]
    return (f"# written for {T.written_for} ({T.source}){header}\n"
            + overrides.render(head, T, pairs(launch, gpus_per_node), overrides.PYTHON))


# ---- read ------------------------------------------------------------------------------------------
def _is_program(word: str, next_word: str) -> bool:
    return word == "pretrain"


def _factory(others: list[str], unmodelled: list[str]) -> str | None:
    factory = None
    i = 0
    while i < len(others):
        w = others[i]
        if w == "--factory" and i + 1 < len(others):
            factory = others[i + 1]
            i += 2
            continue
        if w.startswith("--factory="):
            factory = w.split("=", 1)[1]
        elif w not in ("-y", "--yes"):
            unmodelled.append(w)
        i += 1
    if factory is not None and "(" in factory:  # "llama3_70b(num_nodes=4)": the recipe's own arguments
        name, _, args = factory.partition("(")
        unmodelled.append(f"--factory arguments ({args.rstrip(')')})")
        factory = name
    return factory


def read(text: str, model: ModelSpec | None = None) -> TrainingLaunch:
    """A `nemo llm pretrain` command as a TrainingLaunch (`model` replaces the recipe's)."""
    from gpuplan.models import load_model

    _, words = find_command(text, _is_program, expected="NeMo `nemo llm pretrain`")
    values, unmodelled, others = overrides.parse(words, T)
    factory = _factory(others, unmodelled)
    if model is None:
        if factory not in RECIPES:
            names = ", ".join(RECIPES)
            raise InputError(f"--factory: '{factory}' is not a recipe gpuplan maps to a model ({names}); give MODEL",
                             field="factory", allowed=names)
        model = load_model(RECIPES[factory][0])
    i = overrides.integer
    s = "trainer.strategy."
    for key in ("trainer.num_nodes", "trainer.devices", "data.seq_length", "data.micro_batch_size"):
        if key not in values:
            raise InputError(f"{key}: the command must state it (the recipe's default is not read)", field=key)
    gpus = i(values, "trainer.num_nodes") * i(values, "trainer.devices")
    tp, pp, cp = (i(values, s + k, 1) for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                                                 "context_parallel_size"))
    if gpus % (tp * pp * cp):
        raise InputError(f"trainer.strategy: tp {tp} x pp {pp} x cp {cp} does not divide the {gpus} GPUs", field="tp")
    dp = gpus // (tp * pp * cp)
    mb = i(values, "data.micro_batch_size")
    plan_kw = {"tp": tp, "pp": pp, "cp": cp, "dp": dp, "ep": i(values, s + "expert_model_parallel_size", 1),
                   "etp": i(values, s + "expert_tensor_parallel_size"), "vpp": i(values, s + "virtual_pipeline_model_parallel_size") or 1,
                   "micro_batch": mb, "global_batch": i(values, "data.global_batch_size", mb * dp),
                   "seq_len": i(values, "data.seq_length"), "sequence_parallel": bool(values.get(s + "sequence_parallel", False)),
                   "recompute": _recompute(values, unmodelled), "sharding": _sharding(values),
                   "precision": next((p for p, name in PLUGINS.items() if name == values.get("trainer.plugins", "bf16_mixed"))),
                   "framework": Framework.MEGATRON}
    if values.get("model.config.seq_length", plan_kw["seq_len"]) != plan_kw["seq_len"]:
        unmodelled.append(f"model.config.seq_length={values['model.config.seq_length']} (modelled: data.seq_length)")
    try:
        plan = TrainPlan(**plan_kw)
    except ValueError as exc:
        raise InputError(f"plan: {str(exc).splitlines()[-1].strip()}", field="plan") from None
    return TrainingLaunch("nemo", model, plan, gpus, i(values, "trainer.max_steps"), tuple(unmodelled))


def _recompute(values: dict, unmodelled: list[str]) -> Recompute:
    gran = values.get("model.config.recompute_granularity")
    if gran == "full":
        method, layers = values.get("model.config.recompute_method"), values.get("model.config.recompute_num_layers", 1)
        if method not in (None, "uniform") or layers != 1:
            unmodelled.append(f"model.config.recompute_method={method} recompute_num_layers={layers} "
                              "(modelled as full recomputation of every layer)")
        return Recompute.FULL
    return Recompute.SELECTIVE if gran == "selective" else Recompute.NONE


def _sharding(values: dict) -> Sharding:
    if values.get("trainer.strategy.fsdp") == "megatron":
        strategy = values.get("trainer.strategy.ddp.data_parallel_sharding_strategy", "no_shard")
        return {"no_shard": Sharding.NONE, "optim": Sharding.ZERO1, "optim_grads": Sharding.ZERO2,
                "optim_grads_params": Sharding.ZERO3}[strategy]
    # the recipes' optimizer (recipes/optim/adam.py distributed_fused_adam_with_cosine_annealing) is distributed
    return Sharding.ZERO1 if values.get("optim.config.use_distributed_optimizer", True) else Sharding.NONE
