"""`gpuplan.api` for launch configs (interfaces.deploy, docs/deploy.md): write a plan as the config or
command of a framework or engine (`emit_*`), and read a user's own config back into a prediction
(`train_from`, `serve_run_from`).

- `--emit TARGET` runs the prediction as that target runs: training with the target's framework
  (`train_options_for`: Framework and the plan axes its config can state, `search_limits`), serving
  with the target's engine profile (`serve_engine_for`); the emitted text states every option the
  prediction relied on, so reading it back (`--from`) reproduces the same plan and prediction.
- `--from SOURCE`: a file path or the text itself; the format is recognised from the text
  (`training_format`, `serving_format`). Options gpuplan does not model come back in
  `unmodelled_options`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplan.errors import InputError
from gpuplan.interfaces.api._common import (
    Result,
    positive,
    resolve_model,
    resolve_system,
    system_and_gpu,
    widest_system,
)
from gpuplan.interfaces.deploy import (
    BENCH_TARGETS,
    ENGINE_OF_BENCH,
    ENGINE_OF_TARGET,
    FINETUNE_TARGETS,
    FRAMEWORK_OF_TARGET,
    SERVING_TARGETS,
    TRAINING_TARGETS,
    serving_module,
    training_module,
)
from gpuplan.interfaces.deploy.launch import ServingLaunch, TrainingLaunch, model_id


def check_target(target: str, allowed: tuple[str, ...], option: str = "emit") -> str:
    """`target` lower-cased if allowed, else InputError naming `--emit` and the allowed targets."""
    key = str(target).strip().lower()
    if key not in allowed:
        names = ", ".join(allowed)
        raise InputError(f"--{option}: unknown target '{target}'; allowed: {names}", field=option, allowed=names)
    return key


def training_targets() -> tuple[str, ...]:
    return TRAINING_TARGETS + tuple(FINETUNE_TARGETS)


# ---- training ---------------------------------------------------------------------------------------
def train_options_for(target: str, framework: str | None) -> dict:
    """The `train` keywords an emit target implies: its framework (a different --framework is an
    error) and the search limits of the plans its config can state."""
    target = check_target(target, training_targets())
    fw = FRAMEWORK_OF_TARGET.get(target)
    if framework is not None:
        from gpuplan.interfaces.api._common import parse_enum
        from gpuplan.specs.execution import Framework

        framework = parse_enum(Framework, framework, "framework").value
    if framework is not None and fw is not None and str(framework).lower() != fw:
        raise InputError(f"--framework: {framework} runs differently from --emit {target}'s {fw}; give --framework {fw} "
                         "or leave it out", field="framework", allowed=fw)
    limits = getattr(training_module(target), "SEARCH_LIMITS", None)
    return {"framework": fw or framework or "megatron", "search_limits": limits}


def _training_launch(target: str, model, plan, gpus: int, steps: int | None) -> TrainingLaunch:
    return TrainingLaunch(target, resolve_model(model), plan, gpus, steps)


def _emit_training(launch: TrainingLaunch, system, header: str) -> str:
    module = training_module(launch.target)
    if launch.plan.fine_tuning.adapters and launch.target not in FINETUNE_TARGETS:
        names = ", ".join(FINETUNE_TARGETS)
        raise InputError(f"--emit {launch.target}: its config states no LoRA / QLoRA adapters; for --finetune "
                         f"{launch.plan.fine_tuning.method.value} give --emit {names.replace(', ', ' or ')}",
                         field="emit", allowed=names)
    if launch.target in ("megatron", "nemo"):
        text = module.emit(launch, resolve_system(system).gpus_per_node, header)
    elif launch.target == "deepspeed":
        return module.emit(launch)  # JSON: no comments
    else:
        text = module.emit(launch, header)
    first, _, rest = text.partition("\n")
    return first + "\n" + measure_comment(launch, resolve_system(system).id) + rest


#: training target -> the `calibrate import` KIND reading its log, and the lines it keeps
LOG_LINES = {
    "megatron": ("megatron", "'iteration N/M | ... | elapsed time per iteration (ms): ..' (and, with --log-throughput, "
                 "'throughput per GPU (TFLOP/s/GPU)'); '[Rank N] ... memory (MB)'"),
    "nemo": ("nemo", "'Training epoch E, iteration N/M | ... | train_step_timing in s: ..'"),
    "torchtitan": ("torchtitan", "'step: N  loss: ..  memory: ..GiB(..%)  tps: ..  tflops: ..  mfu: ..%'"),
    "maxtext": ("maxtext", "'completed step: N, seconds: .., TFLOP/s/device: .., Tokens/s/device: ..'"),
}


def measure_comment(launch: TrainingLaunch, system_name: str) -> str:
    """Comment lines after a training config's header: the log lines to keep and the `calibrate import`
    command (with the run's columns as --set) that turns them into rows (docs/deploy.md, the loop)."""
    if launch.target not in LOG_LINES:
        return ""
    kind, lines = LOG_LINES[launch.target]
    m, p = launch.model, launch.plan
    cols = {"model": m.name, "layers": m.layers, "hidden": m.hidden, "heads": m.heads, "kv_heads": m.kv_heads,
            "ffn": m.ffn, "ffn_kind": m.ffn_kind.value, "vocab": m.vocab, "seq_len": p.seq_len, "system": system_name,
            "num_gpus": launch.gpus, "tp": p.tp, "pp": p.pp, "dp": p.dp, "cp": p.cp, "micro_batch": p.micro_batch,
            "global_batch": p.global_batch or p.micro_batch * p.dp, "recompute": p.recompute.value,
            "sharding": p.sharding.value, "precision": getattr(p.precision, "value", p.precision)}
    sets = " ".join(f"--set {k}={v}" for k, v in cols.items())
    return (f"# measure: keep rank 0's log (| tee train.log); `gpuplan calibrate import {kind}` reads its {lines} lines:\n"
            f"#   gpuplan calibrate import {kind} train.log {sets} --out measured.csv\n")


def emit_train(result, target: str, system) -> str:
    """`train ... --emit TARGET`: the best plan of a TrainResult as TARGET's launch config."""
    target = check_target(target, training_targets())
    est = result.estimate
    launch = _training_launch(target, result.model_spec, est.plan, est.num_gpus, est.steps)
    header = f"; gpuplan train {est.model}: {est.num_gpus} GPUs of {est.system}, step {est.step.step_time_s:.4g} s"
    return _emit_training(launch, system, header)


def emit_fit(result, target: str, system) -> str:
    """`fit train ... --emit TARGET`: the fitted plan (no run length: the config trains to its default)."""
    target = check_target(target, training_targets())
    launch = _training_launch(target, result.model, result.plan, result.plan.num_gpus, None)
    return _emit_training(launch, system if system is not None else widest_system(result.gpu), f"; gpuplan fit train {result.model.name}")


def written_for(target: str) -> str:
    """'<program> <version>' of a target's option table (the line `--emit` prints on stderr)."""
    from gpuplan.interfaces.deploy.options import TABLES

    table = TABLES.get(target)
    return f"{table.written_for} ({table.source})" if table is not None else target


# ---- reading configs back ---------------------------------------------------------------------------
def source_text(source: str) -> str:
    """The text of `--from`: a file's contents when `source` names a file, else `source` itself."""
    if not isinstance(source, str) or not source.strip():
        raise InputError("from: give a launch command, a config, or a path to one", field="from")
    if "\n" not in source and len(source) < 4096:
        from gpuplan.input_files import path_kind, read_input_bytes

        try:
            path = Path(source).expanduser()
        except (ValueError, RuntimeError):  # not a path here (NUL, ~unknown-user): the text itself
            path = None
        # a file or a pipe (`--from <(...)`) is read, bounded (gpuplan.input_files); a name too long to be a
        # path, or nothing there, is the text itself
        if path is not None and path_kind(path) in ("file", "pipe"):
            return read_input_bytes(path, "from", max_bytes=1_000_000, what="launch config").decode("utf-8",
                                                                                                  errors="replace")
    return source


def training_format(text: str) -> str:
    """megatron (a pretrain_gpt.py command), nemo (`nemo llm pretrain`), maxtext (MaxText's train module),
    torchtitan (a TOML with [parallelism]/[training]) or deepspeed (JSON)."""
    stripped = text.lstrip()
    if "pretrain_gpt" in text:
        return "megatron"
    if re.search(r"\bnemo\s+llm\s+pretrain\b", text):
        return "nemo"
    if re.search(r"(pre_train\.train|MaxText\.train|[Mm]ax[Tt]ext/train\.py)\b", text):
        return "maxtext"
    if "LoraConfig(" in text:
        return "peft"
    if re.search(r"_component_:\s*torchtune\.models\.", text):
        return "torchtune"
    if stripped.startswith("{"):
        return "deepspeed"
    if "[training]" in text or "[parallelism]" in text or "[model]" in text:
        return "torchtitan"
    raise InputError("from: not a Megatron-LM command line (pretrain_gpt.py), a `nemo llm pretrain` command, a MaxText "
                     "train command, a torchtitan TOML, a DeepSpeed JSON, a torchtune recipe config or a PEFT / TRL script",
                     field="from",
                     allowed="megatron, nemo, maxtext, torchtitan, deepspeed, torchtune, peft")


def read_training(source: str, *, model=None, gpus: int | None = None, seq_len: int | None = None) -> TrainingLaunch:
    """The TrainingLaunch a training config states (DeepSpeed needs `model` and `gpus`; `seq_len`
    defaults to the model's training default there)."""
    from gpuplan.interfaces.deploy import deepspeed, megatron, nemo, torchtitan

    text = source_text(source)
    fmt = training_format(text)
    if fmt == "megatron":
        return megatron.read(text, resolve_model(model) if model is not None else None)
    if fmt == "nemo":
        return nemo.read(text, resolve_model(model) if model is not None else None)
    if fmt in ("maxtext", "torchtune", "peft"):
        return training_module(fmt).read(text, resolve_model(model) if model is not None else None, gpus)
    if fmt == "torchtitan":
        return torchtitan.read(text, resolve_model(model) if model is not None else None, gpus)
    if model is None or gpus is None:
        raise InputError("from: a DeepSpeed JSON states no model or GPU count; give the model and --gpus", field="gpus")
    positive(gpus, "gpus")
    spec = resolve_model(model)
    if seq_len is None:
        from gpuplan.interfaces.planning.defaults import training_defaults

        seq_len = training_defaults(spec, None, None)[0]
    return deepspeed.read(text, spec, gpus, seq_len)


def rescaled(launch: TrainingLaunch, gpus: int) -> TrainingLaunch:
    """`launch` on `gpus` GPUs: the same tp x pp x cp model-parallel group, data parallelism
    dp = gpus / (tp x pp x cp), the same global batch (it must stay a multiple of micro-batch x dp)."""
    from dataclasses import replace

    p = launch.plan
    group = p.tp * p.pp * p.cp
    positive(gpus, "gpus")
    if gpus % group:
        raise InputError(f"gpus: {gpus} is not a multiple of the config's tp x pp x cp = {group}", field="gpus")
    dp = gpus // group
    gb = p.global_batch or p.micro_batch * p.dp
    if gb % (p.micro_batch * dp):
        raise InputError(f"gpus: the config's global batch {gb} is not a multiple of micro-batch {p.micro_batch} x dp {dp} "
                         f"on {gpus} GPUs", field="gpus")
    return replace(launch, plan=p.model_copy(update={"dp": dp, "global_batch": gb}), gpus=gpus)


@dataclass(frozen=True)
class TrainFromResult(Result):
    """`train --from`: the prediction of the launch a config states (`train`), what it was read as,
    and the options gpuplan does not model."""

    train: Any  # interfaces.api.training.TrainResult
    launch: TrainingLaunch

    def json_data(self) -> dict:
        return {**self.train.json_data(), "read_from": self.launch.target,
                "unmodelled_options": list(self.launch.unmodelled)}


def train_from(source: str, system, *, model=None, gpus: int | None = None, seq_len: int | None = None,
               tokens=None, **train_kw) -> TrainFromResult:
    """Predict the training run a Megatron-LM command, torchtitan TOML or DeepSpeed JSON states, on `system`;
    `gpus` other than the config's: the same model-parallel layout and batch on that many GPUs (`rescaled`).
    Run length: the config's steps (steps x global batch x sequence), else `tokens` (train's default)."""
    from gpuplan.interfaces.api.training import train

    launch = read_training(source, model=model, gpus=gpus, seq_len=seq_len)
    if gpus is not None and launch.gpus != gpus:
        launch = rescaled(launch, gpus)
    if tokens is None and train_kw.get("flops") is None and launch.steps is not None:
        tokens = float(launch.steps * (launch.plan.global_batch or launch.plan.dp * launch.plan.micro_batch)
                       * launch.plan.seq_len)
    result = train(launch.model, system, launch.gpus, tokens=tokens, plan=launch.plan, precision=launch.plan.precision,
                   framework=launch.plan.framework, tp_comm_overlap=launch.plan.tp_comm_overlap, **train_kw)
    return TrainFromResult(result, launch)


# ---- serving ----------------------------------------------------------------------------------------
def serve_engine_for(target: str, engine: str | None) -> str:
    """The engine profile `serve ... --emit TARGET` runs: the target's (a different --engine is an
    error); k8s runs the --engine given, which must be one of the engine targets'."""
    target = check_target(target, SERVING_TARGETS)
    if target in BENCH_TARGETS:
        wanted = ENGINE_OF_BENCH[target]
        if engine is not None and engine not in (wanted, "generic"):
            raise InputError(f"--engine: --emit {target} measures {wanted}; give --engine {wanted} or leave it out",
                             field="engine", allowed=wanted)
        return wanted
    if target == "k8s":
        allowed = ", ".join(ENGINE_OF_TARGET.values())
        if engine not in ENGINE_OF_TARGET.values():
            raise InputError(f"--engine: --emit k8s runs an engine's container; give --engine {allowed.replace(', ', '|')}",
                             field="engine", allowed=allowed)
        return engine
    wanted = ENGINE_OF_TARGET[target]
    if engine is not None and engine not in (wanted, "generic"):
        raise InputError(f"--engine: --emit {target} states {wanted}'s options; give --engine {wanted} or leave it out",
                         field="engine", allowed=wanted)
    return wanted


def _target_of_engine(engine_name: str) -> str:
    return next(t for t, e in ENGINE_OF_TARGET.items() if e == engine_name)


def _serving_launch(engine_target: str, model, profile, tp, pp, ep, adp, weight_dtype, kv_dtype,
                    attention_dp_balance: bool = False) -> ServingLaunch:
    return ServingLaunch(ENGINE_OF_TARGET[engine_target], model, model_id(model), profile, tp=tp, pp=pp, ep=ep,
                         attention_dp=adp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                         attention_dp_balance=attention_dp_balance)


def _command_of(launch: ServingLaunch, extra_file: str) -> list[str]:
    target = _target_of_engine(launch.target)
    module = serving_module(target)
    return module.command_words(launch, extra_file) if target == "trtllm" else module.command_words(launch)


def emit_serve(result, target: str, system=None) -> str:
    """`serve run|plan ... --emit TARGET`: one instance's engine command, or (k8s) the manifests of
    every pool with its replica count; `system`: the node the run used (--system; default each GPU's
    widest catalog system, the serving commands' rule), whose GPUs per node size the pods."""
    from gpuplan.interfaces.deploy import k8s

    target = check_target(target, SERVING_TARGETS)
    pools = _pools(result, resolve_system(system) if system is not None else None)
    engine_target = _target_of_engine(result.profile.name)
    if target == "k8s":
        node = pools[0][3]
        kpools = [k8s.Pool(role, launch, replicas) for role, launch, replicas, *_ in pools]
        return k8s.emit(kpools, node.gpus_per_node, _command_of, f"; gpuplan {pools[0][4]}")
    if len(pools) > 1:
        raise InputError(f"--emit {target}: a disaggregated plan is one command per pool; give --emit k8s for its "
                         "manifests", field="emit", allowed="k8s")
    _, launch, replicas, node, what = pools[0]
    if target in BENCH_TARGETS:
        from gpuplan.interfaces.deploy import bench

        # the system the replica runs in (its node: NVLink or PCIe TP all-reduce), as calibrate's rows name it
        return bench.emit(target, _workload(result, replicas), launch, node.id, f"; gpuplan {what}")
    header = f"; gpuplan {what}" + (f"; {replicas} replicas of this command" if replicas > 1 else "")
    return serving_module(engine_target).emit(launch, header)


def _workload(result, replicas: int):
    """The load and lengths one replica of a serve result ran (interfaces.deploy.bench.Workload)."""
    from gpuplan.interfaces.api.serving import CapacityResult
    from gpuplan.interfaces.deploy import bench

    if isinstance(result, CapacityResult):
        w = result.workload or {}
        if result.features or not w:
            raise InputError("emit: the benchmarks' random datasets draw fixed lengths; this plan runs other lengths, "
                             "speculation or a prefix cache", field="emit")
        return bench.workload(w["rate"] / replicas, None, w["input_len"], w["output_len"])
    r = result.report
    fixed = f"input_dist=fixed:{r.input_len}, output_dist=fixed:{r.output_len}"
    if (r.lengths and r.lengths != fixed) or r.spec_tokens or r.prefix_hit_rate:
        raise InputError("emit: the benchmarks' random datasets draw fixed lengths with no speculation or prefix "
                         "cache; this prediction runs " + (r.lengths or "other features"), field="emit")
    concurrency = None
    if result.offered_rate is None:
        words = str(r.load).split()
        if words[:2] != ["closed", "loop"]:
            raise InputError(f"emit: the benchmarks measure a rate or a concurrency, not {r.load}", field="emit",
                             allowed="rate, concurrency")
        concurrency = int(words[2])
    return bench.workload(result.offered_rate, concurrency, r.input_len, r.output_len)


def _pools(result, node_given=None) -> list[tuple]:
    """(role, ServingLaunch, replicas, System, description) of each pool of a serve result."""
    from gpuplan.interfaces.api._common import resolve_gpu
    from gpuplan.interfaces.api.serving import (
        CapacityResult,
        DisaggregatedPlanResult,
        ServeResult,
    )

    target = _target_of_engine(result.profile.name) if result.profile.name in ENGINE_OF_TARGET.values() else None
    if target is None:
        raise InputError(f"--engine: the prediction ran engine '{result.profile.name}', which no launch target states; "
                         f"give --engine {'|'.join(ENGINE_OF_TARGET.values())}", field="engine")
    spec = result.model_spec
    if isinstance(result, ServeResult):
        r = result.report
        node = node_given or widest_system(resolve_gpu(r.gpu))
        launch = _serving_launch(target, spec, result.profile, r.tp, r.pp, r.ep, r.attention_dp, r.weight_dtype, r.kv_dtype,
                                 r.attention_dp_balance)
        return [("replica", launch, 1, node, f"serve run {r.model} on {r.tp * r.pp} x {r.gpu}")]
    if isinstance(result, CapacityResult):
        b = result.plan.best
        node = node_given or widest_system(resolve_gpu(b.gpu))
        launch = _serving_launch(target, spec, result.profile, b.tp, 1, b.ep, b.attention_dp, result.weight_dtype,
                                 result.kv_dtype)
        return [("replica", launch, b.replicas, node, f"serve plan {spec.name}: {b.replicas} x {b.layout}")]
    if isinstance(result, DisaggregatedPlanResult):
        out = []
        for pool in result.plan.best.pools:
            node = node_given or widest_system(resolve_gpu(pool.gpu))
            launch = _serving_launch(target, spec, result.profile, pool.tp, 1, pool.ep, pool.attention_dp,
                                     result.weight_dtype, result.kv_dtype)
            out.append((pool.role, launch, pool.instances, node, f"serve plan {spec.name}: {result.plan.best.layout}"))
        return out
    raise InputError("emit: not a serving result", field="emit")


def serving_format(text: str) -> str:
    """The engine target of a serving command: vllm, sglang or trtllm."""
    if "trtllm-serve" in text:
        return "trtllm"
    if "sglang.launch_server" in text or "sglang/launch_server" in text:
        return "sglang"
    if "vllm" in text:
        return "vllm"
    raise InputError("from: not a `vllm serve`, `python -m sglang.launch_server` or `trtllm-serve` command",
                     field="from", allowed="vllm, sglang, trtllm")


def read_serving(source: str, *, weight_dtype: str | None = None) -> ServingLaunch:
    """The ServingLaunch an engine command states (`weight_dtype`: TensorRT-LLM's checkpoint format,
    which its command does not state)."""
    text = source_text(source)
    target = serving_format(text)
    module = serving_module(target)
    return module.read(text, weight_dtype) if target == "trtllm" else module.read(text)


@dataclass(frozen=True)
class ServeFromResult(Result):
    """`serve run --from`: the prediction of the instance an engine command states."""

    serve: Any  # interfaces.api.serving.ServeResult
    launch: ServingLaunch

    def json_data(self) -> dict:
        return {**self.serve.json_data(), "read_from": _target_of_engine(self.launch.target),
                "unmodelled_options": list(self.launch.unmodelled)}


def serve_run_from(source: str, gpu=None, *, system=None, weight_dtype: str | None = None, **load_kw) -> ServeFromResult:
    """Predict `serve run` for the instance an engine command states, on `gpu` (or `system`); `load_kw`:
    serve_run's load and length options (rate, concurrency, input_len, ...)."""
    from gpuplan.interfaces.api.serving import serve_run

    launch = read_serving(source, weight_dtype=weight_dtype)
    system_and_gpu(system, gpu, replica_gpus=launch.gpus)  # the same hardware rule, checked before the run
    result = serve_run(launch.model, gpu, system=system, tp=launch.tp, pp=launch.pp, ep=launch.ep,
                       attention_dp=launch.attention_dp, weight_dtype=launch.weight_dtype, kv_dtype=launch.kv_dtype,
                       engine=launch.engine, attention_dp_balance=launch.attention_dp_balance, **load_kw)
    return ServeFromResult(result, launch)


def emit_plan_training(target: str, *, model, system, gpus: int, tokens=None, seq_len=None, global_batch=None,
                       framework: str | None = None, optimizer_impl: str | None = None, **kw) -> str:
    """`plan --goal train ... --emit TARGET`: the training plan of the GPU count `plan` chose, as
    `train` evaluates it (the same search, so the same best plan). `framework` must be the target's
    (train_options_for); `optimizer_impl` is `train`'s fine-tuning field of that name; `kw` (compile,
    deepspeed_release) go to `train` as they are."""
    from gpuplan.interfaces.api.training import train

    opts = train_options_for(target, framework)
    if optimizer_impl is not None:
        kw["fine_tuning"] = {"optimizer_impl": optimizer_impl}
    result = train(model, system, gpus, tokens=tokens, seq_len=seq_len, global_batch=global_batch, **opts, **kw)
    return emit_train(result, target, system)


__all__ = [
    "emit_fit",
    "emit_plan_training",
    "emit_serve",
    "emit_train",
    "read_serving",
    "read_training",
    "serve_engine_for",
    "serve_run_from",
    "train_from",
    "train_options_for",
    "written_for",
]
