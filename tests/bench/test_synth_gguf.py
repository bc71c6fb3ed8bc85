"""GGUF synthesis (onecat.bench.synth_gguf): files of real shapes with generated weights in real
formats load in onecat and gguf-py with the requested types and shapes and finite values; the
tensor plans follow llama.cpp's quantizer (checked against the real SmolLM2 Q4_1 file); the stored
SmolLM2 tokenizer is the real file's; the synthetic BPE vocabulary is consistent."""

from __future__ import annotations

import numpy as np
import pytest

from onecat.bench.synth_gguf import SHAPES, describe, make_blocks, synthesize, tensor_plan
from onecat.bench.tokenizer_synth import load_tokenizer_data, synthetic_bpe_metadata


def _counts(plan) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in plan:
        out[t.ggml_type] = out.get(t.ggml_type, 0) + 1
    return out


@pytest.mark.parametrize("ftype", ["Q4_0", "Q4_1", "Q4_K_M"])
def test_tiny_file_loads_in_onecat_and_gguf_py(tmp_path, ftype):
    import gguf

    from onecat.models.gguf_file import GGUFFile
    from onecat.models.loader import load_model

    path = str(tmp_path / f"tiny.{ftype}.gguf")
    r = synthesize("tiny-llama", ftype, path, workers=2)
    assert ftype in describe(r)
    plan = {t.name: t for t in tensor_plan(SHAPES["tiny-llama"], ftype)}
    f = GGUFFile(path)
    assert {n: (i.ggml_type, i.shape) for n, i in f.tensors.items()} == {n: (t.ggml_type, t.shape)
                                                                         for n, t in plan.items()}
    reader = gguf.GGUFReader(path)
    assert {t.name: t.tensor_type.name for t in reader.tensors} == {n: t.ggml_type for n, t in plan.items()}
    for t in reader.tensors:
        ours = f.dequantize(t.name)
        theirs = gguf.quants.dequantize(t.data, t.tensor_type)
        assert np.array_equal(ours.reshape(theirs.shape), theirs), t.name
        assert np.isfinite(ours).all(), t.name
        if t.name.endswith("norm.weight"):
            assert abs(float(ours.mean()) - 1.0) < 0.05, t.name
        else:
            assert 0.005 < float(ours.std()) < 0.1, (t.name, float(ours.std()))
    loaded = load_model(path, progress=False)
    assert (loaded.spec.num_layers, loaded.spec.hidden_size, loaded.spec.vocab_size) == (2, 256, 1024)
    text = "Hello, world!\n  tabs\tand ünïcode"
    assert loaded.tokenizer.decode(loaded.tokenizer.encode(text, add_special_tokens=False)) == text


def test_smollm2_plan_matches_the_real_q4_1_file(smollm2_path):
    from onecat.models.gguf_file import GGUFFile

    real = GGUFFile(smollm2_path)
    plan = tensor_plan(SHAPES["smollm2-135m"], "Q4_1")
    assert {t.name: (t.ggml_type, t.shape) for t in plan} == {n: (i.ggml_type, i.shape)
                                                              for n, i in real.tensors.items()}
    assert sum(t.nbytes for t in plan) == real.total_bytes


def test_stored_smollm2_tokenizer_is_the_real_files(smollm2_path):
    from onecat.models.gguf_file import GGUFFile

    real = GGUFFile(smollm2_path).metadata
    items, source = load_tokenizer_data("smollm2")
    assert "SmolLM2-135M-Instruct.Q4_1.gguf" in source
    stored = {k: v for k, _, v in items}
    assert set(stored) == {k for k in real if k.startswith("tokenizer.")}
    for k, v in stored.items():
        assert real[k] == v, k


def test_llama3_8b_plans_follow_llama_cpp():
    s = SHAPES["llama3-8b"]
    q40 = tensor_plan(s, "Q4_0")
    assert _counts(q40) == {"Q4_0": 225, "Q6_K": 1, "F32": 65}  # output.weight Q6_K, as llama-quantize does
    assert next(t for t in q40 if t.name == "output.weight").ggml_type == "Q6_K"
    km = tensor_plan(s, "Q4_K_M")
    assert _counts(km) == {"Q4_K": 193, "Q6_K": 33, "F32": 65}
    six = {t.name for t in km if t.ggml_type == "Q6_K"}
    more = [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]  # llama.cpp use_more_bits(i, 32)
    assert six == {"output.weight"} | {f"blk.{i}.{n}.weight" for i in more for n in ("attn_v", "ffn_down")}
    assert 4.6e9 < sum(t.nbytes for t in q40) < 4.7e9
    assert 4.85e9 < sum(t.nbytes for t in km) < 4.95e9
    assert sum(np.prod(t.shape) for t in q40) == s.n_params()


def test_blocks_have_finite_scales_for_every_type():
    from onecat.quant.ggml import dequantize

    rng = np.random.default_rng(1)
    for t, per in (("Q4_0", 32), ("Q4_1", 32), ("Q8_0", 32), ("Q4_K", 256), ("Q6_K", 256)):
        blocks = make_blocks(t, 512, rng)
        w = dequantize(blocks.reshape(-1), (512 * per // 1024, 1024), t).numpy()
        assert np.isfinite(w).all() and 0.005 < w.std() < 0.1, t


def test_synthetic_bpe_vocabulary_is_consistent():
    items = {k: v for k, _, v in synthetic_bpe_metadata(128256)}
    tokens, merges = items["tokenizer.ggml.tokens"], items["tokenizer.ggml.merges"]
    types = items["tokenizer.ggml.token_type"]
    assert len(tokens) == len(types) == 128256 and len(set(tokens)) == 128256
    assert tokens[items["tokenizer.ggml.bos_token_id"]] == "<|begin_of_text|>"
    assert tokens[items["tokenizer.ggml.eos_token_id"]] == "<|eot_id|>"
    assert "Ċ" in tokens[:256]  # the newline byte token llama.cpp looks up at load
    seen = set(tokens[:256])
    for i, m in enumerate(merges):  # each merge joins two earlier tokens into the next one
        a, b = m[:m.index(" ", 1)], m[m.index(" ", 1) + 1:]
        assert a in seen and b in seen and tokens[256 + i] == a + b
        seen.add(a + b)
    assert types.count(3) == 256 and types[:128000] == [1] * 128000


def test_bad_requests_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="unknown file type 'Q3_K'"):
        tensor_plan(SHAPES["tiny-llama"], "Q3_K")
    with pytest.raises(ValueError, match="unknown shape 'llama9'"):
        synthesize("llama9", "Q4_0", str(tmp_path / "x.gguf"))
    with pytest.raises(ValueError, match="vocab_size=100"):
        synthetic_bpe_metadata(100)
