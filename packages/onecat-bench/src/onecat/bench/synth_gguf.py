"""GGUF files of real model shapes with generated weights in real formats, for GPU speed runs.

    onecat-bench synth-gguf --shape llama3-8b --type Q4_K_M --out /tmp/llama3-8b.Q4_K_M.gguf

The GPU machine has no network and no file over 64 MiB can travel to it, so benchmark files are
written there. Speed does not depend on weight values (dense models, no speculative decoding), but
every block is valid: fp16 scale fields are drawn from a sane range (never random bytes, which can
be NaN/inf); only the integer fields (4/6/8-bit codes, K-quant 6-bit sub-scales) are random bytes.
The tensor types follow llama.cpp's own quantizer (src/llama-quant.cpp) for each file type:

  Q4_0 / Q4_1  every matrix in the type; output.weight Q6_K; a tied embedding whose row is not a
               multiple of 256 in Q8_0 (SmolLM2-135M's real Q4_1 file: token_embd Q8_0)
  Q4_K_M       Q4_K, with Q6_K for output.weight and for attn_v / ffn_down of layers where
               llama.cpp's use_more_bits(i, n) holds (half of them)
  norms        F32

Tokenizer metadata: `smollm2` copies the real SmolLM2-135M GGUF's tokenizer keys (stored in this
package, see `extract_tokenizer`), `synthetic-bpe` builds a consistent byte-level BPE vocabulary
(256 byte tokens, merges of existing tokens, Llama-3 style control tokens) of any size that
llama.cpp loads as pre-tokenizer `llama-bpe`.

The header is written with gguf-py's GGUFWriter; tensor data is generated in row chunks by a pool
of processes, each writing its chunk at its offset (a 4.7 GB file in seconds on 16 cores).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time
from dataclasses import dataclass

import numpy as np

from onecat.models.standard_shapes import standard_shape

from .tokenizer_synth import extract_tokenizer, tokenizer_metadata

CHUNK_BYTES = 32 << 20  # bytes of tensor data one job generates


@dataclass(frozen=True)
class ShapeSpec:
    name: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    rope_theta: float
    context: int
    tokenizer: str  # "smollm2" | "synthetic-bpe"
    rms_eps: float = 1e-5

    def hf_config(self) -> dict:
        """The same shape as an HF LlamaConfig (for the transformers peer)."""
        return dict(vocab_size=self.vocab, hidden_size=self.hidden, intermediate_size=self.ffn,
                    num_hidden_layers=self.layers, num_attention_heads=self.heads,
                    num_key_value_heads=self.kv_heads, head_dim=self.head_dim, max_position_embeddings=self.context,
                    rms_norm_eps=self.rms_eps, rope_theta=self.rope_theta, tie_word_embeddings=self.tied,
                    hidden_act="silu", attention_bias=False, mlp_bias=False)

    def n_params(self) -> int:
        H, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        per_layer = H * (q + 2 * kv) + q * H + 3 * H * self.ffn + 2 * H
        return self.vocab * H * (1 if self.tied else 2) + self.layers * per_layer + H


    @classmethod
    def of(cls, spec, tokenizer: str) -> "ShapeSpec":
        """The synthesizer's view of a ModelSpec (onecat.models.standard_shapes)."""
        return cls(spec.name, spec.num_layers, spec.hidden_size, spec.intermediate_size, spec.num_heads,
                   spec.num_kv_heads, spec.head_dim, spec.vocab_size, spec.tie_word_embeddings, spec.rope_theta,
                   spec.max_position, tokenizer, spec.rms_norm_eps)


# The standard GPU benchmark shapes (../shared/models.md) and a tiny one for CPU tests.
SHAPES = {name: ShapeSpec.of(standard_shape(name), tokenizer)
          for name, tokenizer in (("smollm2-135m", "smollm2"), ("llama3-8b", "synthetic-bpe"),
                                  ("tiny-llama", "synthetic-bpe"))}
# llama.cpp's LLAMA_FTYPE values (general.file_type)
FILE_TYPES = {"Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q4_K_M": 15}
GGML_TYPE_IDS = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 8, "Q4_K": 12, "Q6_K": 14}
BLOCK = {"F32": (1, 4), "F16": (1, 2), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q8_0": (32, 34),
         "Q4_K": (256, 144), "Q6_K": (256, 210)}  # (weights per block, bytes per block)


@dataclass(frozen=True)
class TensorPlan:
    name: str
    shape: tuple[int, ...]  # torch order: rows first, the last dim is the blocked row
    ggml_type: str

    @property
    def rows(self) -> int:
        return int(np.prod(self.shape[:-1])) if len(self.shape) > 1 else 1

    @property
    def row_bytes(self) -> int:
        per, size = BLOCK[self.ggml_type]
        if self.shape[-1] % per:
            raise ValueError(f"{self.name}: row length {self.shape[-1]} is not a multiple of the "
                             f"{self.ggml_type} block ({per})")
        return self.shape[-1] // per * size

    @property
    def nbytes(self) -> int:
        return self.rows * self.row_bytes


def _use_more_bits(i: int, n: int) -> bool:  # llama.cpp llama-quant.cpp
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensor_plan(shape: ShapeSpec, ftype: str) -> list[TensorPlan]:
    """Names, shapes and GGML types, in llama.cpp's tensor order, as llama.cpp's quantizer picks them."""
    if ftype not in FILE_TYPES:
        raise ValueError(f"unknown file type {ftype!r}; known: {', '.join(FILE_TYPES)}")
    H, ffn, V = shape.hidden, shape.ffn, shape.vocab
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    base = "Q4_K" if ftype == "Q4_K_M" else ftype

    def out_type(row: int) -> str:  # output.weight, or a tied token_embd (quantized as the output)
        return "Q8_0" if ftype == "Q8_0" or row % 256 else "Q6_K"

    plan = [TensorPlan("token_embd.weight", (V, H), out_type(H) if shape.tied else base)]
    for i in range(shape.layers):
        more = ftype == "Q4_K_M" and _use_more_bits(i, shape.layers)
        b = f"blk.{i}."
        plan += [TensorPlan(b + "attn_norm.weight", (H,), "F32"),
                 TensorPlan(b + "attn_q.weight", (q, H), base),
                 TensorPlan(b + "attn_k.weight", (kv, H), base),
                 TensorPlan(b + "attn_v.weight", (kv, H), "Q6_K" if more else base),
                 TensorPlan(b + "attn_output.weight", (H, q), base),
                 TensorPlan(b + "ffn_norm.weight", (H,), "F32"),
                 TensorPlan(b + "ffn_gate.weight", (ffn, H), base),
                 TensorPlan(b + "ffn_up.weight", (ffn, H), base),
                 TensorPlan(b + "ffn_down.weight", (H, ffn), "Q6_K" if more else base)]
    plan.append(TensorPlan("output_norm.weight", (H,), "F32"))
    if not shape.tied:
        plan.append(TensorPlan("output.weight", (V, H), out_type(H)))
    return plan


# -- valid blocks, vectorized -------------------------------------------------------------------
def _f16(rng: np.random.Generator, n: int, lo: float, hi: float) -> np.ndarray:
    """n fp16 values in [lo, hi] (same sign; drawn uniformly over the bit patterns between the two,
    so finite by construction) as [n, 2] bytes."""
    a, b = sorted(int(np.float16(x).view(np.uint16)) for x in (lo, hi))
    return rng.integers(a, b, n, dtype=np.uint16, endpoint=True).view(np.uint8).reshape(n, 2)


def make_blocks(ggml_type: str, n_blocks: int, rng: np.random.Generator) -> np.ndarray:
    """`n_blocks` valid blocks [n_blocks, bytes per block] of weights of std ~0.02."""
    per, size = BLOCK[ggml_type]
    if ggml_type == "F32":  # norm weights
        return (1.0 + 0.02 * rng.standard_normal(n_blocks)).astype(np.float32).view(np.uint8).reshape(n_blocks, 4)
    if ggml_type == "F16":
        return (0.02 * rng.standard_normal(n_blocks)).astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
    raw = rng.bit_generator.random_raw(-(-n_blocks * size // 8))  # uint64 draws: 3-4x faster than rng.bytes
    out = raw.view(np.uint8)[:n_blocks * size].reshape(n_blocks, size)
    if ggml_type == "Q4_0":  # d, qs[16]: w = d * (q - 8)
        out[:, 0:2] = _f16(rng, n_blocks, 0.003, 0.006)
    elif ggml_type == "Q4_1":  # d, m, qs[16]: w = d * q + m
        out[:, 0:2] = _f16(rng, n_blocks, 0.003, 0.006)
        out[:, 2:4] = _f16(rng, n_blocks, -0.045, -0.025)
    elif ggml_type == "Q8_0":  # d, qs[32] int8: w = d * q
        out[:, 0:2] = _f16(rng, n_blocks, 2e-4, 4e-4)
    elif ggml_type == "Q4_K":  # d, dmin, scales[12] (6-bit, any bytes valid), qs[128]
        out[:, 0:2] = _f16(rng, n_blocks, 1e-4, 2e-4)
        out[:, 2:4] = _f16(rng, n_blocks, 5e-4, 1.5e-3)
    elif ggml_type == "Q6_K":  # ql[128], qh[64], scales[16] int8, d: w = d * sc * (q - 32)
        out[:, 192:208] = rng.integers(6, 17, (n_blocks, 16), dtype=np.int8).view(np.uint8)
        out[:, 208:210] = _f16(rng, n_blocks, 8e-5, 1.2e-4)
    else:
        raise ValueError(f"no block generator for {ggml_type}")
    return out


# -- the file ----------------------------------------------------------------------------------
@dataclass
class SynthResult:
    path: str
    shape: ShapeSpec
    ftype: str
    plan: list[TensorPlan]
    bytes: int
    seconds: float
    tokenizer: str
    type_counts: dict[str, int]

    def weight_bytes_per_token(self) -> int:
        """Bytes a batch-1 decode step must read: every matrix and norm, the embedding as one row."""
        emb = next(t for t in self.plan if t.name == "token_embd.weight")
        total = sum(t.nbytes for t in self.plan) - emb.nbytes + emb.row_bytes
        return total + (emb.nbytes if self.shape.tied else 0)  # a tied embedding is read whole as the output


def _write_header(path: str, shape: ShapeSpec, ftype: str, plan: list[TensorPlan],
                  tokenizer: list[tuple[str, str, object]]) -> int:
    """Metadata and tensor table via gguf-py; returns the offset where tensor data starts."""
    import gguf

    w = gguf.GGUFWriter(path, "llama")
    w.add_name(f"{shape.name} (generated weights, onecat-bench synth-gguf)")
    w.add_type("model")
    w.add_block_count(shape.layers)
    w.add_context_length(shape.context)
    w.add_embedding_length(shape.hidden)
    w.add_feed_forward_length(shape.ffn)
    w.add_head_count(shape.heads)
    w.add_head_count_kv(shape.kv_heads)
    w.add_rope_freq_base(shape.rope_theta)
    w.add_layer_norm_rms_eps(shape.rms_eps)
    w.add_rope_dimension_count(shape.head_dim)
    w.add_key_length(shape.head_dim)
    w.add_value_length(shape.head_dim)
    w.add_vocab_size(shape.vocab)
    w.add_file_type(FILE_TYPES[ftype])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for key, vtype, value in tokenizer:
        if vtype.startswith("ARRAY:"):
            w.add_key_value(key, list(value), gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType[vtype[6:]])
        else:
            w.add_key_value(key, value, gguf.GGUFValueType[vtype])
    for t in plan:
        qtype = gguf.GGMLQuantizationType(GGML_TYPE_IDS[t.ggml_type])
        w.add_tensor_info(t.name, (*t.shape[:-1], t.row_bytes), np.dtype(np.uint8), t.nbytes, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    fout = w.fout[0]
    pos = fout.tell()
    start = -(-pos // w.data_alignment) * w.data_alignment
    fout.write(bytes(start - pos))
    w.close()
    return start


def _jobs(plan: list[TensorPlan], data_start: int, align: int = 32):
    """(tensor index, ggml type, file offset, first block, n blocks) chunks covering every tensor."""
    offset = data_start
    for k, t in enumerate(plan):
        per, size = BLOCK[t.ggml_type]
        total = t.nbytes // size
        step = max(1, CHUNK_BYTES // size)
        for c, first in enumerate(range(0, total, step)):
            yield k, c, t.ggml_type, offset + first * size, min(step, total - first)
        offset += -(-t.nbytes // align) * align


_FD = None


def _open_target(path: str) -> None:
    global _FD
    _FD = os.open(path, os.O_WRONLY)


def _fill(job: tuple, seed: int = 0) -> int:
    k, c, ggml_type, offset, n_blocks = job
    rng = np.random.default_rng([seed, k, c])
    data = make_blocks(ggml_type, n_blocks, rng)
    view = memoryview(data).cast("B")
    done = 0
    while done < len(view):
        done += os.pwrite(_FD, view[done:], offset + done)
    return done


def synthesize(shape: str | ShapeSpec, ftype: str, out: str, workers: int | None = None,
               progress: bool = False) -> SynthResult:
    """Write a GGUF of `shape` in file type `ftype` (Q4_0 | Q4_1 | Q8_0 | Q4_K_M) to `out`."""
    if isinstance(shape, str) and shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    spec = SHAPES[shape] if isinstance(shape, str) else shape
    t0 = time.perf_counter()
    plan = tensor_plan(spec, ftype)
    tok, tok_source = tokenizer_metadata(spec.tokenizer, spec.vocab)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    data_start = _write_header(out, spec, ftype, plan, tok)
    jobs = list(_jobs(plan, data_start))
    last = jobs[-1]
    end = data_start + sum(-(-t.nbytes // 32) * 32 for t in plan)
    assert last[3] + last[4] * BLOCK[last[2]][1] <= end
    os.truncate(out, end)
    workers = workers or min(len(jobs), os.cpu_count() or 1)
    written = 0
    if workers <= 1:
        _open_target(out)
        try:
            written = sum(_fill(j) for j in jobs)
        finally:
            os.close(_FD)
    else:
        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
        with ctx.Pool(workers, initializer=_open_target, initargs=(out,)) as pool:
            for n in pool.imap_unordered(_fill, jobs, chunksize=1):
                written += n
    if written != sum(t.nbytes for t in plan):
        raise RuntimeError(f"{out}: wrote {written} bytes of tensor data, expected {sum(t.nbytes for t in plan)}")
    counts: dict[str, int] = {}
    for t in plan:
        counts[t.ggml_type] = counts.get(t.ggml_type, 0) + 1
    return SynthResult(out, spec, ftype, plan, os.path.getsize(out), time.perf_counter() - t0, tok_source, counts)


def describe(r: SynthResult) -> str:
    types = ", ".join(f"{n} {t}" for t, n in sorted(r.type_counts.items(), key=lambda kv: -kv[1]))
    return (f"{r.path}: {r.shape.name} {r.ftype}, {r.bytes / 1e9:.3f} GB ({types}), "
            f"{r.weight_bytes_per_token() / 1e9:.3f} GB read per decoded token, tokenizer: {r.tokenizer}; "
            f"written in {r.seconds:.1f} s")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="onecat-bench synth-gguf", description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), help="model shape (../shared/models.md)")
    ap.add_argument("--type", dest="ftype", choices=sorted(FILE_TYPES), help="GGUF file type (llama.cpp's mix)")
    ap.add_argument("--out", help="output .gguf path")
    ap.add_argument("--workers", type=int, default=None, help="processes writing tensor data (default: all cores)")
    ap.add_argument("--extract-tokenizer", metavar="GGUF",
                    help="instead: store GGUF's tokenizer metadata as this package's smollm2 tokenizer data")
    a = ap.parse_args(argv)
    if a.extract_tokenizer:
        from importlib import resources

        from .tokenizer_synth import TOKENIZER_DATA

        dest = str(resources.files("onecat.bench").joinpath("data", TOKENIZER_DATA["smollm2"]))
        doc = extract_tokenizer(a.extract_tokenizer, dest)
        print(f"{dest}: {len(doc['items'])} tokenizer keys from {doc['source']}")
        return
    if not (a.shape and a.ftype and a.out):
        ap.error("--shape, --type and --out are required")
    print(describe(synthesize(a.shape, a.ftype, a.out, a.workers)), flush=True)


if __name__ == "__main__":
    main()
