"""Hugging Face repo ids: the one rule that turns what a user, an adapter config or a launch command
says (`meta-llama/Llama-2-7b-hf`, `meta-llama--Llama-2-7b-hf`, `https://huggingface.co/meta-llama/Llama-2-7b-hf`)
into one key, and a model into the repo id it came from.

- `hub_key(text)`: the lower-case `org/name` a text names, or None when it is not shaped like a repo
  id. The Hub's repo ids are `org/name` with letters, digits, `-`, `_` and `.` (huggingface_hub
  `validate_repo_id`: at most 96 characters, one `/`); the Hub compares them without case. A cache
  folder name spells the `/` as `--` (huggingface_hub `repo_folder_name`: `models--org--name`), which
  is also how the bundled config files are named (`catalog/data/models/meta-llama--Llama-2-7b-hf.json`).
- `hub_id_of_source(source)` / `hub_id(model)`: the repo id in a model's source URL
  (`https://huggingface.co/org/name`), None without one.

Lookups against the bundled models (which bundled model a repo id names) are in `models.bundled`
(`bundled_name_for_hub_id`); the deploy emitters and readers (interfaces.deploy) and PEFT adapter
configs (`models.adapter_config`, `base_model_name_or_path`) use these two and nothing else.
"""

from __future__ import annotations

import re

from gpuplan.specs.model import ModelSpec

_HUB_URL = re.compile(r"https://huggingface\.co/([\w.-]+/[\w.-]+)")
_REPO_ID = re.compile(r"[\w.-]{1,96}/[\w.-]{1,96}")
_URL_PREFIXES = ("https://huggingface.co/", "http://huggingface.co/", "hf://", "huggingface.co/")


def hub_key(text: str) -> str | None:
    """The lower-case `org/name` of a repo id, a `org--name` folder name (optionally `models--`
    prefixed) or a huggingface.co URL (a `/tree/<rev>` tail dropped); None for anything else."""
    key = str(text or "").strip()
    for prefix in _URL_PREFIXES:
        if key.lower().startswith(prefix):
            key = key[len(prefix):]
            break
    key = key.split("/tree/", 1)[0].split("/resolve/", 1)[0].strip("/")
    if key.lower().startswith("models--"):
        key = key[len("models--"):]
    if "/" not in key and "--" in key:
        key = key.replace("--", "/", 1)
    return key.lower() if _REPO_ID.fullmatch(key) else None


def hub_id_of_source(source: str | None) -> str | None:
    """The repo id (as spelled in the URL) of a huggingface.co URL in `source`, None without one."""
    m = _HUB_URL.search(source or "")
    return m.group(1) if m else None


def hub_id(model: ModelSpec) -> str | None:
    """The Hugging Face repo id a model came from (its source URL), None when it has none."""
    return hub_id_of_source(model.source)


__all__ = ["hub_id", "hub_id_of_source", "hub_key"]
