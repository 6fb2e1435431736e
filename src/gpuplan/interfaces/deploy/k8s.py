"""Kubernetes: the serving plan as manifests, one per pool: a Deployment (apps/v1) of `replicas`
pods when one instance fits a node, a LeaderWorkerSet (leaderworkerset.x-k8s.io/v1, kubernetes-sigs/lws)
of `replicas` groups of `size` pods when an instance spans nodes. Each pod requests its GPUs as the
extended resource `nvidia.com/gpu` (NVIDIA device plugin) and runs the engine's command
(vllm / sglang / trtllm modules) as its container's command; TensorRT-LLM's extra options file is
a ConfigMap mounted into the pod. A disaggregated plan is one manifest per pool (prefill, decode).

Multi-node instances: the leader runs the engine command; how the workers join (Ray for vLLM,
`--nnodes / --node-rank` for SGLang, MPI for TensorRT-LLM) is each engine's own bootstrap and is
left to the user (the worker template carries the image and the GPU request only).

The image is the engine's documented container repository tagged with the version of its option
table (IMAGES); pin the tag you run.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from gpuplan.interfaces.deploy.launch import ServingLaunch
from gpuplan.interfaces.deploy.options import KUBERNETES

T = KUBERNETES
#: the engines' documented container repositories (vLLM "Using Docker", SGLang install docs, NGC
#: TensorRT-LLM release container), tagged with the option tables' versions
IMAGES = {"vllm": "vllm/vllm-openai:v0.11.0", "sglang": "lmsysorg/sglang:v0.5.3",
          "tensorrt-llm": "nvcr.io/nvidia/tensorrt-llm/release:1.1.0"}
GPU_RESOURCE = "nvidia.com/gpu"
MOUNT = "/etc/gpuplan"


@dataclass(frozen=True)
class Pool:
    """`replicas` instances of `launch` (role: replica, prefill or decode)."""

    role: str
    launch: ServingLaunch
    replicas: int


def _scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v))  # a JSON string is a YAML double-quoted scalar


def to_yaml(obj, indent: int = 0) -> str:
    """Block-style YAML of nested dicts / lists / scalars (keys plain, strings double-quoted)."""
    pad = "  " * indent
    lines = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{k}:")
                lines.append(to_yaml(v, indent + 1))
            else:
                lines.append(f"{pad}{k}: {_scalar(v) if not isinstance(v, (dict, list)) else ('{}' if isinstance(v, dict) else '[]')}")
    else:
        for v in obj:
            if isinstance(v, (dict, list)) and v:
                inner = to_yaml(v, indent + 1).lstrip()
                lines.append(f"{pad}- {inner}")
            else:
                lines.append(f"{pad}- {_scalar(v)}")
    return "\n".join(lines)


def _name(launch: ServingLaunch, role: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", launch.model.name.lower()).strip("-")[:40] or "model"
    return f"{base}-{launch.target.replace('tensorrt-llm', 'trtllm')}-{role}"


def _container(pool: Pool, gpus: int, command: list[str] | None, mounts: bool) -> dict:
    c: dict = {"name": "engine", "image": IMAGES[pool.launch.target]}
    if command:
        c["command"] = command
    c["ports"] = [{"containerPort": 8000 if pool.launch.target != "sglang" else 30000}]
    c["resources"] = {"limits": {GPU_RESOURCE: T.key("resources.limits.nvidia.com/gpu", gpus)}}
    if mounts:
        c["volumeMounts"] = [{"name": "engine-options", "mountPath": MOUNT}]
    return c


def manifests(pools: list[Pool], gpus_per_node: int, command_of) -> str:
    """The YAML documents of `pools` (module docstring); `command_of(launch, extra_file)` gives the
    engine container's command words."""
    docs = []
    for pool in pools:
        launch, name = pool.launch, _name(pool.launch, pool.role)
        extra = launch.target == "tensorrt-llm"
        volumes = []
        if extra:
            from gpuplan.interfaces.deploy.trtllm import EXTRA_FILE, extra_options

            docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-options"},
                         "data": {EXTRA_FILE: json.dumps(extra_options(launch))}})
            volumes = [{"name": "engine-options", "configMap": {"name": f"{name}-options"}}]
        command = command_of(launch, f"{MOUNT}/extra-llm-api-options.yaml")
        labels = {"app": name, "gpuplan/role": pool.role}
        if launch.gpus <= gpus_per_node:
            pod = {"containers": [_container(pool, launch.gpus, command, extra)]}
            if volumes:
                pod["volumes"] = volumes
            docs.append({"apiVersion": T.key("apiVersion", "apps/v1"), "kind": T.key("kind", "Deployment"),
                         "metadata": {"name": name, "labels": labels},
                         "spec": {"replicas": T.key("spec.replicas", pool.replicas), "selector": {"matchLabels": labels},
                                  "template": {"metadata": {"labels": labels}, "spec": pod}}})
            continue
        size = math.ceil(launch.gpus / gpus_per_node)
        leader = {"containers": [_container(pool, gpus_per_node, command, extra)]}
        worker = {"containers": [_container(pool, gpus_per_node, None, extra)]}
        if volumes:
            leader["volumes"] = volumes
            worker["volumes"] = volumes
        docs.append({"apiVersion": T.key("apiVersion", "leaderworkerset.x-k8s.io/v1"),
                     "kind": T.key("kind", "LeaderWorkerSet"), "metadata": {"name": name, "labels": labels},
                     "spec": {"replicas": T.key("spec.replicas", pool.replicas),
                              "leaderWorkerTemplate": {"size": T.key("spec.leaderWorkerTemplate.size", size),
                                                       "leaderTemplate": {"metadata": {"labels": labels}, "spec": leader},
                                                       "workerTemplate": {"metadata": {"labels": labels}, "spec": worker}}}})
    return "".join(f"---\n{to_yaml(d)}\n" for d in docs)


def emit(pools: list[Pool], gpus_per_node: int, command_of, header: str = "") -> str:
    return f"# written for {T.written_for} ({T.source}){header}\n" + manifests(pools, gpus_per_node, command_of)
