"""nccl-tests stdout (NVIDIA/nccl-tests: all_reduce_perf, all_gather_perf, reduce_scatter_perf,
alltoall_perf, broadcast_perf) -> collectives rows, one per message size: `busbw_gbps` of the
out-of-place columns.

Format (nccl-tests src/common.cu, as printed since 2.x; examples in its README and PERFORMANCE.md):

    # nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 ...
    #  Rank  0 Group  0 Pid 1234 on node01 device  0 [0x1b] NVIDIA H100 80GB HBM3
    #                                                              out-of-place                       in-place
    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
       134217728      33554432     float     sum      -1    613.3  218.85  382.99      0    614.3  218.48  382.34      0
    # Avg bus bandwidth    : 467.089
    # Collective test concluded: all_reduce_perf     (newer versions)

Data lines are whitespace-separated numbers under that header (an mpirun `[1,0]<stdout>:` prefix
is stripped). `size` is bytes per rank as nccl-tests counts it (SCHEMA.md collectives). The
collective comes from the config (`collective = "all_reduce"`), else from the test's name in the
log; num_gpus from the `# Rank` lines (else the config); nodes from their distinct host names.
"""

from __future__ import annotations

import re
from typing import Mapping

from gpuplan.errors import InputError
from gpuplan.interfaces.calibration.importers import COLLECTIVES, base_row, check_config, number_text

EXPECTED = "nccl-tests data lines under the '#  size  count  type  redop  root  time  algbw  busbw' header"
_PREFIX = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)")
_TEST_NAME = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
              "alltoall": "all_to_all", "broadcast": "broadcast"}


def _collective_from_log(text: str) -> str | None:
    m = re.search(r"\b(all_reduce|all_gather|reduce_scatter|alltoall|broadcast)_perf\b", text)
    return _TEST_NAME[m.group(1)] if m else None


def parse(text: str, config: Mapping[str, str], prefix: str, filename: str) -> list[dict[str, str]]:
    check_config(config, COLLECTIVES, ["system"], "nccl-tests")
    header_cols: list[str] | None = None
    ranks: dict[int, str] = {}
    rows = []
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw).strip()
        rank = _RANK.match(line)
        if rank:
            ranks[int(rank.group(1))] = rank.group(2)
            continue
        if line.startswith("#") and "size" in line and "busbw" in line:
            header_cols = line.lstrip("#").split()
            continue
        if header_cols is None or not line or line.startswith("#"):
            continue
        fields = line.split()
        if not re.fullmatch(r"\d+", fields[0]):
            continue  # NCCL INFO lines and the like between data lines
        try:
            size = int(fields[0])
            busbw = float(fields[header_cols.index("busbw")])  # first busbw: out-of-place
            time_us = float(fields[header_cols.index("time")])
        except (ValueError, IndexError):
            raise InputError(f"{filename}: cannot read the nccl-tests data line '{line[:60]}'", field="file") from None
        if size > 0 and busbw > 0:
            rows.append((size, busbw, time_us))
    if not rows:
        return []
    collective = config.get("collective") or _collective_from_log(text)
    if not collective:
        raise InputError(f"{filename}: the log does not name its test (e.g. all_reduce_perf); "
                         "give --set collective=all_reduce", field="collective")
    out = []
    for i, (size, busbw, time_us) in enumerate(rows, start=1):
        row = base_row(f"{prefix}-{i}", "nccl-tests", filename, config, COLLECTIVES)
        row["collective"] = collective
        row.setdefault("num_gpus", str(len(ranks)) if ranks else "")
        if ranks:
            row.setdefault("nodes", str(len(set(ranks.values()))))
        row["size_bytes"] = str(size)
        row.setdefault("algorithm", "auto")
        row["metric"] = "busbw_gbps"
        row["value"] = number_text(busbw)
        row["notes"] = (row["notes"] + "; " if row["notes"] else "") + f"out-of-place time {time_us} us"
        out.append(row)
    return out
