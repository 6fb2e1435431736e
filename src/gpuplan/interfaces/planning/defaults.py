"""Defaults of a training question that the options leave out: the model's published recipe where the
catalog has one (catalog.recipes), else the plan search's own rules (workloads.training.plan_search)."""

from __future__ import annotations

from gpuplan.specs import ModelSpec


def training_defaults(model: ModelSpec, seq_len: int | None, global_batch: int | None) -> tuple[int, int | None, str | None]:
    """(seq_len, global_batch, note) of a training question whose options leave them out: the model's
    published recipe where the catalog has one (catalog.recipes: e.g. Llama 3.1 405B at 8,192 tokens
    and 2,048 sequences), else `default_seq_len` and each plan's own default batch (None). The note
    says which recipe supplied what (None when nothing came from a recipe)."""
    from gpuplan.catalog.recipes import training_recipe
    from gpuplan.workloads.training.plan_search import default_seq_len

    recipe = training_recipe(model.name)
    used = []
    if seq_len is None:
        if recipe is not None:
            seq_len = recipe.seq_len
            used.append(f"sequence length {seq_len:,}")
        else:
            seq_len = default_seq_len(model)
    if global_batch is None and recipe is not None and recipe.global_batch and seq_len == recipe.seq_len:
        global_batch = recipe.global_batch
        used.append(f"global batch {global_batch:,} sequences ({global_batch * seq_len / 1e6:.2f}M tokens)")
    note = f"{' and '.join(used)} from the published recipe of {recipe.model} ({recipe.source})" if used else None
    return seq_len, global_batch, note
