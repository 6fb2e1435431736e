"""Framework-specific training memory terms (issue 15, item 4), each checked against a hand derivation.

Llama 3 8B (h 4096, 32 heads, 8 kv heads of 128, SwiGLU f 14336, vocab 128256, untied) and
Llama 3 70B (h 8192, 64 heads, 8 kv heads, f 28672) come from the catalog.
"""

import pytest

from gpuplan.models import load_model
from gpuplan.specs.execution import Framework
from gpuplan.specs.plan import Precision, Recompute, Sharding, TrainPlan
from gpuplan.workloads.training import memory as mem
from gpuplan.workloads.training.memory import (
    chunks_in_flight,
    layer_activation_bytes_per_token,
    linear_input_bytes,
    loss_bytes_per_vocab_entry,
    op_sac_bytes_per_token,
    saved_context,
    state_bytes_per_param,
    training_memory,
)

TITAN = Framework.TORCHTITAN


@pytest.fixture(scope="module")
def llama8b():
    return load_model("llama-3-8b")


def test_op_sac_llama3_8b_hand_derivation(llama8b):
    # torchtitan per-op SAC keeps, per token: the block input (2 x 4096), the outputs of the odd mm's
    # of wq, wk, wv, wo, w1, w3, w2, i.e. wq (2 x 4096), wv (2 x 8 x 128 = 2 x 1024), w1 (2 x 14336),
    # w2 (2 x 4096), and the SDPA output (2 x 4096) with its fp32 log-sum-exp (4 x 32 heads):
    # 2 x (4096 + 4096 + 1024 + 14336 + 4096 + 4096) + 128 = 63,616 B.
    plan = TrainPlan(seq_len=8192, recompute=Recompute.SELECTIVE, framework=TITAN)
    assert op_sac_bytes_per_token(llama8b, 0, saved_context(llama8b, plan)) == 63_616
    assert layer_activation_bytes_per_token(llama8b, plan, 0) == 63_616
    # Megatron's selective recompute (Korthikanti) keeps every linear input and the FFN intermediates:
    # more than twice as much for this layer
    megatron = plan.model_copy(update={"framework": Framework.MEGATRON})
    assert layer_activation_bytes_per_token(llama8b, megatron, 0) > 2 * 63_616


def test_op_sac_llama3_70b_tensor_and_sequence_parallel():
    # tp 8 with sequence parallelism: block input 2 x 8192 / 8 = 2048; wq (column) 2 x 8192 / 8 = 2048;
    # wv 2 x 1024 / 8 = 256; w1 2 x 28672 / 8 = 7168; w2 (row) keeps its partial-sum output
    # 2 x 8192 = 16384 and the reduce-scatter output 2 x 8192 / 8 = 2048; SDPA 2 x 8192 / 8 = 2048
    # and 4 x 64 / 8 = 32 of log-sum-exp: 32,032 B per token.
    m = load_model("llama-3-70b")
    plan = TrainPlan(tp=8, sequence_parallel=True, seq_len=8192, recompute=Recompute.SELECTIVE, framework=TITAN)
    assert layer_activation_bytes_per_token(m, plan, 0) == 32_032


def test_torchao_float8_saves_bf16_linear_inputs():
    # torchao Float8Linear saves input_hp (bf16) for backward; Transformer Engine saves the fp8 copy
    assert linear_input_bytes(Precision.FP8, TITAN) == 2
    assert linear_input_bytes(Precision.FP8, Framework.MEGATRON) == 1
    assert linear_input_bytes(Precision.BF16, TITAN) == 2


def test_state_bytes_torchtitan_16_megatron_18():
    # torchtitan: fp32 parameter 4 + fp32 gradient 4 + Adam m, v 8 = 16; Megatron 2 + 4 + 12 = 18
    assert state_bytes_per_param(TrainPlan(framework=TITAN)) == (4.0, 4.0, 8.0)
    assert sum(state_bytes_per_param(TrainPlan())) == 18.0


def test_loss_bytes_per_vocab_entry():
    # Megatron fused vocab-parallel CE: bf16 logits 2 + fp32 copy 4 = 6; PyTorch CE on fp32 logits in
    # backward: saved log-softmax 4 + its gradient 4 + input gradient 4 = 12; loss parallel 16
    assert loss_bytes_per_vocab_entry(TrainPlan()) == 6.0
    assert loss_bytes_per_vocab_entry(TrainPlan(framework=TITAN)) == 12.0
    assert loss_bytes_per_vocab_entry(TrainPlan(tp=2, framework=TITAN)) == 16.0


def test_torchtitan_fsdp2_llama3_8b_terms(llama8b):
    # Llama 3 8B on 8 GPUs, FSDP2 (torchtitan), mb 2 x 8192, per-op SAC
    plan = TrainPlan(dp=8, micro_batch=2, global_batch=16, seq_len=8192, recompute=Recompute.SELECTIVE,
                     sharding=Sharding.FSDP, framework=TITAN)
    t = training_memory(llama8b, plan)
    # one layer: qkv 4096 x 6144 + wo 4096 x 4096 + 3 x 4096 x 14336 + 2 norms x 4096 = 218,112,000
    # params; two of them (computing + prefetched) unsharded in bf16: 2 x 2 x 218,112,000 B
    assert t.other_bytes_detail["zero3_gather_buffer"] == 2 * 2 * 218_112_000
    # the root (embedding 128256 x 4096, final norm 4096, output 128256 x 4096) stays unsharded in bf16
    assert t.other_bytes_detail["fsdp_root_unsharded"] == 2 * (2 * 128_256 * 4096 + 4096)
    # layers: 32 x 16384 tokens x 63,616 B; loss: 16384 x 128256 x 12 + 16384 x 2 x 2 x 4096 (the
    # final norm's input and output), larger than a layer's backward working set
    assert t.activations_bytes_detail["layers"] == 32 * 16384 * 63_616
    assert t.activations_bytes_detail["logits"] == 16384 * 128_256 * 12 + 16384 * 4 * 4096
    assert "backward_working_set" not in t.activations_bytes_detail
    # states: 8,030,261,248 params / 8 x 16 B
    params = t.params_per_gpu
    assert params == 8_030_261_248
    assert t.per_gpu_bytes["weights"] + t.per_gpu_bytes["gradients"] + t.per_gpu_bytes["optimizer"] == pytest.approx(
        params / 8 * 16, rel=1e-12)
    # reserved = allocated x the allocator's reserved/allocated ratio; allocated excludes the CUDA
    # context and NCCL buffers
    ratio = mem.knobs.value("training.memory.reserved_over_allocated")
    assert t.reserved_bytes == pytest.approx(t.allocated_bytes * ratio, rel=1e-12)
    assert t.allocated_bytes == pytest.approx(t.per_gpu_bytes["total"] - t.other_bytes_detail["cuda_context"]
                                              - t.other_bytes_detail["nccl_buffers"], rel=1e-12)


def test_peak_phase_is_loss_or_layer_backward_not_both(llama8b):
    # short sequences and a tiny vocabulary make the layer backward the peak on the last rank
    small_vocab = llama8b.model_copy(update={"vocab": 256})
    t = training_memory(small_vocab, TrainPlan(seq_len=2048))
    assert "logits" not in t.activations_bytes_detail and "backward_working_set" in t.activations_bytes_detail
    # 2048 tokens x 2 B x (4096 + 2 x 14336) = the gradient working set of one layer's backward
    assert t.activations_bytes_detail["backward_working_set"] == 2048 * 2 * (4096 + 2 * 14336)
    assert sum(t.activations_bytes_detail.values()) == pytest.approx(t.per_gpu_bytes["activations"], rel=1e-12)


def test_1f1b_in_flight_per_stage():
    # 1F1B (Narayanan et al. 2021 sec. 2.2): stage r of p holds p - r micro-batches at its peak;
    # pp 4, 16 micro-batches: 4, 3, 2, 1; with only 2 micro-batches per step no stage holds more than 2
    plan = TrainPlan(pp=4, dp=1, micro_batch=1, global_batch=16, seq_len=2048)
    assert [chunks_in_flight(plan, r) for r in range(4)] == [4.0, 3.0, 2.0, 1.0]
    few = plan.model_copy(update={"global_batch": 2})
    assert [chunks_in_flight(few, r) for r in range(4)] == [2.0, 2.0, 2.0, 1.0]


def test_transformer_engine_fp8_weight_and_transpose_cache(llama8b):
    # Megatron + TE FP8, tp 1, one rank: every block weight cached as fp8 (1 B) and its fp8 transpose
    # (1 B); 32 layers x 218,112,000 params (norms included: the split counts the layer's params)
    plan = TrainPlan(seq_len=2048, precision=Precision.FP8)
    t = training_memory(llama8b, plan)
    assert t.other_bytes_detail["fp8_weight_cache"] == 2 * 1 * 32 * 218_112_000
    # torchtitan's torchao float8 re-casts per GEMM: no cache; bf16 training: none either
    assert "fp8_weight_cache" not in training_memory(llama8b, plan.model_copy(update={"framework": TITAN})).other_bytes_detail
    assert "fp8_weight_cache" not in training_memory(llama8b, TrainPlan(seq_len=2048)).other_bytes_detail


def test_op_sac_rematerialises_the_rest_of_one_layer_in_backward(llama8b):
    # tiny vocabulary: the layer-backward phase is the peak. Its recompute working set under per-op
    # SAC is one layer's full saved set less what SAC kept: Korthikanti with flash attention, GQA,
    # SwiGLU, no dropout, tp 1 (per token: norms 2 x 2 x 4096, QKV input 2 x 4096, Q/K/V 2 x 6144,
    # LSE 4 x 32, wo input 2 x 4096, fc1 input 2 x 4096, fc1 output 2 x 28672, w2 input 2 x 14336
    # = 2 x 69,632 + 128 = 139,392 B) minus 63,616 B = 75,776 B
    small_vocab = llama8b.model_copy(update={"vocab": 256})
    plan = TrainPlan(seq_len=2048, recompute=Recompute.SELECTIVE, framework=TITAN)
    t = training_memory(small_vocab, plan)
    full = layer_activation_bytes_per_token(small_vocab, plan, 0, stored=False)
    assert full == 2 * (2 * 4096 + 4096 + 6144 + 4096 + 4096 + 28672 + 14336) + 4 * 32 == 139_392
    assert t.activations_bytes_detail["recompute_working_set"] == 2048 * 75_776


def test_mtp_modules_on_the_last_stage(llama8b):
    # one MTP depth on a Llama 3 8B shape, tp 1, pp 1, bf16, no recompute, 2048 tokens:
    # params: a layer (218,112,000) + the 2h -> h projection (2 x 4096 x 4096 = 33,554,432) + its two
    # input norms and head norm (3 x 4096 = 12,288) = 251,678,720 more on the last (only) rank;
    # stored activations: the layer's saved set (139,392 B) + the projection input (2 B x 2h = 16,384 B)
    # + the two norm inputs (2 x 2 B x h = 16,384 B) = 172,160 B per token; the loss keeps one more fp32 softmax
    # (4 B per vocabulary entry per token)
    mtp = llama8b.model_copy(update={"mtp_layers": 1})
    plan = TrainPlan(seq_len=2048)
    base, with_mtp = training_memory(llama8b, plan), training_memory(mtp, plan)
    assert with_mtp.params_per_gpu - base.params_per_gpu == 251_678_720
    assert with_mtp.activations_bytes_detail["mtp_layers"] == 2048 * 172_160
    assert with_mtp.activations_bytes_detail["logits"] - base.activations_bytes_detail["logits"] == 2048 * 128_256 * 4
