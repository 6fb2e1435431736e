"""primitives.nccl_memory: NCCL connection-buffer memory per GPU, one figure for training and serving
memory, from NCCL's buffer sizes (src/init.cc, src/include/device.h, NCCL 2.30.7) and the collective
model's channel count."""

from __future__ import annotations

import pytest

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.primitives.nccl_memory import CONNECTION_BUFFER_BYTES, nccl_buffer_bytes, ring_channels
from gpuplan.specs import TrainPlan
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.memory import memory_plan
from gpuplan.workloads.training.memory import training_memory

# one connection, every protocol (init.cc DEFAULT_*_BUFFSIZE): LL 8 lines x 512 threads x 8 steps x
# 16 B = 524,288; LL128 120 elements x 640 threads x 8 steps x 8 B = 4,915,200; Simple 4 MiB = 4,194,304
CONNECTION = 524_288 + 4_915_200 + 4_194_304  # = 9,633,792 B


def test_connection_buffers():
    assert CONNECTION_BUFFER_BYTES == CONNECTION == 9_633_792


def test_channels_follow_the_link_rate():
    cat = load_catalog()
    # the collective model: 450 GB/s NVLink4 / 14.06 GB/s per channel = 32 channels; NVLink3
    # 300 GB/s -> 21.3 -> 21 (collectives.domain_channels_for_link)
    assert ring_channels(cat.system("dgx-h100")) == 32
    assert ring_channels(cat.system("dgx-a100-80gb")) == 21
    # H800 NVLink 200 GB/s -> 14.2 -> 14
    assert ring_channels(cat.system("hgx-h800")) == 14
    # a GPU id as system is a PCIe box (PCIe Gen5 x16, 64 GB/s per direction): 64 / 14.06 = 4.6 -> 5
    assert ring_channels(cat.system("h100-sxm5-80gb"), cat.gpu("h100-sxm5-80gb")) == 5


def test_serving_reserve_holds_one_communicator():
    cat = load_catalog()
    g = cat.gpu("h100-sxm5-80gb")
    model = load_model("llama-3-8b")
    one = memory_plan(Deployment(model, g, cat.system("dgx-h100")))
    two = memory_plan(Deployment(model, g, cat.system("dgx-h100"), tp=2))
    # a 2-GPU replica reserves one communicator's ring buffers beside the runtime reserve:
    # 32 channels x 9,633,792 B = 308,281,344 B (294 MiB)
    assert two.runtime_reserve_bytes - one.runtime_reserve_bytes == 32 * CONNECTION == 308_281_344


def test_training_counts_one_communicator_per_parallel_group():
    model = load_model("llama-3-8b")
    per_comm = 32 * CONNECTION  # no fabric in training memory: NCCL_CHANNELS = 32
    nccl = lambda **kw: training_memory(model, TrainPlan(**kw)).other_bytes_detail.get("nccl_buffers", 0.0)  # noqa: E731
    assert nccl() == 0.0  # one GPU: no communicator
    assert nccl(dp=8) == per_comm  # data parallel only
    assert nccl(tp=8, dp=4) == 2 * per_comm  # tensor + data
    # tensor, pipeline, context, data (dp x cp), expert: one each
    assert nccl(tp=2, pp=2, cp=2, dp=1) == 4 * per_comm  # tp, pp, cp and the dp x cp = 2 gradient group
    assert nccl_buffer_bytes(3) == pytest.approx(3 * per_comm)
