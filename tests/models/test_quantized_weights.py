"""The engine's default route keeps GGUF weights quantized: what each projection holds (a RowParts where a fused
projection's parts differ in format), that every layout decodes bit-exactly to the GGUF values, and that the model
matches the dense route."""

from __future__ import annotations

import pytest
import torch

from onecat.kernels import ops
from onecat.kernels import reference as ref
from onecat.kernels.attention_metadata import AttentionMetadata
from onecat.kernels.weights import GGUFWeight, RowParts
from onecat.models.gguf_file import GGUFFile
from onecat.models.llama import LlamaForCausalLM
from onecat.models.loader import load_model
from onecat.models.spec import ModelSpec
from onecat.quant import ggml
from onecat.quant.linear_method import process_weights_after_loading
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


# -- projections whose parts differ in format (Q4_K_M files: q and k in q4_k, v in q6_k in half the layers) -------
TINY = ModelSpec("llama", num_layers=2, hidden_size=256, intermediate_size=256, num_heads=4, num_kv_heads=2,
                 head_dim=64, vocab_size=40, max_position=64, rope_interleaved=True, tie_word_embeddings=True)
PROJ = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
        "mlp.up_proj", "mlp.down_proj")
# per layer, each projection's type: layer 0 as Q4_K_M's mixed layers (gate / up differing too), layer 1 q in q6_k
# ahead of k and v in q4_k, gate and up alike (one fused matrix)
TYPES = [("Q4_K", "Q4_K", "Q6_K", "Q4_K", "Q4_K", "Q6_K", "Q6_K"),
         ("Q6_K", "Q4_K", "Q4_K", "Q4_K", "Q4_K", "Q4_K", "Q4_K")]


def _random_ggml(n: int, k: int, qtype: str, gen: torch.Generator) -> GGMLWeight:
    """Valid random GGUF blocks (kernels' GGUFWeight.random writes the same block layout) as the loader holds them."""
    return GGMLWeight(GGUFWeight.random(n, k, qtype.lower(), gen).raw, qtype, (n, k))


def _tiny_checkpoint() -> dict:
    """HF name -> tensor or GGMLWeight for TINY with TYPES."""
    gen = torch.Generator().manual_seed(0)
    H, I, q, kv = TINY.hidden_size, TINY.intermediate_size, TINY.q_size, TINY.kv_size
    shapes = dict(zip(PROJ, [(q, H), (kv, H), (kv, H), (H, q), (I, H), (I, H), (H, I)]))
    state = {"model.embed_tokens.weight": torch.randn(TINY.vocab_size, H, generator=gen),
             "model.norm.weight": 1 + 0.1 * torch.randn(H, generator=gen)}
    for i, types in enumerate(TYPES):
        for norm in ("input_layernorm", "post_attention_layernorm"):
            state[f"model.layers.{i}.{norm}.weight"] = 1 + 0.1 * torch.randn(H, generator=gen)
        for proj, t in zip(PROJ, types):
            state[f"model.layers.{i}.{proj}.weight"] = _random_ggml(*shapes[proj], t, gen)
    return state


def _tiny_llama(quantized: bool, dtype: torch.dtype = torch.float32, device: str = "cpu") -> LlamaForCausalLM:
    model = LlamaForCausalLM(TINY, dtype, device, quantized=quantized)
    for name, value in _tiny_checkpoint().items():
        assert model.load_weight(name, value), name
    assert not model.missing_weights()
    model.finish_loading()
    return model


def test_parts_in_different_formats_load_as_row_parts():
    """Consecutive parts of one format fuse; the runs are one RowParts; every layer's decode is the parts'."""
    model, state = _tiny_llama(quantized=True), _tiny_checkpoint()
    l0, l1 = model.layers
    assert isinstance(l0.qkv, RowParts) and isinstance(l0.gate_up, RowParts) and isinstance(l1.qkv, RowParts)
    assert tuple(zip(l0.qkv.part_formats, l0.qkv.part_rows)) == (("ggml_q4_k", 384), ("ggml_q6_k", 128))
    assert tuple(zip(l0.gate_up.part_formats, l0.gate_up.part_rows)) == (("ggml_q4_k", 256), ("ggml_q6_k", 256))
    assert tuple(zip(l1.qkv.part_formats, l1.qkv.part_rows)) == (("ggml_q6_k", 256), ("ggml_q4_k", 256))
    assert isinstance(l1.gate_up, GGMLWeight) and l1.gate_up.shape == (512, 256)
    for i, layer in enumerate(model.layers):
        for attr, parts in (("qkv", PROJ[:3]), ("gate_up", PROJ[4:6])):
            want = torch.cat([state[f"model.layers.{i}.{p}.weight"].dequantize() for p in parts])
            assert torch.equal(getattr(layer, attr).dequantize(), want), (i, attr)
    # a RowParts counts once per part
    assert model.weight_formats() == {"dense:float32": 1, "ggml_q4_k": 7, "ggml_q6_k": 4}


def _metadata(q_len: int, seq_len: int, device: str) -> AttentionMetadata:
    """One request of seq_len tokens, its last q_len new, in cache block 0."""
    i32 = lambda v: torch.tensor(v, dtype=torch.int32, device=device)  # noqa: E731
    return AttentionMetadata(query_start_loc=i32([0, q_len]), seq_lens=i32([seq_len]), block_tables=i32([[0]]),
                             slot_mapping=torch.arange(seq_len - q_len, seq_len, device=device),
                             query_start_loc_cpu=[0, q_len], seq_lens_cpu=[seq_len], max_query_len=q_len,
                             max_seq_len=seq_len)


@pytest.mark.parametrize("device,dtype", [("cpu", torch.float32),
                                          pytest.param("cuda", torch.float16, marks=pytest.mark.gpu)])
def test_forward_with_row_parts_matches_the_dense_route(device, dtype):
    """A prefill and a decode step through the mixed-format layers (the ops take the RowParts like any weight;
    on the GPU packed parts, the decode step's qkv a two-format GEMV where one is admitted) against the same
    weights decoded at load."""
    ids = torch.randint(0, TINY.vocab_size, (8,), generator=torch.Generator().manual_seed(1)).to(device)
    quant, out = _tiny_llama(True, dtype, device), []
    assert isinstance(quant.layers[0].qkv, RowParts) and isinstance(quant.layers[0].gate_up, RowParts)
    for model in (quant, _tiny_llama(False, dtype, device)):
        caches = [(torch.zeros(1, 16, TINY.num_kv_heads, TINY.head_dim, dtype=dtype, device=device),
                   torch.zeros(1, 16, TINY.num_kv_heads, TINY.head_dim, dtype=dtype, device=device))
                  for _ in range(TINY.num_layers)]
        steps = [(ids[:7], torch.arange(7, device=device), _metadata(7, 7, device)),
                 (ids[7:], torch.arange(7, 8, device=device), _metadata(1, 8, device))]
        out.append(torch.cat([model.compute_logits(model.forward(*step[:2], caches, step[2])) for step in steps]))
    got, want = out
    assert torch.isfinite(want).all() and float(want.abs().max()) > 0
    if device == "cpu":  # the same weights; only summation order may differ
        assert (got - want).abs().max() <= 1e-5 * want.abs().max()
    else:  # FP16 activations, the packed kernels against the dense ones
        assert float((got - want).norm() / want.norm()) <= 1e-2


def test_reference_linear_decodes_row_parts_part_by_part_in_row_chunks(monkeypatch):
    """A few rows of x: the reference takes a RowParts of GGMLWeights part by part (the row_parts provider's calls,
    so the CPU route's bits), each part decoded a row block at a time where it is large, to the full decode's
    result; never the concatenation (s43: one product over it summed in another order than the parts' on a
    many-threaded BLAS)."""
    gen = torch.Generator().manual_seed(3)
    w = RowParts((_random_ggml(1500, 256, "Q4_K", gen), _random_ggml(536, 256, "Q6_K", gen)))
    x, bias = torch.randn(2, 256, generator=gen), torch.randn(2036, generator=gen)
    assert w.parts[0].row_chunked_decode
    chunks, whole = [], []
    select_rows, decode_whole = GGMLWeight.select_rows, RowParts.dequantize
    monkeypatch.setattr(GGMLWeight, "select_rows", lambda self, rows: chunks.append((self.shape, rows)) or
                        select_rows(self, rows))
    monkeypatch.setattr(RowParts, "dequantize", lambda self, *a: whole.append(a) or decode_whole(self, *a))
    got = ref.linear(x, w, bias)
    assert not whole
    assert chunks == [((1500, 256), slice(0, 1024)), ((1500, 256), slice(1024, 1500))]  # the small part: whole
    assert torch.equal(got, ops.linear(x, w, bias))  # the CPU route: row_parts
    torch.testing.assert_close(got, torch.nn.functional.linear(x, w.dequantize(), bias), rtol=1e-5, atol=1e-6)
