"""The engine's default route keeps GGUF weights quantized: what each projection holds, that every
layout decodes bit-exactly to the GGUF values, and that the model matches the dense route."""

from __future__ import annotations

import pytest
import torch

from onecat.models.gguf_file import GGUFFile
from onecat.models.loader import load_model
from onecat.quant import ggml
from onecat.quant.linear_method import process_weights_after_loading
from onecat.kernels import ops
from onecat.quant.linear_weights import ByteCodeWeight, GGMLWeight, cat_rows

PROMPT = [1, 504, 3458, 282, 4649, 314, 253, 2391, 30]


@pytest.fixture(scope="module")
def gguf(smollm2_path):
    return GGUFFile(smollm2_path)


def _ggml(f: GGUFFile, name: str) -> GGMLWeight:
    info = f.tensors[name]
    return GGMLWeight(torch.from_numpy(f.raw(name).copy()).reshape(info.shape[0], -1), info.ggml_type, info.shape)


@pytest.mark.parametrize("name", ["blk.0.attn_q.weight", "blk.7.ffn_down.weight", "token_embd.weight"])
def test_real_tensors_decode_bit_exact_in_every_layout(gguf, name):
    w = _ggml(gguf, name)
    ref = torch.from_numpy(gguf.dequantize(name))
    assert torch.equal(w.dequantize(), ref)
    b = ByteCodeWeight.from_ggml(w)
    assert torch.equal(b.dequantize(), ref)
    rows = torch.tensor([0, 5, w.shape[0] - 1])
    assert torch.equal(ops.embedding(b, rows, torch.float32), ref[rows])
    assert torch.equal(w.select_rows(slice(3, 40)).dequantize(), ref[3:40])


@pytest.mark.parametrize("qtype", ["Q4_0", "Q5_0", "Q5_1", "Q8_0"])
def test_other_block_types_decode_bit_exact(gguf, qtype):
    """Real SmolLM2 weights requantized by the ggml reference quantizer into the other 32-blocks."""
    x = torch.from_numpy(gguf.dequantize("blk.3.ffn_gate.weight"))[:256]
    x[0] = 0.0  # an all-zero row (d = 0)
    raw = ggml.quantize(x, qtype)
    ref = ggml.dequantize(raw, tuple(x.shape), qtype)
    w = GGMLWeight(raw, qtype, tuple(x.shape))
    assert torch.equal(w.dequantize(), ref)
    assert torch.equal(ByteCodeWeight.from_ggml(w).dequantize(), ref)


def test_fusing_rows_keeps_values_and_refuses_mixed_types(gguf):
    q, k, v = (_ggml(gguf, f"blk.2.attn_{p}.weight") for p in "qkv")
    fused = cat_rows([q, k, v])
    assert fused.shape == (576 + 2 * 192, 576) and fused.ggml_type == "Q4_1"
    assert torch.equal(fused.dequantize(), torch.cat([q.dequantize(), k.dequantize(), v.dequantize()]))
    x = torch.from_numpy(gguf.dequantize("blk.2.attn_v.weight"))
    v8 = GGMLWeight(ggml.quantize(x, "Q8_0"), "Q8_0", tuple(x.shape))  # Gemma3's attn_v is Q8_0, q/k Q5_0
    assert cat_rows([q, k, v8]) is None


def test_default_route_keeps_the_format_and_matches_dense(smollm2_path):
    quant = load_model(smollm2_path, progress=False)
    dense = load_model(smollm2_path, progress=False, dense=True)
    assert not quant.dense and dense.dense
    held = quant.model.weight_formats()
    # CPU: 4 fused projections per layer in Q4_1 codes, the tied Q8_0 embedding / LM head
    assert held == {"bytecode_q4_1": 4 * 30, "bytecode_q8_0": 1}, held
    layer = quant.model.layers[0]
    assert layer.qkv.shape == (960, 576) and layer.gate_up.shape == (3072, 576)
    assert quant.model.lm_head is quant.model.embed
    assert isinstance(dense.model.layers[0].qkv, torch.Tensor)
    assert torch.equal(layer.qkv.dequantize(), dense.model.layers[0].qkv)

    from onecat.serve.config import CacheConfig, EngineConfig
    from onecat.serve.model_runner import ModelRunner

    cfg = EngineConfig(cache=CacheConfig(num_blocks=8))
    lq = ModelRunner(cfg, loaded=quant, progress=False).score(PROMPT)
    ld = ModelRunner(cfg, loaded=dense, progress=False).score(PROMPT)
    assert (lq - ld).abs().max() <= 1e-5 * ld.abs().max()  # same weights; only summation order differs


def test_cpu_keeps_k_quants_as_blocks():
    x = torch.randn(8, 256) * 0.02
    w = GGMLWeight(torch.zeros(8, 144, dtype=torch.uint8), "Q4_K", (8, 256))
    assert isinstance(process_weights_after_loading(w, "cpu"), GGMLWeight)
    q8 = GGMLWeight(ggml.quantize(x, "Q8_0"), "Q8_0", (8, 256))
    assert isinstance(process_weights_after_loading(q8, "cpu"), ByteCodeWeight)


@pytest.mark.gpu
def test_cuda_route_repacks_once_into_the_packed_layout(gguf):
    w = _ggml(gguf, "blk.0.ffn_up.weight")
    p = process_weights_after_loading(w, "cuda")
    assert p.format == "packed_q4_1" and p.device.type == "cuda"
    assert torch.equal(p.dequantize().cpu(), w.dequantize())
