"""Whether a training.csv row's PyTorch loaded CUDA kernels lazily (`TrainPlan.cuda_lazy_loading`), read
from its `notes` and `source` cells, the same rule for every row:

- CUDA lazy loading (CUDA_MODULE_LOADING=LAZY) arrived in CUDA 11.7, disabled by default; the driver
  enables it by default on Linux from CUDA 12.2 (NVIDIA CUDA Programming Guide, "Lazy Loading", Table 17).
  PyTorch sets CUDA_MODULE_LOADING=LAZY when the user has not, from release 1.13 (pytorch/pytorch PR
  #85692, cherry-picked to 1.13 as #86509; aten/src/ATen/cuda/detail/CUDAHooks.cpp `CUDAHooks::init`),
  released 2022-10-28. Earlier releases loaded every kernel image eagerly (with CUDA < 12.2).
1. Notes that state a PyTorch version ("torch 1.12", "PyTorch 2.1") decide: lazy from 1.13 on.
2. Notes that state a CUDA toolkit before 11.7 ("CUDA 11.3") mean eager loading.
3. Else the source's date: a month before 2022-11 (`source_dates.latest_source_month`), or a year before
   2023 given without a month (ten of 2022's twelve months
   precede the 1.13 release), is eager. An undated row keeps the default (lazy).
"""

from __future__ import annotations

import re

from gpuplan.interfaces.validation import source_dates

#: PyTorch 1.13, the first release that sets CUDA_MODULE_LOADING=LAZY, and the first month after its release
TORCH_LAZY_SINCE = (1, 13)
TORCH_LAZY_MONTH = (2022, 11)
#: CUDA 11.7, the first toolkit with lazy loading
CUDA_LAZY_SINCE = (11, 7)
_STATED_CUDA = re.compile(r"\bCUDA[ :=]+v?(\d+)\.(\d+)", re.IGNORECASE)


def lazy_loading_from_row(row: dict[str, str]) -> tuple[bool, str | None]:
    """(lazy loading on, a note saying why it is off; None when on) for one row (module docstring)."""
    notes = row.get("notes") or ""
    version = source_dates.stated_torch_version(notes)
    if version:
        if version < TORCH_LAZY_SINCE:
            return False, f"eager CUDA module loading (notes state PyTorch {version[0]}.{version[1]} < 1.13)"
        return True, None
    cuda = _STATED_CUDA.search(notes)
    if cuda and (int(cuda.group(1)), int(cuda.group(2))) < CUDA_LAZY_SINCE:
        return False, f"eager CUDA module loading (notes state CUDA {cuda.group(1)}.{cuda.group(2)} < 11.7)"
    date = source_dates.latest_source_month(row.get("source") or "")
    if date is None:
        return True, None
    year, month = date
    before = (year, month) < TORCH_LAZY_MONTH if month is not None else year < TORCH_LAZY_MONTH[0] + 1
    if before:
        when = f"{year}-{month:02d}" if month is not None else str(year)
        return False, f"eager CUDA module loading (source dated {when}, before PyTorch 1.13's lazy default)"
    return True, None


__all__ = ["CUDA_LAZY_SINCE", "TORCH_LAZY_MONTH", "TORCH_LAZY_SINCE", "lazy_loading_from_row"]
