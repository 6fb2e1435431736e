"""The CUDA-graph scope of a training.csv row that cites a Megatron-Bridge performance-summary table.

Rule: a row whose source names NVIDIA-NeMo/Megatron-Bridge and a NeMo container release ("26.08 NeMo
container") runs the graph scope the recipe of that release set for its (model family, system,
precision) (`workloads.training.megatron_bridge_graphs`); a combination the table does not list runs
without graphs, as before. The rows themselves do not record graphs.
"""

from __future__ import annotations

import re

from gpuplan.workloads.training.megatron_bridge_graphs import recipe_graph_scope
from gpuplan.workloads.training.step.cuda_graphs import scope_label

_RELEASE = re.compile(r"(\d\d\.\d\d(?:\.\d\d)?) NeMo container", re.IGNORECASE)


def graph_scope_from_row(row: dict[str, str]) -> tuple[frozenset, str | None]:
    """(scope, note) of a row (module docstring): the recipe's scope and a note saying so, or
    (empty, None) where the row does not cite a listed Megatron-Bridge recipe."""
    source = (row.get("source") or "")
    if "megatron-bridge" not in source.lower():
        return frozenset(), None
    release = _RELEASE.search(source)
    if release is None:
        return frozenset(), None
    found = recipe_graph_scope(release.group(1), row.get("model") or "", (row.get("system") or "").strip(),
                               (row.get("precision") or "").strip())
    if found is None or not found.scope:
        return frozenset(), None
    return found.scope, f"cuda_graph_scope={scope_label(found.scope)} (Megatron-Bridge recipe: {found.source})"


__all__ = ["graph_scope_from_row"]
