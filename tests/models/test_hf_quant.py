"""HF safetensors checkpoints with a quantization_config (awq, gptq, compressed-tensors, modelopt
nvfp4/fp8, mxfp4): built here from the real SmolLM2 weights (its first two layers) with onecat's
codecs, written with the key names, dtypes and config fields the producing tools write, then
loaded through onecat.

Checks: every loaded weight decodes bit-exactly to the codec's decode of what was written; the
loaded model's logits equal those of a dense checkpoint holding the same decoded weights; bad
input fails naming the file, the tensor and the reason.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
from safetensors.torch import save_file

from onecat.kernels.weights import RowParts
from onecat.models.gguf_file import CheckpointError, GGUFFile
from onecat.models.loader import load_model
from onecat.quant import fp4, fp8, int4, int4_ct
from onecat.quant.formats import get_format

LAYERS = 2
GROUP = 64  # SmolLM2's hidden size 576 is not a multiple of 128
PROJ = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj"}
PROMPT = [1, 504, 3458, 282, 4649, 314, 253, 2391, 30]


def _unpermute(w: torch.Tensor, heads: int) -> torch.Tensor:
    """llama.cpp's converter permutes Q/K rows for GPT-J rope; undo it for an HF (NeoX) checkpoint."""
    n, k = w.shape
    return w.reshape(heads, n // heads // 2, 2, k).transpose(1, 2).reshape(n, k)


@pytest.fixture(scope="module")
def smollm2_parts(smollm2_path, smollm2_hf_tokenizer, tmp_path_factory):
    """(dense state dict of the first LAYERS layers, HF config, tokenizer directory)."""
    f = GGUFFile(smollm2_path)
    t = lambda name: torch.from_numpy(f.dequantize(name).copy())  # noqa: E731
    state = {"model.embed_tokens.weight": t("token_embd.weight").half(), "model.norm.weight": t("output_norm.weight")}
    for i in range(LAYERS):
        state[f"model.layers.{i}.input_layernorm.weight"] = t(f"blk.{i}.attn_norm.weight")
        state[f"model.layers.{i}.post_attention_layernorm.weight"] = t(f"blk.{i}.ffn_norm.weight")
        for g, hf in PROJ.items():
            w = t(f"blk.{i}.{g}.weight")
            if g in ("attn_q", "attn_k"):
                w = _unpermute(w, 9 if g == "attn_q" else 3)
            state[f"model.layers.{i}.{hf}.weight"] = w
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576,
           "intermediate_size": 1536, "num_hidden_layers": LAYERS, "num_attention_heads": 9,
           "num_key_value_heads": 3, "head_dim": 64, "vocab_size": 49152, "max_position_embeddings": 8192,
           "rms_norm_eps": 1e-5, "rope_theta": 100000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16"}
    tok = tmp_path_factory.mktemp("tok")
    smollm2_hf_tokenizer.save_pretrained(tok)
    return state, cfg, tok


# -- writers: one Linear -> the tensors (and config) the producing tool writes --------------------------
def _awq(w):
    return int4.awq_quantize(w, group_size=GROUP)


def _gptq(w, desc_act: bool, sym: bool):
    # act-order: one permutation per input (q/k/v and gate/up share theirs, as GPTQ derives it from X)
    perm = torch.randperm(w.shape[1], generator=torch.Generator().manual_seed(w.shape[1])) if desc_act else None
    return int4.gptq_quantize(w, bits=4, group_size=GROUP, sym=sym, perm=perm)


def _ct(w, sym: bool):
    return int4_ct.ct_quantize(w, num_bits=4, group_size=GROUP, symmetric=sym)


def _nvfp4(w):
    packed, sf, gs = fp4.nvfp4_quantize(w)
    return {"weight": packed, "weight_scale": sf.view(torch.float8_e4m3fn), "weight_scale_2": gs.reshape(()),
            "input_scale": torch.tensor(1.0)}


def _fp8(w):
    codes, scale = fp8.quantize(w, "e4m3fn", granularity="tensor")
    return {"weight": codes.view(torch.float8_e4m3fn), "weight_scale": scale.reshape(()).float(),
            "input_scale": torch.tensor(1.0)}


def _mxfp4(w):
    blocks, scales = fp4.mxfp4_quantize(w)
    return {"_blocks": blocks.reshape(w.shape[0], -1, 16), "_scales": scales}


def _ct_config(sym: bool) -> dict:
    weights = {"num_bits": 4, "type": "int", "symmetric": sym, "strategy": "group", "group_size": GROUP,
               "actorder": None, "dynamic": False, "observer": "minmax"}
    return {"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": None,
                                          "output_activations": None}},
            "ignore": ["lm_head"], "kv_cache_scheme": None}


FORMATS = {  # name: (writer, quantization_config, codec format, codec params)
    "awq": (_awq, {"quant_method": "awq", "bits": 4, "group_size": GROUP, "version": "gemm", "zero_point": True,
                   "modules_to_not_convert": None}, "awq", {"group_size": GROUP}),
    "gptq_sym": (lambda w: _gptq(w, False, True),
                 {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": False, "sym": True,
                  "damp_percent": 0.01, "true_sequential": True, "checkpoint_format": "gptq"},
                 "gptq", {"bits": 4, "group_size": GROUP}),
    "gptq_asym_actorder": (lambda w: _gptq(w, True, False),
                           {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": True, "sym": False,
                            "damp_percent": 0.01, "true_sequential": True, "checkpoint_format": "gptq"},
                           "gptq", {"bits": 4, "group_size": GROUP}),
    "ct_sym": (lambda w: _ct(w, True), _ct_config(True), "compressed_tensors_pack_quantized",
               {"num_bits": 4, "group_size": GROUP}),
    "ct_asym": (lambda w: _ct(w, False), _ct_config(False), "compressed_tensors_pack_quantized",
                {"num_bits": 4, "group_size": GROUP}),
    "nvfp4": (_nvfp4, {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                       "kv_cache_quant_algo": None, "exclude_modules": ["lm_head"]}, "nvfp4", {}),
    "fp8": (_fp8, {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": None,
                   "exclude_modules": ["lm_head"]}, "fp8_e4m3", {}),
    "mxfp4": (_mxfp4, {"quant_method": "mxfp4", "modules_to_not_convert": ["model.embed_tokens", "lm_head"]},
              "mxfp4", {}),
}


def _key(module: str, suffix: str) -> str:
    return module + suffix if suffix.startswith("_") else f"{module}.{suffix}"


def _decode(fmt: str, params: dict, tensors: dict, shape) -> torch.Tensor:
    """The codec's decode of what was written for one Linear."""
    t = dict(tensors)
    t.pop("input_scale", None)
    if "_blocks" in t:
        t = {"blocks": t["_blocks"].reshape(shape[0], -1), "scales": t["_scales"]}
    if "weight" in t and t["weight"].dtype == torch.float8_e4m3fn:
        t["weight"] = t["weight"].view(torch.uint8)
    return get_format(fmt).dequantize_tensors(t, **params)


def _write(d, state, cfg, tok, name: str, shards: int = 1):
    """A quantized checkpoint of `state` in format `name`; returns {module: decoded weight}."""
    writer, qcfg, fmt, params = FORMATS[name]
    out, decoded = {}, {}
    for k, v in state.items():
        module = k.removesuffix(".weight")
        if v.dim() == 2 and ".layers." in k:
            tensors = writer(v)
            out.update({_key(module, s): x.contiguous() for s, x in tensors.items()})
            decoded[module] = _decode(fmt, params, tensors, v.shape)
        else:
            out[k] = v.to(torch.bfloat16) if v.dim() == 1 else v
    _save(d, out, shards)
    (d / "config.json").write_text(json.dumps({**cfg, "quantization_config": qcfg}))
    for f in os.listdir(tok):
        shutil.copy(tok / f, d / f)
    return decoded


def _save(d, tensors: dict, shards: int) -> None:
    names = sorted(tensors)
    if shards == 1:
        save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
        return
    # round-robin: a module's qweight / qzeros / scales land in different shards
    files = {f"model-{i + 1:05d}-of-{shards:05d}.safetensors": names[i::shards] for i in range(shards)}
    for file, keys in files.items():
        save_file({k: tensors[k] for k in keys}, str(d / file), metadata={"format": "pt"})
    index = {"metadata": {"total_size": 0}, "weight_map": {k: f for f, keys in files.items() for k in keys}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))


def _dense_dir(d, state, cfg, tok, decoded: dict):
    out = {k: (decoded[k.removesuffix(".weight")] if k.removesuffix(".weight") in decoded else v)
           for k, v in state.items()}
    out = {k: (v.to(torch.bfloat16) if v.dim() == 1 else v) for k, v in out.items()}
    save_file({k: v.contiguous() for k, v in out.items()}, str(d / "model.safetensors"), metadata={"format": "pt"})
    (d / "config.json").write_text(json.dumps(cfg))
    for f in os.listdir(tok):
        shutil.copy(tok / f, d / f)


def _score(loaded) -> torch.Tensor:
    from onecat.serve.config import CacheConfig, EngineConfig
    from onecat.serve.model_runner import ModelRunner

    return ModelRunner(EngineConfig(cache=CacheConfig(num_blocks=8)), loaded=loaded, progress=False).score(PROMPT)


def _held(model, module: str):
    """The decode of what the loaded model holds for `module` (a part of a fused projection included)."""
    _, _, i, rest = module.split(".", 3)
    attr, part = model._layer_parts()[rest + ".weight"]
    w = getattr(model.layers[int(i)], attr)
    sizes = model._splits().get(attr)
    full = w.dequantize() if not isinstance(w, torch.Tensor) else w
    if sizes is None:
        return full
    start = sum(sizes[:part])
    return full[start:start + sizes[part]]


@pytest.mark.parametrize("name", list(FORMATS))
def test_quantized_checkpoint_loads_bit_exact_and_matches_dense(name, smollm2_parts, tmp_path):
    state, cfg, tok = smollm2_parts
    qdir, ddir = tmp_path / name, tmp_path / "dense"
    qdir.mkdir(), ddir.mkdir()
    decoded = _write(qdir, state, cfg, tok, name, shards=3 if name == "awq" else 1)
    loaded = load_model(str(qdir), progress=False)
    assert loaded.weight_format == FORMATS[name][2] and not loaded.dense
    held = loaded.model.weight_formats()
    assert held.get(f"codec_{FORMATS[name][2]}", 0) >= LAYERS * 2, held  # the format is kept
    for module, want in decoded.items():
        assert torch.equal(_held(loaded.model, module), want), module
    # per-tensor scales (NVFP4 weight_scale_2, FP8 weight_scale) differ between q, k and v: fusing them
    # would need requantizing, so they stay separate parts of one RowParts; every other format fuses its rows
    qkv = loaded.model.layers[0].qkv
    assert isinstance(qkv, RowParts) == (name in ("nvfp4", "fp8"))
    if isinstance(qkv, RowParts):
        assert qkv.part_rows == (576, 192, 192) and set(qkv.part_formats) == {f"codec_{FORMATS[name][2]}"}
    _dense_dir(ddir, state, cfg, tok, decoded)
    ref = _score(load_model(str(ddir), progress=False))
    ours = _score(loaded)
    assert (ours - ref).abs().max() <= 1e-5 * ref.abs().max()
    dense = _score(load_model(str(qdir), progress=False, dense=True))
    assert torch.equal(dense, ref)


@pytest.fixture(scope="module")
def awq_dir(smollm2_parts, tmp_path_factory):
    state, cfg, tok = smollm2_parts
    d = tmp_path_factory.mktemp("awq_sharded")
    _write(d, state, cfg, tok, "awq", shards=2)
    return d


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_garbled_header_and_missing_shard_are_named(awq_dir, tmp_path):
    d = _copy(awq_dir, tmp_path / "garbled")
    with open(d / "model-00001-of-00002.safetensors", "r+b") as f:
        f.write(b"\xff" * 16)
    with pytest.raises(CheckpointError, match=r"model-00001-of-00002.safetensors: unreadable safetensors file"):
        load_model(str(d), progress=False)
    d = _copy(awq_dir, tmp_path / "missing_shard")
    os.remove(d / "model-00002-of-00002.safetensors")
    with pytest.raises(CheckpointError, match=r"shard 'model-00002-of-00002.safetensors' is missing"):
        load_model(str(d), progress=False)


def test_missing_scales_tensor_is_named(awq_dir, tmp_path):
    from safetensors.torch import load_file

    d = _copy(awq_dir, tmp_path / "no_scales")
    victim = "model.layers.1.mlp.down_proj.scales"
    index = json.loads((d / "model.safetensors.index.json").read_text())
    shard = index["weight_map"].pop(victim)
    tensors = load_file(str(d / shard))
    del tensors[victim]
    save_file(tensors, str(d / shard), metadata={"format": "pt"})
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=r"safetensors: module 'model.layers.1.mlp.down_proj' \(awq\): "
                                              r"tensor 'model.layers.1.mlp.down_proj.scales' is missing"):
        load_model(str(d), progress=False)


def _with_config(src, dst, **changes):
    d = _copy(src, dst)
    cfg = json.loads((d / "config.json").read_text())
    cfg["quantization_config"].update(changes)
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def test_group_size_not_dividing_the_row_is_named(awq_dir, tmp_path):
    d = _with_config(awq_dir, tmp_path / "g128", group_size=128)  # 576 = 4.5 x 128
    with pytest.raises(CheckpointError, match=r"\.safetensors: module 'model.layers.0.self_attn.q_proj'.*"
                                              r"in_features 576 is not a multiple of group_size 128"):
        load_model(str(d), progress=False)


def test_unsupported_bits_and_unknown_method_are_named(awq_dir, tmp_path):
    d = _with_config(awq_dir, tmp_path / "bits3", bits=3)
    with pytest.raises(CheckpointError, match=r"config.json: quantization_config: awq bits=3 is not supported"):
        load_model(str(d), progress=False)
    d = _with_config(awq_dir, tmp_path / "unknown", quant_method="squeezellm")
    with pytest.raises(CheckpointError, match=r"config.json: quantization_config: quant_method 'squeezellm' "
                                              r"is not supported \(supported: awq, gptq"):
        load_model(str(d), progress=False)


def test_modelopt_hf_quant_config_json_is_read(smollm2_parts, tmp_path):
    """ModelOpt's own export: the scheme in hf_quant_config.json, no quantization_config in config.json."""
    state, cfg, tok = smollm2_parts
    d = tmp_path / "modelopt"
    d.mkdir()
    decoded = _write(d, state, cfg, tok, "nvfp4")
    (d / "config.json").write_text(json.dumps(cfg))
    (d / "hf_quant_config.json").write_text(json.dumps({
        "producer": {"name": "modelopt", "version": "0.29.0"},
        "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                         "exclude_modules": ["lm_head"]}}))
    loaded = load_model(str(d), progress=False)
    assert loaded.weight_format == "nvfp4"
    m = "model.layers.1.mlp.down_proj"
    assert torch.equal(_held(loaded.model, m), decoded[m])
