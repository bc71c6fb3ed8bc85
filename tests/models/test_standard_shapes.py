"""onecat.models.standard_shapes: the benchmark shapes are the checkpoints' and every tool reads them."""

import pytest

from onecat.bench import project, synth_gguf
from onecat.models.standard_shapes import STANDARD_SHAPES, standard_shape


def test_llama3_8b_and_smollm2_are_the_real_shapes():
    s = STANDARD_SHAPES["llama3-8b"]
    assert (s.num_layers, s.hidden_size, s.intermediate_size, s.num_heads, s.num_kv_heads, s.head_dim,
            s.vocab_size) == (32, 4096, 14336, 32, 8, 128, 128256) and not s.tie_word_embeddings
    s = STANDARD_SHAPES["smollm2-135m"]
    assert (s.num_layers, s.hidden_size, s.intermediate_size, s.num_heads, s.num_kv_heads, s.vocab_size) == \
        (30, 576, 1536, 9, 3, 49152) and s.tie_word_embeddings


def test_overrides_and_unknown_names():
    s = standard_shape("llama3-8b", name="llama3-8b (generated)", max_position=1024)
    assert s.name == "llama3-8b (generated)" and s.max_position == 1024 and s.num_layers == 32
    assert STANDARD_SHAPES["llama3-8b"].name == "llama3-8b"  # the table is not touched
    with pytest.raises(KeyError, match="unknown shape 'llama-9b'"):
        standard_shape("llama-9b")


def test_tools_read_the_table():
    for name, shape in synth_gguf.SHAPES.items():
        spec = STANDARD_SHAPES[name]
        assert (shape.layers, shape.hidden, shape.ffn, shape.vocab, shape.tied, shape.context) == (
            spec.num_layers, spec.hidden_size, spec.intermediate_size, spec.vocab_size, spec.tie_word_embeddings,
            spec.max_position)
    for name, shape in project.SHAPES.items():
        spec = STANDARD_SHAPES[name]
        assert (shape.layers, shape.hidden, shape.heads, shape.kv_heads, shape.head_dim) == (
            spec.num_layers, spec.hidden_size, spec.num_heads, spec.num_kv_heads, spec.head_dim)
    assert project.SHAPES["qwen3-8b"].qk_norm and project.SHAPES["smollm2-135m"].embd_format == "Q8_0"
