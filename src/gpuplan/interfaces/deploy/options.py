"""The recorded option tables: every option gpuplan writes into, or reads from, a framework's or an
engine's launch config, with the version it was read from and where it is defined there.

Each `OptionTable` is a transcription of one program's own argument definitions at one version
(docs/deploy.md cites the same files). Emitters write options only through `OptionTable.arg`,
`OptionTable.flag` and `OptionTable.key`, which refuse a name that is not in the table and a value
of the wrong kind or outside the recorded choices: an emitted option that the program would not
accept is a bug here (AssertionError), never output. Readers use the same tables to recognise the
options gpuplan models; any other option is reported as unmodelled, never dropped.

Kinds: FLAG (argparse store_true / click is_flag: present or absent), BOOL (argparse
BooleanOptionalAction: `--x` / `--no-x`), INT (> 0 unless `minimum` says otherwise), FLOAT (in
(0, 1] for the memory fractions), NUMBER (a positive finite float), RATE (a dropout probability in [0, 1)), CHOICE (one of `choices`), INTS (nargs='+' integers), STR (a
name or path), KEY (a config-file key: TOML / JSON / YAML).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Kind(str, Enum):
    FLAG = "flag"
    BOOL = "bool"
    INT = "int"
    FLOAT = "float"
    RATE = "rate"
    CHOICE = "choice"
    INTS = "ints"
    NUMBER = "number"
    STR = "str"
    KEY = "key"


@dataclass(frozen=True)
class Option:
    """One recorded option: its name as the program spells it, its kind, its allowed values and the
    line of the source that defines it."""

    name: str
    kind: Kind
    choices: tuple = ()
    defined_at: str = ""
    minimum: float = 1
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class OptionTable:
    """The options of one target at one version (module docstring)."""

    target: str
    program: str
    version: str
    source: str  # the file(s) the names were read from, with the repository and tag / commit
    options: dict[str, Option] = field(default_factory=dict)

    @property
    def written_for(self) -> str:
        """'<program> <version>': the header of every emitted config."""
        return f"{self.program} {self.version}"

    def option(self, name: str) -> Option:
        opt = self.options.get(name)
        if opt is None:
            raise AssertionError(f"{self.target}: option {name!r} is not in the recorded option table")
        return opt

    def lookup(self, spelled: str) -> Option | None:
        """The option a command line spells `spelled` (its name or an alias), None if not recorded."""
        if spelled in self.options:
            return self.options[spelled]
        return next((o for o in self.options.values() if spelled in o.aliases), None)

    def value_text(self, name: str, value) -> str:
        """`value` checked against the option's kind and choices, as the program reads it."""
        opt = self.option(name)
        if opt.kind is Kind.INT:
            if not isinstance(value, int) or isinstance(value, bool) or value < opt.minimum:
                raise AssertionError(f"{self.target} {name}: {value!r} is not an integer >= {opt.minimum:g}")
            return str(value)
        if opt.kind is Kind.FLOAT:
            if not isinstance(value, (int, float)) or not 0 < float(value) <= 1:
                raise AssertionError(f"{self.target} {name}: {value!r} is not a fraction in (0, 1]")
            return repr(float(value))
        if opt.kind is Kind.NUMBER:
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < float(value) < float("inf"):
                raise AssertionError(f"{self.target} {name}: {value!r} is not a positive finite number")
            return repr(float(value))
        if opt.kind is Kind.RATE:
            if not isinstance(value, (int, float)) or not 0 <= float(value) < 1:
                raise AssertionError(f"{self.target} {name}: {value!r} is not a probability in [0, 1)")
            return repr(float(value))
        if opt.kind is Kind.CHOICE:
            if value not in opt.choices:
                raise AssertionError(f"{self.target} {name}: {value!r} is not one of {opt.choices}")
            return str(value)
        if opt.kind is Kind.STR:
            if not isinstance(value, str) or not value:
                raise AssertionError(f"{self.target} {name}: {value!r} is not a non-empty string")
            return value
        if opt.kind is Kind.INTS:
            if not value or any(not isinstance(v, int) or v < 1 for v in value):
                raise AssertionError(f"{self.target} {name}: {value!r} is not a list of positive integers")
            return " ".join(str(v) for v in value)
        raise AssertionError(f"{self.target} {name}: a {opt.kind.value} option has no value text")

    def arg(self, name: str, value) -> list[str]:
        """Command-line tokens of one valued option: [name, value] (INTS: [name, v1, v2, ...])."""
        text = self.value_text(name, value)
        return [name, *text.split(" ")] if self.option(name).kind is Kind.INTS else [name, text]

    def flag(self, name: str, on: bool = True) -> list[str]:
        """Tokens of a FLAG (present when `on`) or a BOOL (`--x` / `--no-x`)."""
        opt = self.option(name)
        if opt.kind is Kind.FLAG:
            return [name] if on else []
        if opt.kind is Kind.BOOL:
            return [name] if on else ["--no-" + name.removeprefix("--")]
        raise AssertionError(f"{self.target} {name}: not a flag")

    def key(self, name: str, value):
        """`value` for the config key `name` (KEY options: checked by type only), returned as is."""
        opt = self.option(name)
        if opt.kind is not Kind.KEY:
            raise AssertionError(f"{self.target} {name}: not a config key")
        if opt.choices and value not in opt.choices:
            raise AssertionError(f"{self.target} {name}: {value!r} is not one of {opt.choices}")
        return value


def _table(target: str, program: str, version: str, source: str, *options: Option) -> OptionTable:
    return OptionTable(target, program, version, source, {o.name: o for o in options})


def _o(name, kind, choices=(), at="", minimum=1, aliases=()):
    return Option(name, kind, tuple(choices), at, minimum, tuple(aliases))


F, B, I, FL, R, C, IS, S, K, N = (Kind.FLAG, Kind.BOOL, Kind.INT, Kind.FLOAT, Kind.RATE, Kind.CHOICE, Kind.INTS,
                                   Kind.STR, Kind.KEY, Kind.NUMBER)

# ---- torchrun (the launcher of Megatron-LM and torchtitan) ------------------------------------------
TORCHRUN = _table(
    "torchrun", "PyTorch torchrun", "2.9", "pytorch/pytorch torch/distributed/run.py (get_args_parser)",
    _o("--nnodes", S, at="run.py --nnodes (str, '1:1')"),
    _o("--nproc-per-node", S, at="run.py --nproc-per-node", aliases=("--nproc_per_node",)),
)

# ---- Megatron-LM ------------------------------------------------------------------------------------
MEGATRON_ARGS = "megatron/training/arguments.py"
MEGATRON = _table(
    "megatron", "Megatron-LM", "core_v0.15.0",
    f"NVIDIA/Megatron-LM {MEGATRON_ARGS} at tag core_v0.15.0 (commit 0d7e02bd)",
    # parallelism
    _o("--tensor-model-parallel-size", I, at=f"{MEGATRON_ARGS}:2561"),
    _o("--pipeline-model-parallel-size", I, at=f"{MEGATRON_ARGS}:2563"),
    _o("--num-virtual-stages-per-pipeline-rank", I, at=f"{MEGATRON_ARGS}:2586"),
    _o("--context-parallel-size", I, at=f"{MEGATRON_ARGS}:2704"),
    _o("--expert-model-parallel-size", I, at=f"{MEGATRON_ARGS}:3033"),
    _o("--expert-tensor-parallel-size", I, at=f"{MEGATRON_ARGS}:3035"),
    _o("--sequence-parallel", F, at=f"{MEGATRON_ARGS}:2224"),
    _o("--tp-comm-overlap", F, at=f"{MEGATRON_ARGS}:2090"),
    _o("--deterministic-mode", F, at=f"{MEGATRON_ARGS}:2122"),
    _o("--no-gradient-accumulation-fusion", F, at=f"{MEGATRON_ARGS}:2226"),
    _o("--use-distributed-optimizer", F, at=f"{MEGATRON_ARGS}:2658"),
    _o("--use-megatron-fsdp", F, at=f"{MEGATRON_ARGS}:2674"),
    _o("--data-parallel-sharding-strategy", C, ("no_shard", "optim", "optim_grads", "optim_grads_params"),
       at=f"{MEGATRON_ARGS}:2677"),
    _o("--use-torch-fsdp2", F, at=f"{MEGATRON_ARGS}:2698"),
    # batch, sequence, length of the run
    _o("--micro-batch-size", I, at=f"{MEGATRON_ARGS}:1974"),
    _o("--global-batch-size", I, at=f"{MEGATRON_ARGS}:1981"),
    _o("--seq-length", I, at=f"{MEGATRON_ARGS}:2850"),
    _o("--train-iters", I, at=f"{MEGATRON_ARGS}:2137"),
    _o("--train-samples", I, at=f"{MEGATRON_ARGS}:2141"),
    # recomputation
    _o("--recompute-granularity", C, ("full", "selective"), at=f"{MEGATRON_ARGS}:2010"),
    _o("--recompute-method", C, ("uniform", "block"), at=f"{MEGATRON_ARGS}:2031"),
    _o("--recompute-num-layers", I, at=f"{MEGATRON_ARGS}:2040"),
    _o("--recompute-activations", F, at=f"{MEGATRON_ARGS}:2007"),
    # precision
    _o("--bf16", F, at=f"{MEGATRON_ARGS}:2520"),
    _o("--fp16", F, at=f"{MEGATRON_ARGS}:2518"),
    _o("--fp8-format", C, ("e4m3", "hybrid"), at=f"{MEGATRON_ARGS}:1313"),
    _o("--fp8-recipe", C, ("tensorwise", "delayed", "mxfp8", "blockwise"), at=f"{MEGATRON_ARGS}:1318"),
    _o("--fp4-format", C, ("e2m1",), at=f"{MEGATRON_ARGS}:1353"),
    _o("--fp4-recipe", C, ("nvfp4",), at=f"{MEGATRON_ARGS}:1357"),
    _o("--accumulate-allreduce-grads-in-fp32", F, at=f"{MEGATRON_ARGS}:2543"),
    _o("--attention-backend", C, ("flash", "fused", "unfused", "local", "auto"), at=f"{MEGATRON_ARGS}:1562"),
    # the model's architecture
    _o("--num-layers", I, at=f"{MEGATRON_ARGS}:1549"),
    _o("--hidden-size", I, at=f"{MEGATRON_ARGS}:1555"),
    _o("--ffn-hidden-size", I, at=f"{MEGATRON_ARGS}:1557"),
    _o("--num-attention-heads", I, at=f"{MEGATRON_ARGS}:1560"),
    _o("--kv-channels", I, at=f"{MEGATRON_ARGS}:1563"),
    _o("--group-query-attention", F, at=f"{MEGATRON_ARGS}:1568"),
    _o("--num-query-groups", I, at=f"{MEGATRON_ARGS}:1570"),
    _o("--max-position-embeddings", I, at=f"{MEGATRON_ARGS}:1585"),
    _o("--position-embedding-type", C, ("learned_absolute", "rope", "mrope", "relative", "none"),
       at=f"{MEGATRON_ARGS}:1588"),
    _o("--normalization", C, ("LayerNorm", "RMSNorm"), at=f"{MEGATRON_ARGS}:1628"),
    _o("--swiglu", F, at=f"{MEGATRON_ARGS}:1646"),
    _o("--untie-embeddings-and-output-weights", F, at=f"{MEGATRON_ARGS}:1662"),
    _o("--disable-bias-linear", F, at=f"{MEGATRON_ARGS}:2191"),
    _o("--add-qkv-bias", F, at=f"{MEGATRON_ARGS}:2194"),
    _o("--qk-layernorm", F, at=f"{MEGATRON_ARGS}:3023"),
    _o("--hidden-dropout", R, at=f"{MEGATRON_ARGS}:1878"),
    _o("--attention-dropout", R, at=f"{MEGATRON_ARGS}:1876"),
    _o("--tokenizer-type", C, ("NullTokenizer", "GPT2BPETokenizer"), at=f"{MEGATRON_ARGS}:2773"),
    _o("--vocab-size", I, at=f"{MEGATRON_ARGS}:2760"),
    _o("--num-experts", I, at=f"{MEGATRON_ARGS}:3037"),
    _o("--moe-router-topk", I, at=f"{MEGATRON_ARGS}:3094"),
    _o("--moe-ffn-hidden-size", I, at=f"{MEGATRON_ARGS}:3047"),
    _o("--moe-shared-expert-intermediate-size", I, at=f"{MEGATRON_ARGS}:3050"),
    _o("--moe-layer-freq", S, at=f"{MEGATRON_ARGS}:3039"),
    _o("--moe-router-enable-expert-bias", F, at=f"{MEGATRON_ARGS}:3105"),
    _o("--multi-latent-attention", F, at=f"{MEGATRON_ARGS}:1664"),
    _o("--q-lora-rank", I, at=f"{MEGATRON_ARGS}:3167"),
    _o("--kv-lora-rank", I, at=f"{MEGATRON_ARGS}:3169"),
    _o("--qk-head-dim", I, at=f"{MEGATRON_ARGS}:3171"),
    _o("--qk-pos-emb-head-dim", I, at=f"{MEGATRON_ARGS}:3173"),
    _o("--v-head-dim", I, at=f"{MEGATRON_ARGS}:3175"),
    _o("--mtp-num-layers", I, at=f"{MEGATRON_ARGS}:1666"),
    _o("--mock-data", F, at=f"{MEGATRON_ARGS}:2847"),
)

# ---- torchtitan -------------------------------------------------------------------------------------
TT = "torchtitan/config/job_config.py"
TORCHTITAN = _table(
    "torchtitan", "torchtitan", "v0.2.2", f"pytorch/torchtitan {TT} at tag v0.2.2 (commit of 2026-02-20)",
    _o("model.name", K, at=f"{TT} Model.name"),
    _o("model.flavor", K, at=f"{TT} Model.flavor"),
    _o("model.hf_assets_path", K, at=f"{TT} Model.hf_assets_path"),
    _o("model.converters", K, at=f"{TT} Model.converters"),
    _o("training.local_batch_size", K, at=f"{TT} Training.local_batch_size"),
    _o("training.global_batch_size", K, at=f"{TT} Training.global_batch_size"),
    _o("training.seq_len", K, at=f"{TT} Training.seq_len"),
    _o("training.steps", K, at=f"{TT} Training.steps"),
    _o("training.mixed_precision_param", K, ("bfloat16", "float32"), at=f"{TT} Training.mixed_precision_param"),
    _o("parallelism.data_parallel_replicate_degree", K, at=f"{TT} Parallelism.data_parallel_replicate_degree"),
    _o("parallelism.data_parallel_shard_degree", K, at=f"{TT} Parallelism.data_parallel_shard_degree"),
    _o("parallelism.fsdp_reshard_after_forward", K, ("default", "always", "never"),
       at=f"{TT} Parallelism.fsdp_reshard_after_forward"),
    _o("parallelism.tensor_parallel_degree", K, at=f"{TT} Parallelism.tensor_parallel_degree"),
    _o("parallelism.enable_async_tensor_parallel", K, (True, False), at=f"{TT} Parallelism.enable_async_tensor_parallel"),
    _o("parallelism.pipeline_parallel_degree", K, at=f"{TT} Parallelism.pipeline_parallel_degree"),
    _o("parallelism.pipeline_parallel_schedule", K, ("1F1B", "Interleaved1F1B"),
       at=f"{TT} Parallelism.pipeline_parallel_schedule"),
    _o("parallelism.pipeline_parallel_layers_per_stage", K, at=f"{TT} Parallelism.pipeline_parallel_layers_per_stage"),
    _o("parallelism.pipeline_parallel_first_stage_less_layers", K,
       at=f"{TT} Parallelism.pipeline_parallel_first_stage_less_layers"),
    _o("parallelism.pipeline_parallel_last_stage_less_layers", K,
       at=f"{TT} Parallelism.pipeline_parallel_last_stage_less_layers"),
    _o("parallelism.pipeline_parallel_microbatch_size", K, at=f"{TT} Parallelism.pipeline_parallel_microbatch_size"),
    _o("parallelism.context_parallel_degree", K, at=f"{TT} Parallelism.context_parallel_degree"),
    _o("parallelism.expert_parallel_degree", K, at=f"{TT} Parallelism.expert_parallel_degree"),
    _o("parallelism.expert_tensor_parallel_degree", K, at=f"{TT} Parallelism.expert_tensor_parallel_degree"),
    _o("activation_checkpoint.mode", K, ("selective", "full", "memory_budget", "none"), at=f"{TT} ActivationCheckpoint.mode"),
    _o("activation_checkpoint.selective_ac_option", K, at=f"{TT} ActivationCheckpoint.selective_ac_option"),
    _o("compile.enable", K, (True, False), at=f"{TT} Compile.enable"),
    _o("compile.components", K, at=f"{TT} Compile.components"),
)

# ---- DeepSpeed --------------------------------------------------------------------------------------
DS = "deepspeed/runtime/constants.py"
DEEPSPEED = _table(
    "deepspeed", "DeepSpeed", "0.19.8",
    f"deepspeed 0.19.8 sdist: {DS}, deepspeed/runtime/zero/config.py, deepspeed/runtime/activation_checkpointing/config.py "
    "(docs/_pages/config-json.md documents the same keys)",
    _o("train_batch_size", K, at=f"{DS} TRAIN_BATCH_SIZE"),
    _o("train_micro_batch_size_per_gpu", K, at=f"{DS} TRAIN_MICRO_BATCH_SIZE_PER_GPU"),
    _o("gradient_accumulation_steps", K, at=f"{DS} GRADIENT_ACCUMULATION_STEPS"),
    _o("bf16.enabled", K, (True, False), at=f"{DS} BFLOAT16 / BFLOAT16_ENABLED"),
    _o("fp16.enabled", K, (True, False), at=f"{DS} FP16 / FP16_ENABLED"),
    _o("zero_optimization.stage", K, (0, 1, 2, 3), at="deepspeed/runtime/zero/config.py ZeroStageEnum"),
    _o("activation_checkpointing.partition_activations", K, (True, False),
       at="deepspeed/runtime/activation_checkpointing/config.py ACT_CHKPT_PARTITION_ACTIVATIONS"),
)

# ---- NeMo 2 (nemo llm pretrain --factory RECIPE key=value ...) -------------------------------------
NR = "nemo/collections/llm/recipes"
NS = "nemo/lightning/pytorch/strategies/megatron_strategy.py MegatronStrategy.__init__"
MC = "megatron/core (core_v0.13.0)"
NEMO = _table(
    "nemo", "NeMo", "2.4.0", "NVIDIA/NeMo at tag v2.4.0 (commit 2381f42f): the `nemo llm pretrain` recipe factories "
    f"{NR}/llama3_8b.py, llama3_70b.py, llama31_405b.py (pretrain_recipe, trainer), {NS}, {NR}/precision/mixed_precision.py; "
    f"the nested Megatron-core configs at {MC}",
    _o("--factory", C, ("llama3_8b", "llama3_70b", "llama31_405b"), at=f"{NR}/__init__.py (@run.cli.factory name=NAME)"),
    _o("trainer.num_nodes", K, at=f"{NR}/llama3_70b.py trainer(): nl.Trainer num_nodes"),
    _o("trainer.devices", K, at=f"{NR}/llama3_70b.py trainer(): nl.Trainer devices (GPUs per node)"),
    _o("trainer.max_steps", K, at=f"{NR}/llama3_70b.py trainer(): nl.Trainer max_steps"),
    _o("trainer.plugins", K, ("bf16_mixed", "bf16_with_fp8_mixed", "bf16_with_mxfp8_mixed"),
       at=f"{NR}/precision/mixed_precision.py (@run.cli.factory functions)"),
    _o("trainer.strategy.tensor_model_parallel_size", K, at=f"{NS} tensor_model_parallel_size"),
    _o("trainer.strategy.pipeline_model_parallel_size", K, at=f"{NS} pipeline_model_parallel_size"),
    _o("trainer.strategy.virtual_pipeline_model_parallel_size", K, at=f"{NS} virtual_pipeline_model_parallel_size"),
    _o("trainer.strategy.context_parallel_size", K, at=f"{NS} context_parallel_size"),
    _o("trainer.strategy.sequence_parallel", K, (True, False), at=f"{NS} sequence_parallel"),
    _o("trainer.strategy.expert_model_parallel_size", K, at=f"{NS} expert_model_parallel_size"),
    _o("trainer.strategy.expert_tensor_parallel_size", K, at=f"{NS} expert_tensor_parallel_size"),
    _o("trainer.strategy.fsdp", K, ("megatron", None), at=f"{NS} fsdp (FSDPLiteral; 'pytorch' raises NotImplementedError)"),
    _o("trainer.strategy.ddp.data_parallel_sharding_strategy", K, ("no_shard", "optim", "optim_grads", "optim_grads_params"),
       at=f"{MC} megatron/core/distributed/distributed_data_parallel_config.py data_parallel_sharding_strategy"),
    _o("data.seq_length", K, at=f"{NR}/llama3_70b.py pretrain_recipe(): MockDataModule seq_length"),
    _o("data.micro_batch_size", K, at=f"{NR}/llama3_70b.py pretrain_recipe(): MockDataModule micro_batch_size"),
    _o("data.global_batch_size", K, at=f"{NR}/llama3_70b.py pretrain_recipe(): MockDataModule global_batch_size"),
    _o("model.config.seq_length", K, at="nemo/collections/llm/gpt/model/llama.py Llama3Config*.seq_length"),
    _o("model.config.recompute_granularity", K, ("full", "selective", None),
       at=f"{MC} megatron/core/transformer/transformer_config.py recompute_granularity"),
    _o("model.config.recompute_method", K, ("uniform", "block", None),
       at=f"{MC} megatron/core/transformer/transformer_config.py recompute_method"),
    _o("model.config.recompute_num_layers", K, at=f"{MC} megatron/core/transformer/transformer_config.py recompute_num_layers"),
    _o("optim.config.use_distributed_optimizer", K, (True, False),
       at=f"{MC} megatron/core/optimizer/optimizer_config.py use_distributed_optimizer ({NR}/optim/adam.py sets True)"),
)

# ---- MaxText (python3 -m maxtext.trainers.pre_train.train base.yml key=value ...) -------------------
MB = "src/maxtext/configs/base.yml"
MAXTEXT = _table(
    "maxtext", "MaxText", "commit e591f30c (2026-08-22)",
    f"AI-Hypercomputer/maxtext at commit e591f30c: {MB} (the keys and defaults), src/maxtext/configs/types.py "
    "(RematPolicy, QuantizationType, calculate_global_batch_sizes), src/maxtext/configs/models/*.yml",
    _o("model_name", K, ("llama3-8b", "llama3-70b", "llama3.1-405b", "mixtral-8x7b"), at=f"{MB}:23 (src/maxtext/configs/models/)"),
    _o("run_name", K, at=f"{MB}:21"),
    _o("hardware", K, ("gpu",), at=f"{MB}:521"),
    _o("dataset_type", K, ("synthetic",), at=f"{MB}:777"),
    _o("steps", K, at=f"{MB}:836"),
    _o("max_target_length", K, at=f"{MB}:880"),
    _o("per_device_batch_size", K, at=f"{MB}:731 (a float: global batch = devices x it x gradient_accumulation_steps)"),
    _o("gradient_accumulation_steps", K, at=f"{MB}:968"),
    _o("dtype", K, ("bfloat16",), at=f"{MB}:114"),
    _o("weight_dtype", K, ("float32",), at=f"{MB}:174"),
    _o("grad_dtype", K, ("float32",), at=f"{MB}:111"),
    _o("quantization", K, ("", "fp8"), at=f"{MB}:122 (types.py QuantizationType.FP8)"),
    _o("attention", K, ("cudnn_flash_te", "dot_product"), at=f"{MB}:392"),
    _o("remat_policy", K, ("full", "minimal", "minimal_with_context"), at=f"{MB}:358 (types.py RematPolicy)"),
    _o("shard_optimizer_over_data", K, (True, False), at=f"{MB}:690"),
    _o("num_slices", K, at=f"{MB}:698"),
    *(_o(f"ici_{axis}_parallelism", K, at=f"{MB}:{line}") for axis, line in
      (("data", 673), ("fsdp", 674), ("tensor", 680), ("pipeline", 683), ("context", 677), ("expert", 684))),
    *(_o(f"dcn_{axis}_parallelism", K, at=f"{MB}:{line}") for axis, line in
      (("data", 660), ("fsdp", 661), ("tensor", 667), ("pipeline", 669), ("context", 664), ("expert", 670))),
    _o("num_pipeline_repeats", K, at=f"{MB}:319"),
    _o("num_pipeline_microbatches", K, at=f"{MB}:327"),
    _o("scan_layers", K, (True, False), at=f"{MB}:387"),
)

# ---- fine-tuning: torchtune recipe configs, PEFT / TRL script arguments -----------------------------
TC = "recipes/configs"
TM = "torchtune/models/llama3/_model_builders.py lora_llama3_8b"
TORCHTUNE = _table(
    "torchtune", "torchtune", "v0.6.1", "pytorch/torchtune at tag v0.6.1 (commit a6290a5b): the LoRA / QLoRA model builders "
    f"({TM} & co.), recipes/lora_finetune_distributed.py and lora_finetune_single_device.py (the cfg keys they read), "
    f"the shipped configs {TC}/llama3/8B_lora.yaml, llama3/70B_lora.yaml, llama3_1/405B_qlora.yaml",
    _o("model._component_", K, ("torchtune.models.llama3.lora_llama3_8b", "torchtune.models.llama3.qlora_llama3_8b",
                                "torchtune.models.llama3.lora_llama3_70b", "torchtune.models.llama3.qlora_llama3_70b",
                                "torchtune.models.llama3_1.lora_llama3_1_405b", "torchtune.models.llama3_1.qlora_llama3_1_405b"),
       at="torchtune/models/llama3/__init__.py, torchtune/models/llama3_1/__init__.py"),
    _o("model.lora_attn_modules", K, at=f"{TM}(lora_attn_modules: q_proj, k_proj, v_proj, output_proj)"),
    _o("model.apply_lora_to_mlp", K, (True, False), at=f"{TM}(apply_lora_to_mlp)"),
    _o("model.apply_lora_to_output", K, (True, False), at=f"{TM}(apply_lora_to_output)"),
    _o("model.lora_rank", K, at=f"{TM}(lora_rank)"),
    _o("model.lora_alpha", K, at=f"{TM}(lora_alpha; the configs: 'usually alpha=2*rank')"),
    _o("model.lora_dropout", K, at=f"{TM}(lora_dropout)"),
    _o("batch_size", K, at=f"{TC}/llama3_1/8B_lora.yaml batch_size (per device)"),
    _o("gradient_accumulation_steps", K, at=f"{TC}/llama3_1/8B_lora.yaml gradient_accumulation_steps"),
    _o("max_steps_per_epoch", K, at=f"{TC}/llama3_1/8B_lora.yaml max_steps_per_epoch"),
    _o("epochs", K, at=f"{TC}/llama3_1/8B_lora.yaml epochs"),
    _o("dtype", K, ("bf16",), at=f"{TC}/llama3_1/8B_lora.yaml dtype (the model's and the training dtype)"),
    _o("enable_activation_checkpointing", K, (True, False), at="recipes/lora_finetune_distributed.py:170"),
    _o("fsdp_cpu_offload", K, (True, False), at="recipes/lora_finetune_distributed.py (cfg.get fsdp_cpu_offload)"),
    _o("fsdp_reshard_after_forward", K, (True, False), at="recipes/lora_finetune_distributed.py:54 (False: SHARD_GRAD_OP)"),
    _o("optimizer._component_", K, ("torch.optim.AdamW", "bitsandbytes.optim.PagedAdamW8bit", "bitsandbytes.optim.AdamW8bit"),
       at=f"{TC}/llama3_1/8B_lora.yaml optimizer (any importable optimizer class)"),
    _o("tokenizer.max_seq_len", K, at=f"{TC}/llama3_1/8B_lora.yaml tokenizer.max_seq_len"),
    _o("dataset.packed", K, (True, False), at=f"{TC}/llama3_1/8B_lora.yaml dataset.packed (packs to max_seq_len)"),
    *(_o(k, K, at=f"{TC}/llama3/70B_lora.yaml {k} (copied: a path or component the user sets)") for k in (
        "output_dir", "tokenizer._component_", "tokenizer.path", "checkpointer._component_", "checkpointer.checkpoint_dir",
        "checkpointer.checkpoint_files", "checkpointer.recipe_checkpoint", "checkpointer.output_dir", "checkpointer.model_type",
        "dataset._component_", "loss._component_", "optimizer.lr", "lr_scheduler._component_",
        "lr_scheduler.num_warmup_steps", "metric_logger._component_", "metric_logger.log_dir", "log_every_n_steps",
        "log_peak_memory_stats", "device", "seed", "shuffle", "resume_from_checkpoint")),
)
PL = "peft/tuners/lora/config.py LoraConfig"
BQ = "transformers/utils/quantization_config.py BitsAndBytesConfig.__init__"
TA = "transformers/training_args.py TrainingArguments"
PEFT = _table(
    "peft", "PEFT / transformers / TRL", "peft 0.21.2, transformers 5.24.0, trl 1.16.0",
    f"the PyPI wheels peft 0.21.2 ({PL}), transformers 5.24.0 ({BQ}, {TA}, OptimizerNames, trainer_utils.py FSDPOption), "
    "trl 1.16.0 (trl/trainer/sft_config.py SFTConfig)",
    _o("LoraConfig.r", K, at=f"{PL}.r (line 632)"),
    _o("LoraConfig.lora_alpha", K, at=f"{PL}.lora_alpha (line 652)"),
    _o("LoraConfig.lora_dropout", K, at=f"{PL}.lora_dropout (line 653)"),
    _o("LoraConfig.target_modules", K, at=f"{PL}.target_modules (line 633)"),
    _o("LoraConfig.task_type", K, ("CAUSAL_LM",), at="peft/config.py PeftConfig.task_type (TaskType)"),
    _o("BitsAndBytesConfig.load_in_4bit", K, (True, False), at=f"{BQ} load_in_4bit"),
    _o("BitsAndBytesConfig.load_in_8bit", K, (True, False), at=f"{BQ} load_in_8bit"),
    _o("BitsAndBytesConfig.bnb_4bit_quant_type", K, ("nf4", "fp4"), at=f"{BQ} bnb_4bit_quant_type"),
    _o("BitsAndBytesConfig.bnb_4bit_use_double_quant", K, (True, False), at=f"{BQ} bnb_4bit_use_double_quant"),
    _o("BitsAndBytesConfig.bnb_4bit_compute_dtype", K, ("bfloat16", "float16"), at=f"{BQ} bnb_4bit_compute_dtype"),
    _o("SFTConfig.per_device_train_batch_size", K, at=f"{TA}.per_device_train_batch_size (line 777)"),
    _o("SFTConfig.gradient_accumulation_steps", K, at=f"{TA}.gradient_accumulation_steps (line 849)"),
    _o("SFTConfig.gradient_checkpointing", K, (True, False), at=f"{TA}.gradient_checkpointing (line 926)"),
    _o("SFTConfig.bf16", K, (True, False), at=f"{TA}.bf16 (line 874)"),
    _o("SFTConfig.fp16", K, (True, False), at=f"{TA}.fp16 (line 880)"),
    _o("SFTConfig.optim", K, ("adamw_torch", "adamw_bnb_8bit", "paged_adamw_8bit", "adamw_torch_4bit", "adafactor", "sgd",
                               "lion_32bit"), at="transformers/training_args.py OptimizerNames"),
    _o("SFTConfig.fsdp", K, ("", "full_shard", "shard_grad_op", "full_shard offload"),
       at=f"{TA}.fsdp (line 1447; trainer_utils.py FSDPOption)"),
    _o("SFTConfig.max_steps", K, at=f"{TA}.max_steps (line 779)"),
    _o("SFTConfig.max_length", K, at="trl/trainer/sft_config.py SFTConfig.max_length (line 202)"),
    _o("SFTConfig.packing", K, (True, False), at="trl/trainer/sft_config.py SFTConfig.packing (line 222)"),
    _o("SFTConfig.output_dir", K, at=f"{TA}.output_dir (line 771)"),
    _o("SFTConfig.model_init_kwargs", K, at="trl/trainer/sft_config.py SFTConfig.model_init_kwargs (line 146)"),
)

# ---- vLLM -------------------------------------------------------------------------------------------
VA = "vllm/engine/arg_utils.py"
VLLM = _table(
    "vllm", "vLLM", "0.11 (commit 99d7eb5d)", f"vllm-project/vllm {VA} (EngineArgs.add_cli_args) at commit 99d7eb5d",
    _o("--model", S, at=f"{VA} ModelConfig group"),
    _o("--tensor-parallel-size", I, at=f"{VA} ParallelConfig group", aliases=("-tp",)),
    _o("--pipeline-parallel-size", I, at=f"{VA} ParallelConfig group", aliases=("-pp",)),
    _o("--data-parallel-size", I, at=f"{VA} ParallelConfig group", aliases=("-dp",)),
    _o("--enable-expert-parallel", B, at=f"{VA} ParallelConfig group (bool field: BooleanOptionalAction)"),
    _o("--max-num-seqs", I, at=f"{VA} SchedulerConfig group"),
    _o("--max-num-batched-tokens", I, at=f"{VA} SchedulerConfig group"),
    _o("--enable-chunked-prefill", B, at=f"{VA} SchedulerConfig group"),
    _o("--gpu-memory-utilization", FL, at=f"{VA} CacheConfig group"),
    _o("--block-size", I, at=f"{VA} CacheConfig group"),
    _o("--kv-cache-dtype", C, ("auto", "fp8"), at=f"{VA} CacheConfig group"),
    _o("--dtype", C, ("auto", "half", "float16", "bfloat16", "float", "float32"), at=f"{VA} ModelConfig group"),
    _o("--quantization", C, ("fp8",), at=f"{VA} ModelConfig group", aliases=("-q",)),
    _o("--cudagraph-capture-sizes", IS, at=f"{VA} CompilationConfig group"),
)

# ---- SGLang -----------------------------------------------------------------------------------------
SA = "python/sglang/srt/server_args.py"
SGLANG = _table(
    "sglang", "SGLang", "0.5.3", f"sglang 0.5.3 wheel: sglang/srt/server_args.py (ServerArgs.add_cli_args; {SA} in sgl-project/sglang)",
    _o("--model-path", S, at=f"{SA}:1291", aliases=("--model",)),
    _o("--tp-size", I, at=f"{SA}:1579", aliases=("--tensor-parallel-size",)),
    _o("--pp-size", I, at=f"{SA}:1586", aliases=("--pipeline-parallel-size",)),
    _o("--dp-size", I, at=f"{SA}:1869", aliases=("--data-parallel-size",)),
    _o("--ep-size", I, at=f"{SA}:2152", aliases=("--ep",)),
    _o("--enable-dp-attention", F, at=f"{SA}:2525"),
    _o("--mem-fraction-static", FL, at=f"{SA}:1473"),
    _o("--max-running-requests", I, at=f"{SA}:1479"),
    _o("--chunked-prefill-size", I, at=f"{SA}:1498"),
    _o("--enable-mixed-chunk", F, at=f"{SA}:2520"),
    _o("--page-size", I, at=f"{SA}:1541"),
    _o("--cuda-graph-bs", IS, at=f"{SA}:2449"),
    _o("--dtype", C, ("auto", "half", "float16", "bfloat16", "float", "float32"), at=f"{SA}:1429"),
    _o("--kv-cache-dtype", C, ("auto", "fp8_e5m2", "fp8_e4m3"), at=f"{SA}:1459"),
    _o("--quantization", C, ("fp8",), at=f"{SA}:1443 (QUANTIZATION_CHOICES)"),
)

# ---- TensorRT-LLM -----------------------------------------------------------------------------------
TS = "tensorrt_llm/commands/serve.py"
TL = "tensorrt_llm/llmapi/llm_args.py"
TRTLLM = _table(
    "trtllm", "TensorRT-LLM", "1.1 (trtllm-serve commit 4c05a748)",
    f"NVIDIA/TensorRT-LLM {TS} (click options of `serve`, commit 4c05a748) and {TL} (KvCacheConfig, CudaGraphConfig, "
    "BaseLlmArgs)",
    _o("--backend", C, ("pytorch", "tensorrt", "_autodeploy"), at=f"{TS} --backend"),
    _o("--tp_size", I, at=f"{TS} --tp_size"),
    _o("--pp_size", I, at=f"{TS} --pp_size"),
    _o("--ep_size", I, at=f"{TS} --ep_size"),
    _o("--max_batch_size", I, at=f"{TS} --max_batch_size"),
    _o("--max_num_tokens", I, at=f"{TS} --max_num_tokens"),
    _o("--kv_cache_free_gpu_memory_fraction", FL, at=f"{TS} --kv_cache_free_gpu_memory_fraction"),
    _o("--enable_chunked_prefill", F, at=f"{TS} --enable_chunked_prefill"),
    _o("--extra_llm_api_options", S, at=f"{TS} --extra_llm_api_options (a YAML file)"),
    _o("kv_cache_config.tokens_per_block", K, at=f"{TL} KvCacheConfig.tokens_per_block"),
    _o("kv_cache_config.dtype", K, ("auto", "fp8"), at=f"{TL} KvCacheConfig.dtype"),
    _o("cuda_graph_config", K, (None,), at=f"{TL} TorchLlmArgs.cuda_graph_config (null: no CUDA graphs)"),
    _o("cuda_graph_config.batch_sizes", K, at=f"{TL} CudaGraphConfig.batch_sizes"),
    _o("cuda_graph_config.enable_padding", K, (True, False), at=f"{TL} CudaGraphConfig.enable_padding"),
    _o("enable_attention_dp", K, (True, False), at=f"{TL} BaseLlmArgs.enable_attention_dp"),
    _o("attention_dp_config.enable_balance", K, (True, False), at=f"{TL} AttentionDpConfig.enable_balance"),
)

# ---- serving benchmarks (the workload a serving prediction ran, measured) ---------------------------
VB = "vllm/benchmarks/serve.py add_cli_args"
VD = "vllm/benchmarks/datasets.py"
VLLM_BENCH = _table(
    "vllm-bench", "vLLM bench serve", "commit 009e6d4a",
    f"vllm-project/vllm {VB} and {VD} (add_dataset_parser; RandomDataset draws lengths in [len x (1 - r), "
    "len x (1 + r)]) at commit 009e6d4a",
    _o("--backend", C, ("vllm",), at=f"{VB} --backend"),
    _o("--model", S, at=f"{VB} --model"),
    _o("--dataset-name", C, ("random",), at=f"{VD} --dataset-name"),
    _o("--random-input-len", I, at=f"{VD} --random-input-len"),
    _o("--random-output-len", I, at=f"{VD} --random-output-len"),
    _o("--random-range-ratio", R, at=f"{VD} --random-range-ratio (0: fixed lengths)"),
    _o("--num-prompts", I, at=f"{VB} --num-prompts"),
    _o("--request-rate", N, at=f"{VB} --request-rate (default inf; finite: Poisson arrivals with --burstiness 1)"),
    _o("--max-concurrency", I, at=f"{VB} --max-concurrency"),
    _o("--ignore-eos", F, at=f"{VB} --ignore-eos"),
    _o("--save-result", F, at=f"{VB} --save-result"),
    _o("--result-filename", S, at=f"{VB} --result-filename"),
    _o("--percentile-metrics", S, at=f"{VB} --percentile-metrics"),
    _o("--metric-percentiles", S, at=f"{VB} --metric-percentiles"),
)
SB = "sglang/bench_serving.py"
SGLANG_BENCH = _table(
    "sglang-bench", "SGLang bench_serving", "0.5.3",
    f"sglang 0.5.3 wheel: {SB} (the __main__ argument parser; sample_random_requests draws lengths in "
    "[len x r, len]; EOS is ignored unless --disable-ignore-eos)",
    _o("--backend", C, ("sglang",), at=f"{SB}:2148"),
    _o("--model", S, at=f"{SB}:2187"),
    _o("--dataset-name", C, ("random",), at=f"{SB}:2169"),
    _o("--random-input-len", I, at=f"{SB}:2215"),
    _o("--random-output-len", I, at=f"{SB}:2221"),
    _o("--random-range-ratio", FL, at=f"{SB}:2227 (1: fixed lengths)"),
    _o("--num-prompts", I, at=f"{SB}:2197"),
    _o("--request-rate", N, at=f"{SB}:2250"),
    _o("--max-concurrency", I, at=f"{SB}:2262"),
    _o("--output-file", S, at=f"{SB}:2274"),
)
TB = "tensorrt_llm/serve/scripts/benchmark_serving.py"
TRTLLM_BENCH = _table(
    "trtllm-bench", "TensorRT-LLM benchmark_serving", "1.1 (commit f61d71d9)",
    f"NVIDIA/TensorRT-LLM {TB} (commit f61d71d9; adopted from vLLM's benchmark_serving.py) and "
    "tensorrt_llm/serve/scripts/benchmark_dataset.py (RandomDataset: DEFAULT_RANGE_RATIO 0.0, fixed lengths; "
    "--random-ids skips the ShareGPT download); the invocation of TensorRT-LLM's deployment guides",
    _o("--backend", C, ("openai",), at=f"{TB} --backend"),
    _o("--model", S, at=f"{TB} --model"),
    _o("--dataset-name", C, ("random",), at=f"{TB} --dataset-name"),
    _o("--random-input-len", I, at=f"{TB} --random-input-len"),
    _o("--random-output-len", I, at=f"{TB} --random-output-len"),
    _o("--random-ids", F, at=f"{TB} --random-ids"),
    _o("--num-prompts", I, at=f"{TB} --num-prompts"),
    _o("--request-rate", N, at=f"{TB} --request-rate"),
    _o("--max-concurrency", I, at=f"{TB} --max-concurrency"),
    _o("--ignore-eos", F, at=f"{TB} --ignore-eos"),
    _o("--save-result", F, at=f"{TB} --save-result"),
    _o("--result-filename", S, at=f"{TB} --result-filename"),
    _o("--percentile-metrics", S, at=f"{TB} --percentile-metrics"),
)

# ---- Kubernetes -------------------------------------------------------------------------------------
KUBERNETES = _table(
    "k8s", "Kubernetes", "apps/v1; leaderworkerset.x-k8s.io/v1",
    "Kubernetes API reference (Deployment apps/v1, resource `nvidia.com/gpu` of the NVIDIA device plugin); "
    "kubernetes-sigs/lws api/leaderworkerset/v1 (LeaderWorkerSet: replicas, leaderWorkerTemplate.size)",
    _o("apiVersion", K, ("apps/v1", "leaderworkerset.x-k8s.io/v1")),
    _o("kind", K, ("Deployment", "LeaderWorkerSet")),
    _o("spec.replicas", K),
    _o("spec.leaderWorkerTemplate.size", K),
    _o("resources.limits.nvidia.com/gpu", K),
)

#: every table, by target name
TABLES: dict[str, OptionTable] = {t.target: t for t in (MEGATRON, TORCHTITAN, DEEPSPEED, NEMO, MAXTEXT, TORCHTUNE, PEFT, VLLM, SGLANG, TRTLLM, KUBERNETES,
                                                                  VLLM_BENCH, SGLANG_BENCH, TRTLLM_BENCH)}
