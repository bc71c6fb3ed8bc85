"""onecat.models.tokenizer against references: transformers' tokenizer for the real SmolLM2 GGUF
(byte-level BPE), and SentencePiece itself (plus transformers) for SentencePiece-style GGUF vocabularies."""

from __future__ import annotations

import io
import json
import os
import unicodedata

import pytest
from tokenizers import Tokenizer as Backend
from tokenizers import Regex, pre_tokenizers, processors

from onecat.models.tokenizer import Tokenizer

EDGE_CASES = [
    "Hello, world!", "\tindented\twith\ttabs", "two  spaces,   three,    four", "\n\n\n", "a\n\n\nb",
    "trailing spaces   ", "   leading spaces", " ", "\r\nwindows line\r\n", "naïve café — “quotes” …",
    "日本語のテキストと中文文本", "한국어 텍스트", "שלום עולם", "مرحبا بالعالم", "e\u0301 a\u0300 n\u0303 (combining)",
    "👨‍👩‍👧‍👦 family, 🏳️‍🌈 flag, 👍🏽 thumbs", "emoji😀in😀words", "zero\u200bwidth\u200djoiner", "\x00\x01\x1b[0m control",
    "x = [1, 2, 3]  # code\n    return x", "1234567890 3.14159 -42 1e10", "x   42", "<|im_start|>user\nHi<|im_end|>\n",
    "text<|endoftext|>more", "<|im_start|><|im_end|>", "<notatoken> <|im_start", "\u00a0nbsp\u2003em space", "ﬁ ligature ①",
]


def _space_before_number(text: str) -> bool:
    """Where transformers' GGUF loader for SmolLM2 may differ: a whitespace before a \\p{N} character."""
    return any(a.isspace() and unicodedata.category(b).startswith("N") for a, b in zip(text, text[1:]))


@pytest.fixture(scope="module")
def smollm2_reference_backend(smollm2_hf_tokenizer):
    """transformers' GGUF tokenizer with the pre-tokenizer of SmolLM2's own tokenizer.json (digits split
    one by one before GPT-2's split, as llama.cpp's "smollm" pre-type), which transformers' GGUF loader omits."""
    backend = Backend.from_str(smollm2_hf_tokenizer.backend_tokenizer.to_str())
    backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    return backend


# ---- byte-level BPE: the real SmolLM2 GGUF ---------------------------------------------------------------

def test_smollm2_encode_matches_reference_on_pydoc_text(smollm2_tokenizer, smollm2_hf_tokenizer,
                                                        smollm2_reference_backend, pydoc_lines):
    assert len(pydoc_lines) >= 2000
    ours = [smollm2_tokenizer.encode(line) for line in pydoc_lines]
    reference = [e.ids for e in smollm2_reference_backend.encode_batch(pydoc_lines)]
    assert ours == reference
    # transformers' GGUF tokenizer itself agrees except where whitespace precedes a number: it lets GPT-2's
    # regex glue the last space to the digit ("ĠĠ","Ġ","4"), SmolLM2 keeps the run whole ("ĠĠĠ","4").
    hf = smollm2_hf_tokenizer(pydoc_lines)["input_ids"]
    differing = [line for line, a, b in zip(pydoc_lines, ours, hf) if a != b]
    assert differing and all(_space_before_number(line) for line in differing)
    assert len(pydoc_lines) - len(differing) >= 2000
    assert all(smollm2_tokenizer.decode(ids) == line for ids, line in zip(ours, pydoc_lines))


def test_smollm2_digit_split_divergence_is_the_models_own(smollm2_tokenizer, smollm2_hf_tokenizer):
    ids = smollm2_tokenizer.encode("x   42")
    assert smollm2_tokenizer.convert_ids_to_tokens(ids) == ["x", "ĠĠĠ", "4", "2"]
    assert smollm2_hf_tokenizer.convert_ids_to_tokens(smollm2_hf_tokenizer.encode("x   42")) == ["x", "ĠĠ", "Ġ", "4", "2"]


@pytest.mark.parametrize("text", EDGE_CASES)
def test_smollm2_edge_cases(text, smollm2_tokenizer, smollm2_hf_tokenizer, smollm2_reference_backend):
    for add_special in (True, False):
        ids = smollm2_tokenizer.encode(text, add_special_tokens=add_special)
        assert ids == smollm2_reference_backend.encode(text, add_special_tokens=add_special).ids
        if not _space_before_number(text):
            assert ids == smollm2_hf_tokenizer.encode(text, add_special_tokens=add_special)
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    assert smollm2_tokenizer.decode(ids) == text
    assert smollm2_tokenizer.convert_ids_to_tokens(ids) == smollm2_hf_tokenizer.convert_ids_to_tokens(ids)
    # logprobs' token strings: each id decoded alone, as vLLM spells them (transformers' decode of one id)
    assert smollm2_tokenizer.token_texts(ids) == [smollm2_hf_tokenizer.decode([i]) for i in ids]
    for skip in (True, False):
        assert smollm2_tokenizer.decode(ids, skip_special_tokens=skip) == smollm2_hf_tokenizer.decode(
            ids, skip_special_tokens=skip)


def test_smollm2_special_tokens(smollm2_tokenizer, smollm2_hf_tokenizer):
    tok = smollm2_tokenizer
    ids = tok.encode("<|im_start|>user\nHi<|im_end|>")
    assert ids[0] == 1 and ids[-1] == 2 and ids.count(1) == 1  # matched whole, and no BOS added (add_bos_token=False)
    assert tok.encode("Hi") == smollm2_hf_tokenizer.encode("Hi") == tok.encode("Hi", add_special_tokens=False)
    assert (tok.bos_token, tok.bos_token_id) == (smollm2_hf_tokenizer.bos_token, smollm2_hf_tokenizer.bos_token_id)
    assert (tok.eos_token, tok.eos_token_id) == (smollm2_hf_tokenizer.eos_token, smollm2_hf_tokenizer.eos_token_id)
    assert tok.pad_token_id == smollm2_hf_tokenizer.pad_token_id == 2
    assert tok.eos_token_ids == [2]  # <|im_end|>; <|endoftext|> is not written by SmolLM2's template
    assert set(smollm2_hf_tokenizer.all_special_ids) <= set(tok.all_special_ids) == set(range(17))
    assert tok.vocab_size == len(smollm2_hf_tokenizer) == 49152
    assert tok.decode([1, *tok.encode("Hi", False), 2], skip_special_tokens=True) == "Hi"
    assert tok.token_to_id("<|im_end|>") == 2 and tok.token_to_id("no such token") is None


def test_decode_of_a_prefix_ending_inside_a_character_ends_in_replacement_char(smollm2_tokenizer, smollm2_hf_tokenizer):
    """The engine streams by decoding growing id lists. A prefix that stops inside a multi-byte UTF-8
    character decodes to text ending in U+FFFD (exactly as transformers); the full list decodes cleanly."""
    text = "a 日本😀b"
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    prefixes = [smollm2_tokenizer.decode(ids[:k]) for k in range(len(ids) + 1)]
    assert prefixes == [smollm2_hf_tokenizer.decode(ids[:k]) for k in range(len(ids) + 1)]
    assert any(p.endswith("\ufffd") for p in prefixes)
    for p in prefixes:
        assert p.endswith("\ufffd") or text.startswith(p)
    assert prefixes[-1] == text


def test_invalid_ids_and_metadata_raise_value_error(smollm2_tokenizer, smollm2_metadata):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        smollm2_tokenizer.decode([49152])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        smollm2_tokenizer.convert_ids_to_tokens([-1])
    with pytest.raises(ValueError, match="not supported"):
        Tokenizer.from_gguf_metadata({**smollm2_metadata, "tokenizer.ggml.model": "rwkv"})
    with pytest.raises(ValueError, match="tokenizer.ggml.pre"):
        Tokenizer.from_gguf_metadata({**smollm2_metadata, "tokenizer.ggml.pre": "made-up"})
    with pytest.raises(ValueError, match="tokenizer.ggml.tokens"):
        Tokenizer.from_gguf_metadata({"tokenizer.ggml.model": "gpt2"})
    with pytest.raises(ValueError, match="merges"):
        Tokenizer.from_gguf_metadata({**smollm2_metadata, "tokenizer.ggml.merges": []})
    no_template = Tokenizer.from_gguf_metadata({k: v for k, v in smollm2_metadata.items() if k != "tokenizer.chat_template"})
    assert no_template.chat_template is None
    with pytest.raises(ValueError, match="no chat template"):
        no_template.apply_chat_template([{"role": "user", "content": "hi"}])


def test_llama3_style_end_of_turn_and_bos(smollm2_metadata):
    """A template that writes an end-of-turn control token makes it a stop id; add_bos_token adds BOS."""
    metadata = {**smollm2_metadata, "tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.eot_token_id": 0,
                "tokenizer.chat_template": "{{ bos_token }}{% for m in messages %}{{ m['content'] }}<|im_end|>{% endfor %}"}
    tok = Tokenizer.from_gguf_metadata(metadata)
    assert tok.encode("Hi")[0] == tok.bos_token_id == 1
    assert tok.encode("Hi", add_special_tokens=False)[0] != 1
    assert tok.eos_token_ids == [0, 2]


@pytest.mark.parametrize("pre", ["default", "llama-bpe", "qwen2", "qwen35", "gpt-4o", "tekken", "smollm"])
def test_byte_level_pre_types(pre, smollm2_metadata, pydoc_lines):
    """Each pre-type splits text as transformers' GGUF loader splits it for that name (for "smollm" see
    above), and encoding round-trips."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_PRE_TOKENIZER_SPLITS

    tok = Tokenizer.from_gguf_metadata({**smollm2_metadata, "tokenizer.ggml.pre": pre})
    texts = pydoc_lines[:300] + EDGE_CASES + ["12345 1234567 l'été I'LL we've"]
    if pre in GGUF_PRE_TOKENIZER_SPLITS:
        reference = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(GGUF_PRE_TOKENIZER_SPLITS[pre]), "isolated"),
                                             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        for text in texts:
            ours = tok.backend.pre_tokenizer.pre_tokenize_str(tok.backend.normalizer.normalize_str(text)
                                                              if tok.backend.normalizer else text)
            assert ours == reference.pre_tokenize_str(text) or unicodedata.normalize("NFC", text) != text
    for text in texts:  # Qwen's tokenizers normalize to NFC first
        assert tok.decode(tok.encode(text)) == (unicodedata.normalize("NFC", text) if pre.startswith("qwen") else text)


# ---- Hugging Face directories -------------------------------------------------------------------------

def test_from_hf_dir_matches_transformers(tmp_path, smollm2_hf_tokenizer, pydoc_lines):
    import transformers

    smollm2_hf_tokenizer.save_pretrained(tmp_path)
    assert (tmp_path / "chat_template.jinja").is_file()
    ours, hf = Tokenizer.from_hf_dir(tmp_path), transformers.AutoTokenizer.from_pretrained(tmp_path)
    lines = pydoc_lines[:2000] + EDGE_CASES
    assert [ours.encode(line) for line in lines] == hf(lines)["input_ids"]
    messages = [{"role": "user", "content": "Hi"}]
    assert ours.apply_chat_template(messages, add_generation_prompt=True) == hf.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False)
    assert (ours.bos_token_id, ours.eos_token_id, ours.eos_token_ids) == (1, 2, [2])

    # The template in tokenizer_config.json, BOS from tokenizer.json's post-processor (transformers 5 ignores
    # tokenizer_config's add_bos_token when tokenizer.json exists), and generation_config's eos ids.
    template = (tmp_path / "chat_template.jinja").read_text()
    os.remove(tmp_path / "chat_template.jinja")
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config.update(chat_template=template, add_bos_token=False)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    backend = Backend.from_file(str(tmp_path / "tokenizer.json"))
    backend.post_processor = processors.TemplateProcessing(single="<|im_start|> $A", special_tokens=[("<|im_start|>", 1)])
    backend.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 0]}))
    ours, hf = Tokenizer.from_hf_dir(tmp_path), transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert ours.chat_template == template
    assert [ours.encode(line) for line in EDGE_CASES] == hf(EDGE_CASES)["input_ids"]
    assert ours.encode("Hi")[0] == 1 and ours.eos_token_ids == [0, 2]

    # A processor-style chat_template.json is used when nothing else names a template.
    config.pop("chat_template")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    (tmp_path / "chat_template.json").write_text(json.dumps({"chat_template": "{{ messages[0]['content'] }}"}))
    assert Tokenizer.from_hf_dir(tmp_path).apply_chat_template(messages) == "Hi"
    with pytest.raises(ValueError, match="tokenizer.json"):
        Tokenizer.from_hf_dir(tmp_path / "missing")


# ---- SentencePiece-style ("llama") vocabularies -------------------------------------------------------

SPM_USER_TOKENS = ["<start_of_turn>", "<end_of_turn>"]


def _train_sentencepiece(lines: list[str], add_dummy_prefix: bool):
    """A small real SentencePiece BPE model (byte fallback, no normalization, as Llama/Gemma use)."""
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, model_type="bpe", vocab_size=2000, byte_fallback=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=add_dummy_prefix,
        allow_whitespace_only_pieces=True, split_digits=True, user_defined_symbols=SPM_USER_TOKENS,
        num_threads=2, minloglevel=2)
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def _gguf_metadata_of(sp, arch: str, add_space_prefix: bool) -> dict:
    """The metadata llama.cpp's converter writes for a SentencePiece model (Gemma: space runs as spaces)."""
    def token_type(i: int) -> int:
        if sp.is_unknown(i):
            return 2
        if sp.is_control(i):
            return 3
        if sp.is_byte(i):
            return 6
        return 4 if sp.id_to_piece(i) in SPM_USER_TOKENS else 1

    n = sp.get_piece_size()
    tokens = [sp.id_to_piece(i) for i in range(n)]
    if arch == "gemma3":
        tokens = [" " * len(t) if len(t) > 1 and set(t) == {"▁"} else t for t in tokens]
    return {"general.architecture": arch, "tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.scores": [sp.get_score(i) for i in range(n)],
            "tokenizer.ggml.token_type": [token_type(i) for i in range(n)],
            "tokenizer.ggml.bos_token_id": sp.bos_id(), "tokenizer.ggml.eos_token_id": sp.eos_id(),
            "tokenizer.ggml.unknown_token_id": sp.unk_id(), "tokenizer.ggml.add_space_prefix": add_space_prefix,
            "tokenizer.ggml.add_bos_token": True}


def _hf_tokenizer_of_gguf_metadata(metadata: dict, directory):
    """transformers' tokenizer for a GGUF file carrying `metadata` (written with the gguf library)."""
    import gguf
    import transformers

    writer = gguf.GGUFWriter(str(directory / "vocab.gguf"), metadata["general.architecture"])
    writer.add_tokenizer_model("llama")
    writer.add_token_list(metadata["tokenizer.ggml.tokens"])
    writer.add_token_scores(metadata["tokenizer.ggml.scores"])
    writer.add_token_types(metadata["tokenizer.ggml.token_type"])
    writer.add_bos_token_id(metadata["tokenizer.ggml.bos_token_id"])
    writer.add_eos_token_id(metadata["tokenizer.ggml.eos_token_id"])
    writer.add_unk_token_id(metadata["tokenizer.ggml.unknown_token_id"])
    writer.add_add_space_prefix(metadata["tokenizer.ggml.add_space_prefix"])
    writer.add_add_bos_token(True)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return transformers.AutoTokenizer.from_pretrained(directory, gguf_file="vocab.gguf")


@pytest.mark.parametrize("arch, add_space_prefix", [("llama", True), ("gemma3", False)])
def test_sentencepiece_vocabulary_matches_sentencepiece_and_transformers(arch, add_space_prefix, pydoc_lines, tmp_path):
    sp = _train_sentencepiece(pydoc_lines[::2], add_dummy_prefix=add_space_prefix)
    metadata = _gguf_metadata_of(sp, arch, add_space_prefix)
    tok = Tokenizer.from_gguf_metadata(metadata)
    hf = _hf_tokenizer_of_gguf_metadata(metadata, tmp_path)
    held_out = pydoc_lines[1::2] + [t for t in EDGE_CASES if "<|" not in t]
    assert len(held_out) >= 2000

    ours = [tok.encode(line, add_special_tokens=False) for line in held_out]
    assert ours == [sp.encode(line) for line in held_out]  # SentencePiece itself, byte fallback included
    assert all(tok.decode(ids) == line for ids, line in zip(ours, held_out))
    assert any(tok.convert_ids_to_tokens(ids)[-1].startswith("<0x") for ids in ours)
    some = [i for ids in ours[:50] for i in ids]
    assert tok.token_texts(some) == [tok.decode([i]) for i in some]  # logprobs' spelling: each id alone
    assert tok.encode("Hi")[0] == tok.bos_token_id == sp.bos_id() and tok.eos_token_ids == [sp.eos_id()]

    # transformers agrees, except that its GGUF loader does not double a leading space: for " x" with
    # add_space_prefix it writes "▁x" where SentencePiece and llama.cpp write "▁▁x" (we follow them).
    with_bos = [tok.encode(line) for line in held_out]
    differing = [line for line, ids in zip(held_out, with_bos) if ids != hf.encode(line)]
    assert all(add_space_prefix and line[0] == " " for line in differing)
    for text in ["<start_of_turn>user\nHi there<end_of_turn>\n", "x<end_of_turn>"]:
        ids = tok.encode(text, add_special_tokens=False)
        assert sp.id_to_piece(ids[0] if text[0] == "<" else ids[1]) in SPM_USER_TOKENS
        if not add_space_prefix:  # with a prefix, llama.cpp (and we) start the text after a special token with "▁"
            assert ids == hf.encode(text, add_special_tokens=False)
            assert tok.decode(ids) == text
