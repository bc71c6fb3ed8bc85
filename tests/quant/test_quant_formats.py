"""The onecat.quant.formats registry: consistent data, uniform codec calls, clear errors."""

import importlib

import numpy as np
import pytest
import torch

import gguf
from gguf.constants import GGML_QUANT_SIZES

from onecat.quant import FORMATS, QuantFormat, get_format, ggml
from onecat.quant import formats as formats_mod

EXPECTED = {
    "F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
    "IQ4_NL", "IQ4_XS", "IQ3_S", "IQ3_XXS", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3_block128", "nvfp4", "mxfp4",
    "awq", "gptq", "gptq_v2", "compressed_tensors_pack_quantized",
}


def test_registry_contents_are_consistent():
    assert set(FORMATS) == EXPECTED
    assert FORMATS is formats_mod.FORMATS
    for name, f in FORMATS.items():
        assert isinstance(f, QuantFormat) and f.name == name
        assert f.family in {"gguf", "fp8", "fp4", "int"}
        assert f.tensor_keys and f.layout and f.bits_per_weight > 0
        assert not set(f.tensor_keys) & set(f.optional_keys)
        mod = importlib.import_module(f.module)
        assert mod.__doc__ and len(mod.__doc__) > 200          # the bit layout is documented there
        if f.family == "gguf":
            qt = gguf.GGMLQuantizationType[name]
            assert f.ggml_type == qt.value
            assert (f.block_size, f.bytes_per_block) == GGML_QUANT_SIZES[qt]
            assert f.bits_per_weight == 8 * f.bytes_per_block / f.block_size
    with pytest.raises(TypeError):
        FORMATS["new"] = FORMATS["awq"]                        # read-only mapping


def test_get_format_lookup_and_errors():
    assert get_format("q4_k") is FORMATS["Q4_K"]
    assert get_format("pack-quantized") is FORMATS["compressed_tensors_pack_quantized"]
    assert get_format("FP8") is FORMATS["fp8_e4m3"]
    with pytest.raises(ValueError, match=r"unknown quantization format 'int3_magic'; known formats: F32, "):
        get_format("int3_magic")


@pytest.mark.parametrize("name", sorted(n for n, f in FORMATS.items() if f.quantize is not None))
def test_uniform_quantize_dequantize(name):
    f = FORMATS[name]
    g = torch.Generator().manual_seed(0)
    w = torch.randn(32, 256, generator=g)
    tensors = f.quantize_tensor(w, name="layer.weight")
    assert set(tensors) <= set(f.tensor_keys) | set(f.optional_keys)
    assert set(f.tensor_keys) <= set(tensors)
    kw = {"shape": w.shape} if f.family == "gguf" else {}
    y = f.dequantize_tensors(tensors, name="layer.weight", **kw)
    assert y.dtype == torch.float32 and y.shape == w.shape
    rel = float((y - w).norm() / w.norm())
    limit = {"F32": 0, "F16": 1e-3, "BF16": 5e-3, "Q8_0": 0.01, "fp8_e4m3": 0.05, "fp8_e5m2": 0.1,
             "fp8_e4m3_block128": 0.05, "Q5_0": 0.05, "Q5_1": 0.05}.get(name, 0.15)
    assert rel <= limit, (name, rel)


DEQ_ONLY_SCALE_OFFSETS = {"Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208],
                          "IQ4_NL": [0], "IQ4_XS": [0], "IQ3_S": [0], "IQ3_XXS": [0]}


@pytest.mark.parametrize("name", sorted(DEQ_ONLY_SCALE_OFFSETS))
def test_gguf_dequant_only_entries(name):
    f = FORMATS[name]
    assert f.quantize is None
    with pytest.raises(ValueError, match=rf"'w' \({name}\): no standard quantizer"):
        f.quantize_tensor(torch.zeros(256), name="w")
    rng = np.random.default_rng(0)
    n_blocks = 2 * 256 // f.block_size
    raw = rng.integers(0, 256, size=(n_blocks, f.bytes_per_block), dtype=np.uint8)
    for off in DEQ_ONLY_SCALE_OFFSETS[name]:             # finite fp16 scales
        raw[:, off:off + 2] = rng.standard_normal((n_blocks, 1)).astype(np.float16).view(np.uint8)
    raw = raw.reshape(2, -1)
    ref = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[name])
    ours = f.dequantize_tensors({"raw": torch.from_numpy(raw)}, shape=(2, 256))
    assert np.array_equal(ours.numpy().view(np.uint32), ref.view(np.uint32))


def test_dequantize_tensors_missing_key():
    with pytest.raises(ValueError, match=r"'model.layers.0.mlp.up_proj' \(gptq\): missing checkpoint tensor\(s\) "
                                         r"\['qzeros'\]"):
        FORMATS["gptq"].dequantize_tensors({"qweight": torch.zeros(1), "scales": torch.zeros(1)},
                                           name="model.layers.0.mlp.up_proj")


def test_optional_keys_are_passed_through():
    g = torch.Generator().manual_seed(6)
    w = torch.randn(16, 64, generator=g)
    f = FORMATS["gptq"]
    perm = torch.randperm(64, generator=g)
    t = f.quantize_tensor(w, group_size=16, perm=perm)
    y = f.dequantize_tensors(t)
    t_no_gidx = {k: v for k, v in t.items() if k != "g_idx"}
    y_wrong = f.dequantize_tensors(t_no_gidx)               # contiguous groups: a different weight
    assert not torch.equal(y, y_wrong)
    assert torch.equal(y, ggml_free_gptq_reference(t))


def ggml_free_gptq_reference(t):
    from onecat.quant import int4

    return int4.gptq_dequantize(t["qweight"], t["qzeros"], t["scales"], t["g_idx"])


def test_gguf_registry_matches_ggml_module():
    for name, t in ggml.GGML_TYPES.items():
        f = FORMATS[name]
        assert (f.block_size, f.bytes_per_block, f.ggml_type) == (t.block_size, t.type_size, t.type_id)
