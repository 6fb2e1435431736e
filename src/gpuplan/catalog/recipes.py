"""Published pre-training recipes (catalog/data/recipes.toml): the sequence length and global batch a
bundled model was trained with, with the source of each. `training_recipe(name)` is None for a model
without one (then the plan search's own defaults apply: workloads.training.plan_search)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from gpuplan.catalog import DATA_DIR
from gpuplan.validation_rules import load_toml_text


@dataclass(frozen=True)
class TrainingRecipe:
    model: str
    seq_len: int
    global_batch: int | None  # sequences per optimizer step; None where the source does not state it
    source: str

    def note(self) -> str:
        batch = f", global batch {self.global_batch:,} sequences" if self.global_batch else ""
        return f"published recipe of {self.model}: sequence length {self.seq_len:,}{batch} ({self.source})"


@lru_cache(maxsize=1)
def recipes() -> dict[str, TrainingRecipe]:
    raw = load_toml_text((DATA_DIR / "recipes.toml").read_text(encoding="utf-8"), "recipes.toml", "recipe")
    return {k: TrainingRecipe(k, int(r["seq_len"]), r.get("global_batch"), r["source"])
            for k, r in raw.get("recipe", {}).items()}


def training_recipe(model_name: str) -> TrainingRecipe | None:
    """The recipe of a bundled model id (case-insensitive), else None."""
    return recipes().get(model_name.strip().lower())


__all__ = ["TrainingRecipe", "recipes", "training_recipe"]
