"""An eager fine-tuning step on another PyTorch loop (`Framework.OTHER`, not under torch.compile) counts
PyTorch-native Llama modules op by op (step.compute.eager_native_modules), as torchtitan's eager Llama."""

import pytest

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.specs.execution import Framework
from gpuplan.specs.finetune import FineTuning, MasterWeights
from gpuplan.specs.plan import Recompute, TrainPlan
from gpuplan.workloads.training.step.assembly import estimate_step_time
from gpuplan.workloads.training.step.inputs import StepContext

PURE_BF16 = FineTuning(master_weights=MasterWeights.NONE)  # torchtune's `dtype: bf16` full fine-tuning


def _setup():
    catalog = load_catalog()
    system = catalog.system("dgx-a100-80gb")
    return system, catalog.gpu(system.gpu), load_model("llama-3-8b")


def test_eager_other_loop_elementwise_hand_count():
    # Llama 3 8B layer (h 4096, q 4096, kv 1024, SwiGLU f 14336), bf16, forward bytes per token:
    # eager PyTorch modules (torchtune / torchtitan): RMSNorm x2 + residual x2 = 84 h = 344,064; rotary
    # 20 (q + kv) = 102,400; attention output copy 4 q = 16,384; GQA expand copies 2 (2 kv + 2 q) = 20,480;
    # SwiGLU in two kernels 10 f = 143,360 -> 626,688 B.
    # compiled (the fused count every other stack gets): norms + residuals 20 h = 81,920; SwiGLU 6 f = 86,016
    # -> 167,936 B. No recompute: each layer's elementwise runs forward once and backward twice (3x), so
    # the step differs by 4096 tokens x 2 sequences x 32 layers x 3 x (626,688 - 167,936) B at HBM rate.
    system, gpu, model = _setup()
    plan = TrainPlan(dp=1, micro_batch=2, global_batch=2, seq_len=4096, recompute=Recompute.NONE,
                     framework=Framework.OTHER, fine_tuning=PURE_BF16)
    eager = estimate_step_time(model, system, plan, gpu).step_time_s
    compiled = estimate_step_time(model, system, plan.model_copy(update={"compiled_model": True}), gpu).step_time_s
    hbm_bytes_s = StepContext.build(model, system, gpu, 4096, framework=Framework.OTHER).hbm_bytes_s
    assert (eager - compiled) * hbm_bytes_s == pytest.approx(2 * 4096 * 32 * 3 * (626_688 - 167_936), rel=1e-9)


@pytest.mark.parametrize("framework, fine_tuning", [
    (Framework.OTHER, FineTuning()),  # ordinary training on `other`: not a PyTorch fine-tuning loop
    (Framework.MEGATRON, PURE_BF16),  # Megatron fuses its own kernels
])
def test_eager_count_only_for_pytorch_fine_tuning_loops(framework, fine_tuning):
    system, gpu, model = _setup()
    plan = TrainPlan(dp=1, micro_batch=1, global_batch=1, seq_len=2048, framework=framework, fine_tuning=fine_tuning)
    assert estimate_step_time(model, system, plan, gpu).step_time_s == estimate_step_time(
        model, system, plan.model_copy(update={"compiled_model": True}), gpu).step_time_s
