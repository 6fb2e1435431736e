"""`gpuplan.api` for the emitted launch configs as values (the web pages' downloads; docs/deploy.md):
`train_config`, `serve_run_config`, `serve_plan_config` take the keywords of `train`, `serve_run`,
`serve_plan` plus `target`, run the prediction as `--emit TARGET` does (interfaces.api.deploy:
the target's framework or engine) and answer a LaunchConfig: the text `gpuplan ... --emit TARGET`
prints, with a file name. Their signatures are the base function's plus `target`, so the HTTP API's
endpoint table (web/endpoints.py) reads the same fields off them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuplan.interfaces.api._common import Result

#: the file a target's text is saved as (its format's usual extension)
FILE_NAMES = {
    "megatron": "pretrain_gpt.sh", "nemo": "nemo_pretrain.sh", "torchtitan": "torchtitan.toml",
    "deepspeed": "ds_config.json", "maxtext": "maxtext_train.sh", "torchtune": "torchtune_lora.yaml", "peft": "sft.py",
    "vllm": "vllm_serve.sh", "sglang": "sglang_serve.sh", "trtllm": "trtllm_serve.sh", "k8s": "k8s.yaml",
    "vllm-bench": "vllm_bench.sh", "sglang-bench": "sglang_bench.sh", "trtllm-bench": "trtllm_bench.sh",
}
#: base parameters not offered with `target` (Python-only, or fixed by the target)
_HIDDEN = frozenset({"progress", "plan", "search_limits", "plot"})


@dataclass(frozen=True)
class LaunchConfig(Result):
    """One emitted config: `text` is what `--emit target` prints; `written_for` the program and version."""

    target: str
    text: str
    written_for: str

    def json_data(self) -> dict:
        return {"target": self.target, "filename": FILE_NAMES.get(self.target, f"{self.target}.txt"),
                "written_for": self.written_for, "text": self.text}


def _with_target(base: Callable, emit: Callable[[str, dict], str], name: str, doc: str) -> Callable:
    """A function with `base`'s parameters plus a keyword `target` that answers LaunchConfig(emit(target, kwargs))."""
    from gpuplan.interfaces.api.deploy import written_for

    sig = inspect.signature(base)
    params = [p for p in sig.parameters.values() if p.name not in _HIDDEN and p.kind is not p.VAR_KEYWORD]
    full = sig.replace(parameters=[*params, inspect.Parameter("target", inspect.Parameter.KEYWORD_ONLY, annotation="str")],
                       return_annotation="LaunchConfig")

    def fn(*args: Any, **kwargs: Any) -> LaunchConfig:
        bound = full.bind(*args, **kwargs)
        bound.apply_defaults()
        kw = dict(bound.arguments)
        target = str(kw.pop("target")).strip().lower()
        return LaunchConfig(target, emit(target, kw), written_for(target))

    fn.__signature__ = full  # type: ignore[attr-defined]
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _train_text(target: str, kw: dict) -> str:
    from gpuplan.interfaces.api.deploy import emit_train, train_options_for
    from gpuplan.interfaces.api.training import train

    framework = kw.pop("framework", None)
    opts = train_options_for(target, framework if framework not in (None, "megatron") else None)
    return emit_train(train(**kw, **opts), target, kw.get("system"))


def _serve_text(base_name: str) -> Callable[[str, dict], str]:
    def text(target: str, kw: dict) -> str:
        from gpuplan.interfaces.api import serving
        from gpuplan.interfaces.api.deploy import emit_serve, serve_engine_for

        engine = kw.pop("engine", None)
        kw["engine"] = serve_engine_for(target, engine if engine not in (None, "generic") else None)
        return emit_serve(getattr(serving, base_name)(**kw), target, kw.get("system"))

    return text


def _build() -> tuple[Callable, Callable, Callable]:
    from gpuplan.interfaces.api.serving import serve_plan, serve_run
    from gpuplan.interfaces.api.training import train

    return (
        _with_target(train, _train_text, "train_config",
                     "`gpuplan train ... --emit TARGET` as a value: train's keywords plus `target` (megatron, nemo, "
                     "torchtitan, deepspeed, maxtext; torchtune / peft with fine_tuning)."),
        _with_target(serve_run, _serve_text("serve_run"), "serve_run_config",
                     "`gpuplan serve run ... --emit TARGET` as a value: serve_run's keywords plus `target` (vllm, "
                     "sglang, trtllm, k8s, vllm-bench, sglang-bench, trtllm-bench)."),
        _with_target(serve_plan, _serve_text("serve_plan"), "serve_plan_config",
                     "`gpuplan serve plan ... --emit TARGET` as a value: serve_plan's keywords plus `target`."),
    )


train_config, serve_run_config, serve_plan_config = _build()

__all__ = ["LaunchConfig", "serve_plan_config", "serve_run_config", "train_config"]
