"""Shared base for catalog-backed specs: strict (unknown keys rejected), frozen, and sourced."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from gpuplan.validation_rules import INT64_MAX


class Spec(BaseModel):
    """Strict frozen pydantic model: unknown or missing keys are errors that name the field.

    Numbers at the boundary (gpuplan.validation_rules): NaN and +-inf are rejected in every float
    field (`allow_inf_nan=False`; pydantic's `gt=0` alone accepts inf), and every integer field
    must fit in int64 (numpy arrays downstream are int64)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    @field_validator("*", mode="after")
    @classmethod
    def _ints_within_int64(cls, value):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT64_MAX:
            raise ValueError("must be an integer within int64 (|x| <= 2^63-1)")
        return value


class SourcedSpec(Spec):
    """A catalog entry whose every figure carries a source.

    `sources` maps a field name to its source (URL, or document + table); the key `default`
    covers every figure without its own entry. Validation rejects an entry where a non-null
    figure (numeric field, or `peak_tflops`) has neither.
    """

    sources: dict[str, str]
    notes: str = ""

    # Fields that are identifiers or prose, not figures needing a source.
    _unsourced_fields: frozenset[str] = frozenset({"id", "name", "vendor", "notes", "sources", "kind"})

    @model_validator(mode="after")
    def _every_figure_has_a_source(self):
        stray = sorted(set(self.sources) - set(type(self).model_fields) - {"default"})
        if stray:
            raise ValueError(f"sources names no field of this entry: {', '.join(stray)} (keys are field names or `default`)")
        if "default" in self.sources:
            return self
        missing = [
            name
            for name, value in self
            if name not in self._unsourced_fields
            and value is not None
            and not isinstance(value, str)
            and not isinstance(value, bool)
            and name not in self.sources
        ]
        if missing:
            raise ValueError(f"figures without a source: {', '.join(missing)} (add them to `sources` or give `default`)")
        return self
