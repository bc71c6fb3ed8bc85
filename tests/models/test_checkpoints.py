"""Checkpoint loading: bad GGUF files fail with the file and the problem named; an HF-style
safetensors directory (sharded, with an index) loads and matches HF transformers."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

from onecat.models.gguf_file import CheckpointError, GGUFFile
from onecat.models.loader import load_model


def test_truncated_gguf_names_file_and_problem(smollm2_path, tmp_path):
    bad = tmp_path / "truncated.gguf"
    with open(smollm2_path, "rb") as src, open(bad, "wb") as dst:
        dst.write(src.read(60 * 2**20))
    with pytest.raises(CheckpointError) as e:
        load_model(str(bad), progress=False)
    assert str(bad) in str(e.value) and ("truncated" in str(e.value) or "not a readable GGUF" in str(e.value))


def test_corrupt_magic_and_header(smollm2_path, tmp_path):
    bad = tmp_path / "corrupt.gguf"
    with open(smollm2_path, "rb") as src:
        head = bytearray(src.read(4096))
    head[:4] = b"XXXX"
    bad.write_bytes(bytes(head))
    with pytest.raises(CheckpointError, match="corrupt.gguf: not a readable GGUF"):
        GGUFFile(bad)
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(CheckpointError, match="empty.gguf"):
        GGUFFile(empty)


def test_missing_path_and_unknown_directory(tmp_path):
    with pytest.raises(CheckpointError, match="no such file"):
        load_model(str(tmp_path / "nope.gguf"), progress=False)
    with pytest.raises(CheckpointError, match="no config.json"):
        load_model(str(tmp_path), progress=False)


@pytest.fixture(scope="module")
def hf_dir(hf_smollm2, tmp_path_factory):
    """SmolLM2 saved by HF transformers as a sharded safetensors directory."""
    from safetensors.torch import save_file

    model, tok = hf_smollm2  # HF will not re-save a GGUF-loaded model: write the directory by hand
    d = tmp_path_factory.mktemp("smollm2_hf")
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    names = sorted(state)
    shards = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    for file, keys in shards.items():
        save_file({k: state[k] for k in keys}, str(d / file), metadata={"format": "pt"})
    index = {"metadata": {}, "weight_map": {k: f for f, keys in shards.items() for k in keys}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    cfg = model.config.to_dict()
    cfg.pop("quantization_config", None)
    cfg["architectures"] = ["LlamaForCausalLM"]
    (d / "config.json").write_text(json.dumps(cfg))
    tok.save_pretrained(d)
    return d


def test_hf_directory_loads_and_matches_hf(hf_dir, hf_smollm2):
    assert (hf_dir / "model.safetensors.index.json").is_file()
    loaded = load_model(str(hf_dir), progress=False)
    assert loaded.spec.num_layers == 30 and not loaded.spec.rope_interleaved
    model, tok = hf_smollm2
    ids = tok("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        ref = model(ids).logits[0]
    from onecat.serve.config import EngineConfig
    from onecat.serve.model_runner import ModelRunner

    ours = ModelRunner(EngineConfig(), loaded=loaded).score(ids[0].tolist())
    assert (ours - ref).abs().max() <= 1e-3 * ref.abs().max()
    assert loaded.tokenizer.encode("Hello world!") == tok("Hello world!").input_ids


def test_missing_shard_is_named(hf_dir, tmp_path):
    d = tmp_path / "broken"
    shutil.copytree(hf_dir, d)
    index = json.loads((d / "model.safetensors.index.json").read_text())
    shard = sorted(set(index["weight_map"].values()))[-1]
    os.remove(d / shard)
    with pytest.raises(CheckpointError, match=f"shard '{shard}' is missing"):
        load_model(str(d), progress=False)


def test_corrupt_safetensors_header_is_named(hf_dir, tmp_path):
    d = tmp_path / "corrupt"
    shutil.copytree(hf_dir, d)
    shard = sorted(p for p in os.listdir(d) if p.endswith(".safetensors"))[0]
    with open(d / shard, "r+b") as f:
        f.write(b"\xff" * 16)
    with pytest.raises(CheckpointError, match=shard):
        load_model(str(d), progress=False)


def _tiny_gguf(path, type_id: int, dims: list[int], n_data: int) -> None:
    """A hand-built GGUF v3: one metadata key and one tensor."""
    import struct

    def s(x: str) -> bytes:
        b = x.encode()
        return struct.pack("<Q", len(b)) + b

    out = b"GGUF" + struct.pack("<IQQ", 3, 1, 1)
    out += s("general.architecture") + struct.pack("<I", 8) + s("llama")
    out += s("w") + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
    out += struct.pack("<IQ", type_id, 0)
    out += b"\0" * (-len(out) % 32) + b"\0" * n_data
    path.write_bytes(out)


def test_unknown_type_row_length_and_truncation_are_named(tmp_path):
    f = tmp_path / "unknown.gguf"
    _tiny_gguf(f, 250, [32, 2], 64)
    with pytest.raises(CheckpointError, match=r"unknown.gguf: tensor 'w' has unknown GGML type 250"):
        GGUFFile(f)
    f = tmp_path / "rows.gguf"
    _tiny_gguf(f, 2, [33, 2], 64)  # Q4_0 blocks hold 32 weights
    with pytest.raises(CheckpointError, match=r"rows.gguf: tensor 'w': row length 33 is not a multiple"):
        GGUFFile(f)
    f = tmp_path / "short.gguf"
    _tiny_gguf(f, 2, [64, 2], 40)  # 4 Q4_0 blocks need 72 bytes
    with pytest.raises(CheckpointError, match=r"short.gguf: tensor 'w' is truncated \(40 of 72 bytes"):
        GGUFFile(f)
    f = tmp_path / "ok.gguf"
    _tiny_gguf(f, 0, [4, 2], 32)  # F32
    g = GGUFFile(f)
    assert g.tensors["w"].shape == (2, 4) and g.dequantize("w").shape == (2, 4) and g.architecture == "llama"
