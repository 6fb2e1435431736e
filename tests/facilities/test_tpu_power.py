"""Power of TPU pods: the one TPU power figure read (Ironwood, ~10 MW per 9,216-chip pod, Hot Chips 2025
as reported, SECONDARY) and the refusal, with its reason, where no figure is published (v5e, v5p, v6e)."""

from __future__ import annotations

import pytest

from gpuplan.catalog import load_catalog
from gpuplan.errors import InputError
from gpuplan.facilities.power import node_overhead_max_w, node_power_w
from gpuplan.interfaces.api import train


def test_ironwood_pod_power_by_hand():
    c = load_catalog()
    pod, chip = c.system("tpu7x-pod"), c.gpu("tpu7x")
    # 10 MW / 9,216 chips = 1,085.07 W per chip (rounded to 1,085 in the catalog); 4 chips per host
    assert chip.tdp_w == pytest.approx(10e6 / 9216, abs=0.5)
    assert node_power_w(pod, chip, 1.0) == pytest.approx(4 * 10e6 / 9216, abs=2.0)
    assert node_overhead_max_w(pod, chip) == 0.0  # the pod figure already holds hosts and network


def test_train_on_tpu_pods_energy_where_power_is_known():
    r = train("llama-3-70b", system="tpu7x-pod", gpus=256).to_dict()
    assert r["energy_mwh"] > 0
    v6e = train("llama-3-70b", system="tpu-v6e-pod", gpus=256).to_dict()
    assert v6e["energy_mwh"] is None and "publishes no power figure" in " ".join(v6e.get("notes", [])) + str(v6e)


def test_power_without_a_figure_names_the_remedy():
    c = load_catalog()
    with pytest.raises(InputError, match="tdp_w in a --catalog file"):
        node_power_w(c.system("tpu-v6e-pod"), c.gpu("tpu-v6e"), 1.0)


def test_plan_on_a_pod_without_power_figures_answers_with_the_reason():
    from gpuplan.interfaces.api import plan

    d = plan("llama-3-70b", system="tpu-v6e-pod", gpus=256, tokens="100B").to_dict()
    assert d["days"] > 0 and d["gpus"] == 256
    assert d["power"] is None and d["racks"] is None and d["tco"] is None and d["workload_cost_usd"] is None
    assert "publishes no power figure" in d["power_reason"] and d["cost_reason"] == d["power_reason"]
    # dc power still refuses: sizing power is its whole answer
    from gpuplan.interfaces.api import dc_power

    with pytest.raises(InputError, match="tdp_w"):
        dc_power("tpu-v6e-pod", 32)
