"""The CUDA context by module loading (TrainPlan.cuda_lazy_loading; workloads.training.memory
`cuda_context_bytes`) and the validation rule that dates a row's loading mode
(interfaces.validation.cuda_loading_row)."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.interfaces.validation.cuda_loading_row import lazy_loading_from_row
from gpuplan.models import load_model
from gpuplan.specs.plan import TrainPlan
from gpuplan.units import MIB
from gpuplan.workloads.training.memory import cuda_context_bytes, outside_allocator_bytes, training_memory

#: HF transformers perf_train_gpu_one (2022): NVML used after torch.ones((1, 1)).to("cuda") = 1,343 MiB
EAGER_CONTEXT = 1343 * MIB
#: the lazy-loading estimate kept from before (H100 + CUDA 12 processes: ~500-600 MiB in nvidia-smi)
LAZY_CONTEXT = 512 * MIB


def test_context_by_loading_mode():
    assert cuda_context_bytes() == LAZY_CONTEXT
    assert cuda_context_bytes(lazy_loading=False) == EAGER_CONTEXT
    # one GPU, no communicator: the context alone
    context, _ = outside_allocator_bytes(1, 1, 1, 1, 1, lazy_loading=False)
    assert context == EAGER_CONTEXT


def test_plan_memory_charges_the_eager_context():
    c = load_catalog()
    gpu = c.gpu(c.system("dgx-h100").gpu)
    model = load_model("llama-2-7b")
    lazy = training_memory(model, TrainPlan(seq_len=2048), gpu)
    eager = training_memory(model, TrainPlan(seq_len=2048, cuda_lazy_loading=False), gpu)
    # only the context differs: 1,343 - 512 = 831 MiB
    assert eager.per_gpu_bytes["total"] - lazy.per_gpu_bytes["total"] == pytest.approx(831 * MIB)
    assert eager.allocated_bytes == lazy.allocated_bytes


def test_plan_dump_leaves_out_the_default():
    assert "cuda_lazy_loading" not in TrainPlan().model_dump()
    dumped = TrainPlan(cuda_lazy_loading=False).model_dump()
    assert dumped["cuda_lazy_loading"] is False
    assert TrainPlan(**dumped).cuda_lazy_loading is False


@pytest.mark.parametrize("notes, source, lazy", [
    ("ran on torch 1.12 with CUDA 11.6", "", False),  # stated PyTorch before 1.13
    ("PyTorch 2.1, CUDA 12.1", "2021 paper", True),  # a stated PyTorch decides over the date
    ("built with CUDA 11.3", "", False),  # a toolkit before 11.7 has no lazy loading
    ("", "huggingface/transformers@0016acf7ef42:docs/... ('Efficient Training on a Single GPU', 2022 version)", False),
    ("", "benchmarks run Feb-Mar 2024", True),
    ("", "results of 2022-10-27", False),  # the day before PyTorch 1.13's release month ends
    ("", "results of 2022-11-02", True),
    ("", "Narayanan et al. 2021", False),
    ("", "an undated page", True),
])
def test_loading_mode_from_row(notes, source, lazy):
    got, note = lazy_loading_from_row({"notes": notes, "source": source})
    assert got is lazy
    assert (note is None) is lazy


@settings(max_examples=80, deadline=None)
@given(day=st.dates(min_value=datetime.date(2019, 1, 1), max_value=datetime.date(2026, 12, 31)))
def test_iso_dates_split_at_november_2022(day):
    # PyTorch 1.13 (2022-10-28) sets CUDA_MODULE_LOADING=LAZY; a source dated from 2022-11 on ran it
    got, _ = lazy_loading_from_row({"notes": "", "source": f"run on {day.isoformat()}"})
    assert got is (day >= datetime.date(2022, 11, 1))
