"""PEFT adapter configs: `gpuplan model show ADAPTER_CONFIG` and `model show BASE --adapter FILE`,
exact adapter parameters, the one resolver of Hugging Face ids, and bad input (one line, exit 2)."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuplan import api
from gpuplan.cli.main import app
from gpuplan.errors import InputError
from gpuplan.models import load_model
from gpuplan.models.adapter_config import adapter_from_dict
from gpuplan.models.bundled import bundled_name_for_hub_id
from gpuplan.models.hub_ids import hub_key
from gpuplan.workloads.training.lora import adapter_counts

runner = CliRunner()


def _write(tmp_path, **fields):
    cfg = {"peft_type": "LORA", "base_model_name_or_path": "meta-llama/Llama-2-7b-hf", "r": 8, "lora_alpha": 16,
           "target_modules": ["q_proj", "v_proj"], "task_type": "CAUSAL_LM", **fields}
    path = tmp_path / "adapter_config.json"
    path.write_text(json.dumps(cfg))
    return path


def _counts(model, **fields):
    cfg = {"peft_type": "LORA", "r": 8, "target_modules": ["q_proj", "v_proj"], **fields}
    return adapter_counts(load_model(model), adapter_from_dict(cfg, "test"))


def test_llama2_7b_q_v_rank_8(tmp_path):
    # 32 layers x 2 projections x r (in + out) = 32 x 2 x 8 x (4096 + 4096) = 4,194,304; all params
    # 6,738,415,616 (Llama-2-7B safetensors) + 4,194,304 = 6,742,609,920: the figures PEFT's
    # print_trainable_parameters prints for this config (trainable% 0.0622)
    r = runner.invoke(app, ["model", "show", str(_write(tmp_path)), "--json"])
    assert r.exit_code == 0, r.output
    a = json.loads(r.stdout)["adapter"]
    assert a["base_model"] == "llama-2-7b"
    assert a["trainable_params"] == 4_194_304 and a["all_params"] == 6_742_609_920
    assert a["trainable_pct"] == pytest.approx(0.0622, abs=5e-5)
    assert a["by_projection"] == {"q_proj": {"modules": 32, "params": 2_097_152}, "v_proj": {"modules": 32, "params": 2_097_152}}
    # the same adapter given with its base (by bundled name, by Hub id, and the folder holding it)
    for base in ("llama-2-7b", "meta-llama/Llama-2-7b-hf"):
        r = runner.invoke(app, ["model", "show", base, "--adapter", str(tmp_path), "--json"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["adapter"]["trainable_params"] == 4_194_304


def test_all_linear_rank_pattern_layers_dora_modules_to_save():
    # all-linear on Llama-2-7B, r 16: per layer q,k,v,o 4 x 16 x 8192 = 524,288, gate+up 2 x 16 x
    # 15,104 = 483,328, down 16 x 15,104 = 241,664 -> 1,249,280 x 32 = 39,976,960 (lm_head left out)
    assert _counts("llama-2-7b", r=16, target_modules="all-linear").trainable_params == 39_976_960
    # layers_to_transform [0, 1]: 2 layers x 2 x 8 x 8192 = 262,144
    assert _counts("llama-2-7b", layers_to_transform=[0, 1]).trainable_params == 262_144
    # rank_pattern {"v_proj": 4}: q 32 x 8 x 8192 + v 32 x 4 x 8192 = 2,097,152 + 1,048,576
    assert _counts("llama-2-7b", rank_pattern={"v_proj": 4}).trainable_params == 3_145_728
    # DoRA adds one magnitude per output row: 64 modules x 4096 = 262,144
    c = _counts("llama-2-7b", use_dora=True)
    assert c.dora_magnitude_params == 262_144 and c.trainable_params == 4_194_304 + 262_144
    # modules_to_save lm_head: a trainable copy of the 32,000 x 4096 head = 131,072,000
    assert _counts("llama-2-7b", modules_to_save=["lm_head"]).modules_to_save_params == 131_072_000
    # a regular expression is matched against the full module name: layer 3's q_proj only
    assert _counts("llama-2-7b", target_modules=r"model\.layers\.3\.self_attn\.q_proj").trainable_params == 65_536


def test_moe_and_fused_naming():
    # Mixtral 8x7B experts are block_sparse_moe.experts.<e>.w1 (4096 -> 14336): 32 layers x 8 experts
    # x 8 x (4096 + 14336) = 37,748,736
    assert _counts("mixtral-8x7b", target_modules=["w1"]).trainable_params == 37_748_736
    # Phi-3-mini fuses q, k and v into qkv_proj (3072 -> 9216): 32 x 8 x (3072 + 9216) = 3,145,728
    assert _counts("phi-3-mini", target_modules=["qkv_proj"]).trainable_params == 3_145_728


def test_mismatching_base_is_one_line_exit_2(tmp_path):
    path = _write(tmp_path)
    r = runner.invoke(app, ["model", "show", "llama-2-70b", "--adapter", str(path)])
    assert r.exit_code == 2
    assert "trained on meta-llama/Llama-2-7b-hf" in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1
    unknown = _write(tmp_path, base_model_name_or_path="someone/not-bundled-7b")
    r = runner.invoke(app, ["model", "show", str(unknown)])
    assert r.exit_code == 2 and "not a bundled model's Hugging Face id" in r.output
    # an unknown base is accepted when the base is given (nothing to compare against)
    assert api.model_show("llama-2-7b", adapter=str(unknown)).to_dict()["adapter"]["trainable_params"] == 4_194_304


@pytest.mark.parametrize("fields, message", [
    ({"peft_type": "IA3"}, "peft_type 'IA3' is not modelled"),
    ({"r": 0}, "r must be a whole number"),
    ({"target_modules": ["no_such_proj"]}, "match no linear module"),
    ({"target_modules": "(["}, "not a valid regular expression"),
    ({"target_modules": None}, "target_modules is empty"),
    ({"bias": "some"}, "bias must be none, all or lora_only"),
    # torch.nn.Dropout refuses p outside [0, 1]; JSON's NaN / Infinity are not numbers a config can mean
    ({"lora_dropout": 1.5}, "lora_dropout must be between 0 and 1"),
    ({"lora_dropout": -0.1}, "lora_dropout must be between 0 and 1"),
    ({"lora_alpha": float("nan")}, "NaN is not a number JSON allows"),
])
def test_bad_adapter_configs(tmp_path, fields, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace("[", r"\[")):
        api.model_show("llama-2-7b", adapter=str(_write(tmp_path, **fields)))


def test_hub_ids_resolve_once():
    # the bundled file meta-llama--Llama-2-7b-hf.json and its source URL name the same model
    for text in ("meta-llama/Llama-2-7b-hf", "META-LLAMA/llama-2-7b-hf", "meta-llama--Llama-2-7b-hf",
                 "https://huggingface.co/meta-llama/Llama-2-7b-hf", "models--meta-llama--Llama-2-7b-hf",
                 "https://huggingface.co/meta-llama/Llama-2-7b-hf/tree/main"):
        assert bundled_name_for_hub_id(text) == "llama-2-7b", text
    assert bundled_name_for_hub_id("llama-2-7b") is None  # a bundled name is not a repo id
    assert bundled_name_for_hub_id("/abs/path/to/model") is None
    from gpuplan.interfaces.deploy.launch import hub_id

    assert hub_id(load_model("llama-2-7b")) == "meta-llama/Llama-2-7b-hf"
    assert load_model("meta-llama/Llama-2-7b-hf").name == "llama-2-7b"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_hub_key_never_raises(text):
    key = hub_key(text)
    assert key is None or (key.count("/") == 1 and key == key.lower())


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["r", "lora_alpha", "target_modules", "layers_to_transform", "rank_pattern",
                                        "bias", "modules_to_save", "lora_dropout", "exclude_modules"]),
                       st.one_of(st.none(), st.integers(-3, 70000), st.text(max_size=8), st.booleans(),
                                 st.lists(st.text(max_size=6), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(-2, 9), max_size=2))))
def test_any_adapter_dict_is_read_or_refused_by_name(fields):
    try:
        cfg = adapter_from_dict({"peft_type": "LORA", **fields}, "fuzz")
    except InputError as exc:
        assert "adapter config 'fuzz'" in str(exc) and "\n" not in str(exc)
        return
    c = adapter_counts(load_model("gpt2"), cfg)
    assert c.trainable_params >= 0 and c.lora_params == sum(v["params"] for v in c.by_projection.values()) - c.dora_magnitude_params - c.lora_bias_params
