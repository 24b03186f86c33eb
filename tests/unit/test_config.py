"""ModelConfig parsing and every ConfigError path (each message must name the culprit)."""

from __future__ import annotations

import json

import pytest

from quickmoe.config import EngineConfig, ModelConfig
from quickmoe.engine.sampling_params import SamplingParams
from quickmoe.errors import ConfigError, RequestError


def gpt_oss_20b_config() -> dict:
    """config.json of the published gpt-oss-20b (fields quickmoe reads)."""
    return {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 201088,
        "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 24, "num_attention_heads": 64,
        "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32, "num_experts_per_tok": 4,
        "experts_per_token": 4, "sliding_window": 128, "rms_norm_eps": 1e-05, "swiglu_limit": 7.0,
        "layer_types": ["sliding_attention", "full_attention"] * 12, "max_position_embeddings": 131072,
        "rope_theta": 150000, "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                                               "original_max_position_embeddings": 4096, "rope_type": "yarn",
                                               "truncate": False},
        "attention_bias": True, "tie_word_embeddings": False, "eos_token_id": 200002, "pad_token_id": 199999,
        "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]},
    }


def test_parses_published_20b_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(gpt_oss_20b_config()))
    cfg = ModelConfig.from_dir(tmp_path)
    assert cfg.num_hidden_layers == 24 and cfg.num_local_experts == 32 and cfg.num_experts_per_tok == 4
    assert cfg.layer_window(0) == 128 and cfg.layer_window(1) is None
    assert cfg.rope.rope_type == "yarn" and cfg.rope.factor == 32.0 and cfg.rope.truncate is False
    assert cfg.rope.rope_theta == 150000.0
    assert abs(cfg.rope.cos_sin_scale - (0.1 * 3.4657359027997265 + 1)) < 1e-12  # 0.1 ln 32 + 1
    assert cfg.is_quantized("model.layers.3.mlp.experts")
    assert not cfg.is_quantized("model.layers.3.self_attn") and not cfg.is_quantized("lm_head")
    assert cfg.eos_token_ids == (200002,) and cfg.num_kv_groups == 8


def test_rope_parameters_spelling_equals_rope_scaling_spelling():
    raw = gpt_oss_20b_config()
    old = ModelConfig.from_dict(raw)
    new_raw = dict(raw)
    new_raw["rope_parameters"] = dict(raw.pop("rope_scaling"), rope_theta=raw.pop("rope_theta"))
    del new_raw["rope_scaling"], new_raw["rope_theta"]
    assert ModelConfig.from_dict(new_raw).rope == old.rope


def test_absent_quantization_means_bf16_experts_and_layer_types_default():
    raw = gpt_oss_20b_config()
    del raw["quantization_config"], raw["layer_types"]
    cfg = ModelConfig.from_dict(raw)
    assert cfg.quantization is None and not cfg.is_quantized("model.layers.0.mlp.experts")
    assert cfg.layer_types[:3] == ("sliding_attention", "full_attention", "sliding_attention")


def test_modules_to_not_convert_can_exclude_experts():
    raw = gpt_oss_20b_config()
    raw["quantization_config"]["modules_to_not_convert"].append("model.layers.*.mlp.experts")
    assert not ModelConfig.from_dict(raw).is_quantized("model.layers.0.mlp.experts")


@pytest.mark.parametrize("mutate, culprits", [
    (lambda r: r.update(architectures=["LlamaForCausalLM"]), ["architectures", "LlamaForCausalLM",
                                                              "GptOssForCausalLM"]),
    (lambda r: r.pop("hidden_size"), ["hidden_size", "missing"]),
    (lambda r: r.update(hidden_size="2880"), ["hidden_size", "'2880'", "integer"]),
    (lambda r: r.update(num_hidden_layers=0), ["num_hidden_layers", "0", "positive"]),
    (lambda r: r.update(num_hidden_layers=True), ["num_hidden_layers", "True"]),
    (lambda r: r.update(num_key_value_heads=7), ["num_key_value_heads", "7", "divisor"]),
    (lambda r: r.update(num_experts_per_tok=64, experts_per_token=64), ["num_experts_per_tok", "64"]),
    (lambda r: r.update(layer_types=["sliding_attention"] * 3), ["layer_types", "24 entries"]),
    (lambda r: r["layer_types"].__setitem__(5, "local"), ["layer_types[5]", "'local'", "full_attention"]),
    (lambda r: r.update(rope_scaling={"rope_type": "ntk"}), ["rope_scaling.rope_type", "'ntk'", "yarn"]),
    (lambda r: r["rope_scaling"].pop("factor"), ["factor", "missing", "rope_scaling"]),
    (lambda r: r.update(rope_theta=-1), ["rope_theta", "-1"]),
    (lambda r: r.update(quantization_config={"quant_method": "gptq"}),
     ["quantization_config.quant_method", "'gptq'", "mxfp4"]),
    (lambda r: r["quantization_config"].update(modules_to_not_convert="lm_head"),
     ["modules_to_not_convert", "list"]),
    (lambda r: r.update(hidden_size=2890), ["hidden_size", "2890", "multiple of 32"]),
    (lambda r: r.update(eos_token_id=300000), ["eos_token_id", "300000"]),
    (lambda r: r.update(eos_token_id="</s>"), ["eos_token_id", "'</s>'"]),
    (lambda r: r.update(rms_norm_eps="tiny"), ["rms_norm_eps", "'tiny'", "number"]),
])
def test_invalid_config_names_field_value_and_expectation(mutate, culprits):
    assert_config_error(gpt_oss_20b_config(), mutate, culprits)


def assert_config_error(raw: dict, mutate, culprits: list[str]) -> None:
    """`mutate(raw)` makes a config that ModelConfig refuses with a message naming the file and every culprit."""
    mutate(raw)
    with pytest.raises(ConfigError) as err:
        ModelConfig.from_dict(raw, source="dir/config.json")
    msg = str(err.value)
    assert "dir/config.json" in msg
    for word in culprits:
        assert word in msg, f"{word!r} not in {msg!r}"


def test_config_file_errors_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match="not a directory"):
        ModelConfig.from_dir(tmp_path / "nope")
    with pytest.raises(ConfigError, match=r"config\.json: missing"):
        ModelConfig.from_dir(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"config\.json: not valid JSON"):
        ModelConfig.from_dir(tmp_path)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="expected a JSON object"):
        ModelConfig.from_dir(tmp_path)


@pytest.mark.parametrize("kwargs, culprit", [
    (dict(device="tpu"), "'tpu'"), (dict(dtype="fp8"), "'fp8'"), (dict(max_model_len=1), "max_model_len"),
    (dict(max_num_seqs=0), "max_num_seqs"), (dict(block_size=24), r"'block_size' = 24: expected one of \[16"),
    (dict(max_num_batched_tokens=0), "max_num_batched_tokens"), (dict(kv_cache_memory=-1), "kv_cache_memory"),
    (dict(gpu_memory_utilization=1.5), "gpu_memory_utilization"), (dict(num_kv_blocks=True), "num_kv_blocks"),
    (dict(attention_kernels="cuda"), "'attention_kernels' = 'cuda'"), (dict(max_model_len=True), "max_model_len"),
    (dict(kernel_precompile="on"), r"'kernel_precompile' = 'on': expected one of \['auto', 'off'\]"),
    (dict(cuda_graph_sizes=()), r"'cuda_graph_sizes' = \(\): expected None or a non-empty list"),
    (dict(cuda_graph_sizes=[1, 0]), r"'cuda_graph_sizes' = \[1, 0\]"),
    (dict(cuda_graph_sizes=[2.0]), "cuda_graph_sizes"),
    (dict(cuda_graph_sizes=[8, 300]), r"'cuda_graph_sizes' = \[8, 300\]: batch size 300 .* max_num_seqs = 256"),
])
def test_engine_config_rejects_invalid_options(kwargs, culprit):
    with pytest.raises(ConfigError, match=culprit):
        EngineConfig(**kwargs)


def test_cuda_graph_sizes_are_kept_sorted_and_distinct():
    assert EngineConfig(cuda_graph_sizes=[64, 8, 8, 1]).cuda_graph_sizes == (1, 8, 64)
    assert EngineConfig().cuda_graph_sizes is None


@pytest.mark.parametrize("kwargs, culprit", [
    (dict(max_tokens=0), "max_tokens"), (dict(temperature=-0.5), "temperature"), (dict(top_p=0), "top_p"),
    (dict(top_p=1.5), "top_p"), (dict(seed="x"), "seed"), (dict(stop_token_ids=[-1]), "stop_token_ids"),
])
def test_sampling_params_reject_invalid_values(kwargs, culprit):
    with pytest.raises(RequestError, match=culprit):
        SamplingParams(**kwargs)


def qwen3_30b_config() -> dict:
    from quickmoe.checkpoint.presets import base_config

    return base_config("qwen3-30b-a3b")


def test_parses_published_qwen3_and_mixtral_configs():
    from quickmoe.checkpoint.presets import base_config

    qwen = ModelConfig.from_dict(qwen3_30b_config())
    assert (qwen.architecture, qwen.num_local_experts, qwen.num_experts_per_tok) == ("Qwen3MoeForCausalLM", 128, 8)
    assert (qwen.hidden_size, qwen.moe_intermediate_size, qwen.intermediate_size, qwen.head_dim) == (2048, 768, 6144,
                                                                                                     128)
    assert qwen.norm_topk_prob and not qwen.attention_bias and qwen.rms_norm_eps == 1e-6
    assert qwen.sliding_window is None and set(qwen.layer_types) == {"full_attention"}
    assert qwen.rope.rope_type == "default" and qwen.rope.rope_theta == 1e6 and qwen.rope.cos_sin_scale == 1.0
    assert all(qwen.is_moe_layer(i) for i in range(48)) and qwen.quantization is None
    mixtral = ModelConfig.from_dict(base_config("mixtral-8x7b"))
    assert (mixtral.num_local_experts, mixtral.num_experts_per_tok, mixtral.moe_intermediate_size) == (8, 2, 14336)
    assert mixtral.head_dim == 128 and mixtral.norm_topk_prob and not mixtral.attention_bias
    assert mixtral.sliding_window is None and mixtral.eos_token_ids == (2,)


def test_qwen3_sliding_window_dense_layers_and_sparse_step():
    raw = {**qwen3_30b_config(), "num_hidden_layers": 4, "use_sliding_window": True, "sliding_window": 64,
           "mlp_only_layers": [0], "decoder_sparse_step": 2}
    cfg = ModelConfig.from_dict(raw)
    assert cfg.layer_types == ("sliding_attention",) * 4 and cfg.layer_window(3) == 64
    assert [cfg.is_moe_layer(i) for i in range(4)] == [False, True, False, True]
    assert ModelConfig.from_dict({**raw, "use_sliding_window": False}).layer_window(0) is None
    mixtral = {**raw, "architectures": ["MixtralForCausalLM"], "num_local_experts": 8, "sliding_window": 32}
    assert ModelConfig.from_dict(mixtral).layer_types == ("sliding_attention",) * 4


def test_quantization_configs_of_qwen_fp8_and_modelopt_nvfp4(tmp_path):
    raw = {**qwen3_30b_config(), "quantization_config": {
        "activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128],
        "modules_to_not_convert": ["lm_head", "model.layers.*.mlp.gate"]}}
    fp8 = ModelConfig.from_dict(raw)
    assert fp8.quantization.scheme == "fp8" and fp8.quantization.weight_block_size == (128, 128)
    assert fp8.quant_scheme("model.layers.3.mlp.experts") == "fp8"
    assert fp8.quant_scheme("model.layers.3.mlp.gate") is None and fp8.quant_scheme("lm_head") is None
    assert fp8.quant_scheme("model.layers.3.mlp.gate_proj") == "fp8"  # a pattern is not a prefix of another name
    (tmp_path / "config.json").write_text(json.dumps(qwen3_30b_config()))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "modelopt"}, "quantization": {
        "quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
        "exclude_modules": ["lm_head", "model.layers.*.self_attn*", "model.layers.*.mlp.gate"]}}))
    nvfp4 = ModelConfig.from_dir(tmp_path)
    assert nvfp4.quantization.scheme == "nvfp4" and nvfp4.quantization.group_size == 16
    assert nvfp4.quant_scheme("model.layers.0.mlp.experts") == "nvfp4"
    assert nvfp4.quant_scheme("model.layers.0.self_attn.q_proj") is None


@pytest.mark.parametrize("mutate, culprits", [
    (lambda r: r.update(architectures=["DeepseekV3ForCausalLM"]),
     ["architectures", "DeepseekV3ForCausalLM", "GptOssForCausalLM", "Qwen3MoeForCausalLM", "MixtralForCausalLM"]),
    (lambda r: r.update(quantization_config={"quant_method": "mxfp4"}),
     ["'mxfp4'", "Qwen3MoeForCausalLM", "['fp8', 'nvfp4']"]),
    (lambda r: r.update(quantization_config={"quant_method": "awq"}), ["quant_method", "'awq'", "'modelopt'"]),
    (lambda r: r.update(quantization_config={"quant_method": "modelopt", "quant_algo": "FP8"}),
     ["quant_algo", "'FP8'", "NVFP4"]),
    (lambda r: r.update(quantization_config={"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 32}),
     ["group_size", "32", "16"]),
    (lambda r: r.update(quantization_config={"quant_method": "fp8", "activation_scheme": "static",
                                             "weight_block_size": [128, 128]}), ["activation_scheme", "'static'"]),
    (lambda r: r.update(quantization_config={"quant_method": "fp8"}), ["weight_block_size", "None"]),
    (lambda r: r.update(moe_intermediate_size=100, quantization_config={
        "quant_method": "fp8", "weight_block_size": [128, 128]}), ["moe_intermediate_size", "100", "128"]),
    (lambda r: r.update(hidden_act="gelu"), ["hidden_act", "'gelu'", "silu"]),
    (lambda r: r.update(mlp_only_layers=[48]), ["mlp_only_layers", "[48]"]),
    (lambda r: r.pop("moe_intermediate_size"), ["moe_intermediate_size", "missing"]),
])
def test_invalid_qwen3_config_names_field_value_and_expectation(mutate, culprits):
    assert_config_error(qwen3_30b_config(), mutate, culprits)
