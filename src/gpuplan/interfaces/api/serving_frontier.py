"""`serve_frontier`: the throughput-vs-interactivity points of a model on a GPU over tensor parallelism
and closed-loop concurrency (each point is `serve run --concurrency c` on that tp; plan/capacity.frontier)."""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.interfaces.api._common import Result, resolve_model, system_and_gpu
from gpuplan.interfaces.api.serving import DEFAULT_ENGINE, DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN, serving_engine
from gpuplan.specs import Gpu, ModelSpec, System


@dataclass(frozen=True)
class FrontierResult(Result):
    """`serve_frontier`: every simulated (tp, concurrency) point."""

    points: tuple
    plot_file: str | None = None

    def json_data(self) -> dict:
        out: dict = {"points": list(self.points)}
        if self.plot_file is not None:
            out["plot_file"] = self.plot_file
        return out


def serve_frontier(
    model: str | ModelSpec,
    gpu: str | Gpu | None = None,
    *,
    system: str | System | None = None,
    input_len: int = DEFAULT_INPUT_LEN,
    output_len: int = DEFAULT_OUTPUT_LEN,
    weight_dtype: str = "bf16",
    kv_dtype: str | None = None,
    progress=None,
    plot: str | None = None,
    engine: str = DEFAULT_ENGINE,
) -> FrontierResult:
    """Tokens/s per GPU against tokens/s per user over TP and closed-loop concurrency;
    `progress(stage, fraction)` before each tp; `plot`: write them as a figure (.png/.svg/.pdf,
    interfaces.reports.serving_plot). `engine`: as `serve_run` (its defaults run at every point);
    `kv_dtype` None: the engine's choice for `weight_dtype` (EngineProfile.kv_dtype_for)."""
    from gpuplan.workloads.inference.plan.capacity import frontier

    if plot is not None:
        from gpuplan.interfaces.reports.serving_plot import check_plot_file

        check_plot_file(plot)
    profile = serving_engine(engine)
    kv_dtype = profile.kv_dtype_for(weight_dtype, kv_dtype)
    sys_spec, gpu_spec = system_and_gpu(system, gpu)
    spec = resolve_model(model)
    pts = tuple(frontier(spec, gpu_spec, sys_spec, input_len=input_len, output_len=output_len,
                         weight_dtype=weight_dtype, kv_dtype=kv_dtype, progress=progress, engine=profile))
    plot_file = None
    if plot is not None:
        from gpuplan.interfaces.reports.serving_plot import plot_frontier

        plot_file = str(plot_frontier(plot, pts, title=f"gpuplan serve frontier {spec.name} on {gpu_spec.id} "
                                                        f"({input_len} in / {output_len} out tokens)"))
    return FrontierResult(pts, plot_file)


