"""The benchmark model shapes (../shared/models.md) as ModelSpecs, defined once.

The GGUF synthesizer, the V100 projection, the GPU check scripts and the ncu target build their
models or tables from these; each adds only what is its own (a tokenizer kind, an embedding format).
The values are the real checkpoints' (SmolLM2-135M, Llama-3-8B, Qwen3-8B) as llama.cpp loads them
from GGUF: llama-architecture Q/K come permuted, so their rotary pairs are interleaved (GPT-J style).
"""

from __future__ import annotations

from dataclasses import replace

from .spec import ModelSpec

STANDARD_SHAPES: dict[str, ModelSpec] = {
    "smollm2-135m": ModelSpec(architecture="llama", name="smollm2-135m", num_layers=30, hidden_size=576,
                              intermediate_size=1536, num_heads=9, num_kv_heads=3, head_dim=64, vocab_size=49152,
                              max_position=8192, rope_theta=100000.0, rope_interleaved=True,
                              tie_word_embeddings=True),
    "llama3-8b": ModelSpec(architecture="llama", name="llama3-8b", num_layers=32, hidden_size=4096,
                           intermediate_size=14336, num_heads=32, num_kv_heads=8, head_dim=128, vocab_size=128256,
                           max_position=8192, rope_theta=500000.0, rope_interleaved=True),
    "qwen3-8b": ModelSpec(architecture="qwen3", name="qwen3-8b", num_layers=36, hidden_size=4096,
                          intermediate_size=12288, num_heads=32, num_kv_heads=8, head_dim=128, vocab_size=151936,
                          max_position=40960, rms_norm_eps=1e-6, rope_theta=1000000.0),
    # a tiny llama for CPU tests of the benchmark tools
    "tiny-llama": ModelSpec(architecture="llama", name="tiny-llama", num_layers=2, hidden_size=256,
                            intermediate_size=512, num_heads=4, num_kv_heads=2, head_dim=64, vocab_size=1024,
                            max_position=2048, rope_interleaved=True),
}


def standard_shape(shape: str, **overrides) -> ModelSpec:
    """The named shape, with fields overridden (e.g. name= for a generated-weights label)."""
    if shape not in STANDARD_SHAPES:
        raise KeyError(f"unknown shape {shape!r} (known: {', '.join(sorted(STANDARD_SHAPES))})")
    return replace(STANDARD_SHAPES[shape], **overrides)
