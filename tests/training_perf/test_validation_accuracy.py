"""The training predictor over ../shared/validation/training.csv must keep its accuracy.

Thresholds are the figures reached when this test was written plus a little slack; raising a
figure past them fails the suite (STYLE.md: validation that can fail).
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from gpuplan.interfaces.row_types import SkipRow
from gpuplan.interfaces.validation.training import predict_row


def _family(row_id: str) -> str:
    return row_id.rsplit("-", 1)[0]


def _spearman(x, y):
    import numpy as np

    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1])


_CACHE: dict = {}


@pytest.fixture
def results(record_rows):
    # the families of record (conftest.THIRD_SPLIT_FAMILIES): the 2026-11-28 families get their gates
    # in the issues that own their regimes
    if "rows" in _CACHE:
        return _CACHE["rows"]
    rows = record_rows("training")
    out = []
    for r in rows:
        try:
            p = predict_row(r)
        except SkipRow:
            continue
        out.append((r, p.value, float(r["value"])))
    _CACHE["rows"] = out
    return out


def _mape(items):
    return sum(abs(p - m) / m for _, p, m in items) / len(items) * 100


def test_memory_rows_per_family(results):
    # Re-based on the grown training.csv (273 rows) with the model unchanged (no tuning to the new
    # rows). Reached (MAPE %): megft 11.8, megpr6429 39.5, ttmem 40.4 (torchtitan peak allocated and
    # reserved), all memory rows 32.9. Limits carry ~10% relative slack; the training-fidelity issue
    # tightens them. The six megft rows that were within 5% stay gated at 5% one by one.
    mem = [x for x in results if x[0]["metric"].startswith(("peak_mem", "mem_"))]
    assert mem
    fam = defaultdict(list)
    for x in mem:
        fam[_family(x[0]["id"])].append(x)
    # FSDP2 + pipeline keeps unsharded parameters and fp32 gradients (torchtitan): ttmem 40.4 -> 25.7
    # torchtitan memory physics (issue 15 item 4: per-op SAC, PyTorch / loss-parallel cross entropy,
    # fp32 parameters + Adam 16 B/param, FSDP2 root and gather buffers, torchao float8 saving bf16
    # inputs, loss phase vs layer-backward phase, reserved slack refit to 0.12; MoE expert outputs
    # kept by the unpermute): ttmem 25.7 -> 7.3, megft 11.8 -> 11.1 (megft-14 -70.3%: unfused
    # attention and MLA, neither in its columns), megpr6429 39.5 -> 38.1, all memory rows 22.96 -> 10.6.
    # A row that states its attention kernel is modelled with it (validation_training.
    # stated_attention_kernel): megft-14's notes name Megatron's unfused backend, -70.3% -> -13.2%;
    # megft 11.1 -> 2.9, all memory rows 10.6 -> 8.5. Limits: figure x 1.1, rounded up to 0.5.
    # Megatron MoE rows with tp > 1 run sequence parallelism (Megatron-core requires it; h-moetrain):
    # megft-14's tp-2 activations shrink, -13.2% -> -15.0%; megft 2.9 -> 3.2, all memory rows 8.46 -> 8.53.
    limits = {"megft": 4.0, "megpr6429": 42.0, "ttmem": 8.5}
    for name, items in fam.items():
        assert _mape(items) <= limits.get(name, 50.0), (name, _mape(items))
    for r, p, m in mem:
        if r["id"] in ("megft-2", "megft-4", "megft-6", "megft-8", "megft-10", "megft-12"):
            assert abs(p - m) / m <= 0.05, (r["id"], p, m)
    assert _mape(mem) <= 9.5


#: Per-family time MAPE limits after merging the context-parallel, MoE, dense-at-scale and memory
#: branches (default knobs; each limit = the merged figure x 1.1, rounded up to 0.5): bloom 4.5,
#: dsv3 21.2, korth-abs 6.5, korth-t5 5.2, llama1 4.5, llama3 33.5, mbr-bw 9.7, mbr-moe 24.3,
#: mbridge 20.2, meg21-t1 3.0, meg21-t2 59.0, meg24 8.9, meg24-ss 6.6, megft 27.8, megpr6429 8.9,
#: mpt-a100 7.2, mpt-h100 6.3, mtnlg 21.0, nemo2407 5.4, tt-a100 1.7, ttbench 15.5 (the CP fit now
#: ships as the default), vtrain 9.0; all time rows 12.5. Then megft 27.8 -> 24.8 (megft-13 -49% ->
#: +28% with its stated unfused attention, validation_training.stated_attention_kernel).
#: Then (h-moetrain) Megatron MoE rows with tp > 1 run sequence parallelism (Megatron-core refuses
#: EP + TP without it) and TE's block-scaled (MXFP8 / NVFP4) expert GEMMs launch once, not per
#: local expert (step.expert.per_expert_launches): mbr-moe 24.3 -> 18.1 (mbr-moe-6 -41 -> -12%, -10
#: -33 -> -22%, -12 -24 -> +14%, -2 -6 -> +10%), mbridge 20.2 -> 17.3 (mbridge-8 -34 -> -7%: its tp 2
#: shards the dispatched tokens over SP), megft 24.8 -> 23.2 (megft-13 +28 -> +17%); all time rows
#: 12.4 -> 12.0; dense families unchanged. A fully recomputed MoE layer dispatches and combines once
#: more (step.expert.collectives_per_layer): megpr6429 8.9 -> 7.6. Limits: figure x 1.1, rounded up to 0.5.
#: Then measured HBM ceilings per part (catalog/data/ceilings.toml: efficiency.hbm 0.80 on H100 SXM x
#: each part's BabelStream copy fraction / H100's; A100 80GB 0.80 -> 0.743): the memory-bound terms
#: of A100 steps run slower: llama1 4.47 -> 6.58 (llama1-4, 2048 A100s, 356 vs 380 tokens/s/GPU),
#: korth-abs 4.02 -> 4.69, mpt-a100 7.20 -> 7.50, vtrain 8.40 -> 8.76, meg21-t2 60.8 -> 59.5; all time
#: rows 11.83 -> 11.91. llama1's limit re-set to 7.5.
#: Then (issue 32, h-bwtrain) Blackwell's sustained-clock ratio is the measured GB200 share over the
#: A100's (0.850, ceilings.toml [[gemm_sustained]]) in place of the knob fitted on these rows (0.797),
#: and deterministic Megatron rows on Blackwell run flash-attn's FlashAttention-2: mbr-bw 3.17 -> 5.18
#: (every row ~6% faster: the price of an unfitted ratio; its leave-family-out CV 6.7 -> 4.9), mbr-moe
#: 15.2 -> 16.1, megft 22.4 -> 18.8 (megft-5 -42 -> -27%, megft-11 -49 -> -36%); all time rows 10.45 ->
#: 10.40. mbr-bw's limit re-set to 6.0.
#: Then (issue 32, h-megdense) flash-attn's deterministic backward grid (step.flash2_deterministic: ceil(SMs /
#: (b h)) CTAs per batch element and head on the A100 and GB200 rows, list-scheduled) and Blackwell attention
#: below 16k tokens at the measured rate of its ceiling's own artifact (step.blackwell_attention_length):
#: megft 15.36 -> 9.47 (megft-11 -33.9 -> -20.4%, megft-5 -23.8 -> -10.1%, megft-9 -13.8 -> -6.0%, megft-3
#: -13.1 -> -6.9%), mbr-moe 13.75 -> 12.19, mbr-bw 5.09 -> 5.01. megft's limit re-set to 9.47 x 1.1 = 10.5.
MERGED_LIMITS: dict = {"bloom": 6.5, "dsv3": 27.0, "korth-abs": 7.5, "korth-t5": 6.0, "llama1": 7.5, "llama3": 37.0, "mbr-bw": 6.0, "mbr-moe": 17.0, "mbridge": 19.0, "meg21-t1": 5.8, "meg21-t2": 65.0, "meg24": 10.0, "meg24-ss": 8.5, "megft": 10.5, "megpr6429": 8.5, "mpt-a100": 8.0, "mpt-h100": 8.5, "mtnlg": 23.5, "nemo2407": 6.0, "tt-a100": 2.0, "ttbench": 8.5, "vtrain": 10.0}


def test_time_mape_per_family(results):
    time_rows = [x for x in results if not x[0]["metric"].startswith(("peak_mem", "mem_"))]
    fam = defaultdict(list)
    for x in time_rows:
        fam[_family(x[0]["id"])].append(x)
    # Families tuned on in earlier rounds (MAPE % reached, unchanged): meg21-t1 2.87, korth-t5 5.08,
    # korth-abs 6.30, vtrain 8.79, nemo2407 5.73, mpt-a100 7.05, mpt-h100 8.76, tt-a100 1.75,
    # megft (time rows) 34.2. Re-based on the grown training.csv (273 rows) with the model unchanged
    # (no tuning to the new rows), families new to the file (MAPE % reached): meg21-t2 102.1 (ZeRO-3
    # over 384-2240 A100s, predicted too fast), dsv3 82.2, mbr-moe 46.4, mtnlg 40.8, mbridge 31.0,
    # llama3 28.9, ttbench 27.2, meg24 20.1, mbr-bw 19.9, meg24-ss 14.3, megpr6429 9.0, bloom 5.2,
    # llama1 4.5; all time rows 17.65. Limits carry ~10-15% relative slack; the training-fidelity
    # issue tightens them with cross-validated figures.
    # Then the operator-inventory change: rows with `hf_config` take the exact architecture (MLA,
    # head widths) and mxfp8 rows are predicted (MXFP8 GEMMs at the fp8 rate, specs.dtypes): dsv3
    # 82.2 -> 98.3 (the exact MLA core costs ~3x the column-derived MHA core; the row's 64-way EP
    # all-to-all is exposed where DeepSeek's DualPipe hides it: 18.6 of 39.5 s), mbr-moe 46.4 -> 37.9
    # (9 rows, 5 more), mbr-bw 19.9 -> 12.2 (3 rows), all time rows 17.65 -> 17.92 (242 rows).
    # Legacy Megatron / Megatron-DeepSpeed rows with unstated recompute recompute every layer (the
    # recipes' --checkpoint-activations; Narayanan et al. 2021 eq. 3 counts that pass): meg21-t2
    # 102.1 -> 59.0, mtnlg 40.8 -> 21.1, mbridge 30.9 -> 33.2 (three rows with an empty precision cell
    # read as the legacy stack), all time rows 17.92 -> 15.62. FSDP2 under a pipeline schedule keeps
    # parameters unsharded for the step and reduces gradients once (torchtitan's reshard policy):
    # ttbench 27.2 -> 33.0 (its 405B pipeline rows were already too fast; the pipeline cost torchtitan
    # pays is not modelled yet), all time rows 16.05.
    # Context parallelism per framework (workloads.training.step.context: PyTorch's all-gather
    # ring with its fp32 merges and dK/dV ring under torchtitan, the fitted ring-step slowdown at its
    # default 1) and the Blackwell training attention rate (cuDNN on B200 vs H100, FlashAttention-3/4
    # papers: 0.311 of peak): ttbench 33.0 -> 28.6, mbr-bw 12.5 -> 10.3, all time rows 16.05 -> 15.69.
    # MoE cost terms (workloads/training/step/expert.py): the expert all-to-all sends one network copy per
    # destination domain (DeepEP / HybridEP), is hidden behind another micro-batch's layer compute
    # where the framework has batch-level overlap (Megatron-core with pp 1 or an interleaved
    # pipeline; DualPipe), each MoE layer pays fixed per-layer and (Megatron's TE GroupedLinear)
    # per-local-expert time (fitted knobs), FP8 / MXFP8 recipes cast the experts' GEMM inputs, and MoE
    # rows with tp > 1 run etp = 1 (the published Megatron MoE recipes): dsv3 98.1 -> 10.3, mbr-moe
    # 38.0 -> 24.2, mbridge 33.2 -> 30.1 (mbridge-8, whose empty precision cell is still read as the
    # legacy fp16 stack, -63%), megft 34.2 -> 32.2 (megft-13, run with the unfused attention
    # backend), megpr6429 9.1 -> 15.5 (low-confidence rows: the predicted step 2.29 s is
    # under both measured arms, 2.84 s with EP overlap and 3.04 s without, while the TFLOP/s rows,
    # on Megatron's own FLOP count, sit over), all time rows 16.05 -> 15.11; dense families unchanged.
    # Unstated configuration of tuned Megatron-core runs (validation_training module doc): bf16
    # Megatron rows without a stated micro-batch run SP + TE userbuffers TP overlap (the README's
    # --tp-comm-overlap), and the legacy fp16 stack is read only on pre-Hopper GPUs; TE userbuffers
    # overlap charged per method (ring exchange / pipeline / bulk with NeMo's SM budgets):
    # meg24 20.1 -> 9.7, meg24-ss 14.3 -> 16.9 (the 96-GPU point is now 21% too fast: the steady
    # state of a 177B tp8 run), mbridge 33.2 -> 22.0 (the H100 rows with an empty precision cell are
    # bf16, not the legacy stack), nemo2407 5.8 -> 6.5, ttbench 33.0 -> 31.7, all time rows 15.22.
    # Hopper's sustained GEMM fraction as its own fitted ratio (0.92 of the A100 value, fitted on the
    # H100 families; CV overall 16.80 -> 16.38): mpt-h100 8.76 -> 6.31, nemo2407 6.5 -> 4.8,
    # ttbench 31.7 -> 28.9, megft 34.2 -> 32.9, meg24-ss 16.9 -> 15.4, megpr6429 9.1 -> 7.7; meg24
    # 9.7 -> 11.5, mbridge 22.0 -> 23.8, llama3 28.5 -> 31.9 (their H100 runs were already too slow),
    # dsv3 98.2 -> 102.8; all time rows 14.67.
    # Tuned Megatron-core pipelines with unstated vpp run interleaved (2 layers per virtual stage;
    # Megatron overlaps pipeline sends only then) and the Hopper ratio refit to 0.89: meg24 11.5 ->
    # 10.2 (its pp rows were right only because the 1F1B bubble offset a too-fast steady state),
    # meg24-ss 15.4 -> 7.1, mbridge 23.8 -> 24.9, llama3 31.9 -> 33.3, dsv3 -> 104.8, ttbench 28.0;
    # all time rows 14.52.
    # Cross-entropy bytes counted op by op (Megatron-core vocab-parallel CE: 52 B per logit, was 16;
    # llm-foundry's fused CE: 6 B): meg24 10.2 -> 8.9 (GPT-1.7B's 131k-vocab head), megft 32.4 ->
    # 30.1, mbr-moe 37.1 -> 35.1, nemo2407 5.0 -> 5.4, mpt-a100 7.05 -> 7.20, dsv3 104.8 -> 109.1;
    # all time rows 14.41 (CV overall 16.27 -> 16.12).
    # NCCL's LL128 protocol and the Simple fill of one 512 KiB step per channel inside a node
    # (primitives.collectives; nccl-tests 8 x H20 and vLLM pynccl at 8-128 MiB): tp all-reduces of
    # 10-100 MB activations run 1.3-2x faster. meg21-t1 2.97 -> 5.25 (its A100 tp8 rows, already a
    # little too fast, predicted 5-10% over; limit x 1.1 = 5.8), meg24-ss 6.62 -> 7.74 (limit 8.5),
    # nemo2407 5.43 -> 2.58, korth-abs 6.46 -> 4.02, vtrain 8.95 -> 8.40, mbridge 11.55 -> 9.46, meg24
    # 8.94 -> 8.30, bloom 4.54 -> 5.82 (low confidence; its dp all-reduces over Omni-Path now run LL128;
    # limit 6.5); all time rows (CV) 13.46 -> 13.11.
    # Issue 32 (h-train): Blackwell attention at cuDNN's measured B200 rate (0.311 -> 0.510 of peak)
    # with a fitted Blackwell sustained-clock ratio (0.80) that scales GEMMs and attention alike, and
    # Hopper's ratio (0.89) now scaling its attention too (the FlashAttention-2 ceiling is a short-run
    # kernel figure, like mamf-finder's); torchtitan pipeline rows without a micro-batch run pp
    # micro-batches (pipeline_parallel_microbatches, its default before 2025-04): mbr-bw 10.4 -> 3.2,
    # mbr-moe 18.3 -> 15.2, ttbench 11.6 -> 7.5 (ttbench-13 +46 -> -1%), megft 13.8 -> 12.8 (time and
    # memory), meg24 8.3 -> 7.8, nemo2407 2.6 -> 3.0, mbridge 9.5 -> 11.2, dsv3 21.2 -> 24.3 (H100:
    # its MLA attention slower by the ratio), mpt-h100 6.24 -> 7.55 (its attention is a large share
    # of the small MPT models' steps); limits re-set x 1.1 for the families that moved.
    # MERGED_LIMITS (set below from the merged model's figures)
    limits = MERGED_LIMITS
    for name, items in fam.items():
        assert _mape(items) <= limits.get(name, 30.0), (name, _mape(items))
    assert _mape(time_rows) <= 13.2  # 12.0 after h-moetrain (was 12.5, MERGED_LIMITS comment) x 1.1


def test_vtrain_strategy_ranking(results):
    groups = defaultdict(list)
    for r, p, m in results:
        if r["source"].startswith("Bang"):
            groups[(r["model"], r["num_gpus"])].append((p, m))
    rhos = [_spearman([p for p, _ in g], [m for _, m in g]) for g in groups.values() if len(g) >= 4]
    # reached: 3.6B 0.94, 18.4B 0.32, 39.1B 0.66, 175B 0.83 (mean 0.69). The 18.4B group's measured
    # times span 10.43-11.03 s except the tp16 row, so its rank order is within a few percent of
    # noise; the 39.1B group's tp=2 rows run 1.3-1.5x slower than any modelled cost explains.
    # Target is >= 0.8 per group (not met for those two).
    assert rhos and min(rhos) >= 0.3 and sum(rhos) / len(rhos) >= 0.66


def test_third_split_training_families_with_the_shipped_knobs(validation_dir):
    # The pretraining families of the third split (conftest.THIRD_SPLIT_FAMILIES, less fine-tuning and
    # TPU, which other issues own), predicted with the shipped knobs, high / medium rows. MAPE % before
    # issue 32 -> after (h-train): nemo-lseq 9.74 -> 2.82 (B200 attention at cuDNN's measured rate with
    # the Blackwell sustained-clock ratio), tao 23.19 -> 22.38, tth200 26.61 -> 27.94 (its reserved
    # memory, +42%, unexplained: docs/accuracy.md), ttasync 15.67 -> 13.87, automodel 10.92 -> 10.62;
    # all 34 rows 16.1 -> 11.1 (the default column; the leave-one-family-out CV is 12.2%,
    # docs/accuracy.md). After h-titan (torchtitan's compiled loss and compiled blocks, the 500 W cap of
    # the Grand Teton H100s, the MI300X attention ceiling): tth200 27.94 -> 3.17, tao 22.38 -> 30.27
    # (its H100 rows, +16 / +20%, now run compiled on a 700 W DGX-H100 the source does not state; its
    # MI300X rows +43 / +67%), ttasync 13.87 -> 19.23 (vanilla TP at tp 8 on an 8B model, +25%),
    # nemo-lseq and automodel unchanged; all 34 rows 11.1 -> 10.07. Limits: these x 1.1, rounded up to 0.5.
    # After h-bwtrain (Blackwell's sustained-clock ratio measured, 0.850, not fitted on nemo-lseq and the
    # other Blackwell families, 0.797): nemo-lseq 2.82 -> 4.18 (its rows 2-7% too fast; its leave-family-out
    # CV 3.1 -> 3.2), all 34 rows 10.07 -> 10.75; nemo-lseq's limit re-set to 5.0.
    import csv

    limits = {"nemo-lseq": 5.0, "tao": 33.5, "tth200": 3.5, "ttasync": 21.5, "automodel": 12.0}
    fam = defaultdict(list)
    with open(validation_dir / "training.csv", encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            name = _family(r["id"])
            if name not in limits or r["confidence"] == "low":
                continue
            fam[name].append((r, predict_row(r).value, float(r["value"])))
    for name, limit in limits.items():
        assert fam[name] and _mape(fam[name]) <= limit, (name, _mape(fam[name]))
    every = [x for items in fam.values() for x in items]
    assert len(every) == 34 and _mape(every) <= 11.5
