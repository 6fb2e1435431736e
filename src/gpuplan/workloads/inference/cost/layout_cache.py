"""Remembering a knob-free function of a serving deployment per the fields it reads.

Validation and `--cv` build one replica per row and knob state, mostly of the same few layouts, and
parts of that build depend only on the model, the parallel layout and the number formats, never on
a knob (gpuplan.knobs) or on the GPU: the weight bytes of each pipeline stage
(weights.stage_weights), the KV bytes of each stage (memory.kv_layout), the per-GPU GEMM shapes
(operators.dense_linear_ops). `LayoutCache(key_of, compute)` answers `compute(dep)` once per
`key_of(dep)`, which must name every field of the deployment `compute` reads (directly or through
its properties); `compute` must read no knob, since a remembered answer skips the reads that the
validation memo (interfaces.validation.row_memo) records. Tests check both for every cache: the
answer equals a fresh computation after the cache was filled by a deployment differing only outside
the key, and `knobs.recording_reads` sees nothing during `compute`.

Answers are returned as remembered (the caller must not mutate them: tuples and frozen dataclasses).
Memory is bounded: at most `max_entries` keys, the first remembered dropped first.
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

T = TypeVar("T")

#: keys remembered per cache by default
MAX_ENTRIES = 4096


class LayoutCache(Generic[T]):
    """`compute(dep)` remembered per `key_of(dep)` (module docstring)."""

    def __init__(self, key_of: Callable[[object], tuple], compute: Callable[[object], T], max_entries: int = MAX_ENTRIES):
        self.key_of, self.compute, self.max_entries = key_of, compute, max_entries
        self._answers: dict[tuple, T] = {}

    def __call__(self, dep) -> T:
        key = self.key_of(dep)
        hit = self._answers.get(key)
        if hit is None:
            hit = self.compute(dep)
            if len(self._answers) >= self.max_entries:
                del self._answers[next(iter(self._answers))]
            self._answers[key] = hit
        return hit

    def __len__(self) -> int:
        return len(self._answers)

    def clear(self) -> None:
        self._answers.clear()


__all__ = ["LayoutCache", "MAX_ENTRIES"]
