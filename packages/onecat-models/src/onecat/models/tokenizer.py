"""Text <-> token ids for onecat models, on top of the `tokenizers` library.

A `Tokenizer` is built either from a GGUF file's metadata (llama.cpp key names) or from a Hugging Face
directory (`tokenizer.json` + `tokenizer_config.json`). It encodes and decodes like the model's
reference Hugging Face tokenizer and renders the model's chat template (see `chat_template.py`).

GGUF vocabularies supported (`tokenizer.ggml.model`):
  * "gpt2": byte-level BPE; the split before BPE follows `tokenizer.ggml.pre` (see `_BYTE_LEVEL_SPLITS`).
  * "llama": SentencePiece-style BPE over "▁"-spelled pieces with `<0xNN>` byte fallback; merges come
    from the file or, as SentencePiece ranks them, from the piece scores.
Tokens marked control (type 3) or user-defined (type 4) are matched whole wherever they occur in text.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import tokenizers
from tokenizers import AddedToken, Regex, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE

from onecat.models.chat_template import render_chat_template

# llama.cpp token types (gguf.TokenType)
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = 1, 2, 3, 4, 5, 6

_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN35_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                 r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_GPT4O_SPLIT = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
                r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
                r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_TEKKEN_SPLIT = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
                 r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
                 r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# GPT-2's own split (ByteLevel's built-in regex), optionally after isolating every digit.
_GPT2, _GPT2_DIGITS = "gpt2", "gpt2+digits"

# `tokenizer.ggml.pre` -> the split its merges were learned with (names as llama.cpp writes them).
_BYTE_LEVEL_SPLITS: dict[str, str] = {
    "default": _GPT2, "gpt2": _GPT2, "phi-2": _GPT2, "stablelm2": _GPT2, "olmo": _GPT2, "jais": _GPT2,
    "smollm": _GPT2_DIGITS, "starcoder": _GPT2_DIGITS, "refact": _GPT2_DIGITS, "command-r": _GPT2_DIGITS,
    "codeshell": _GPT2_DIGITS, "exaone": _GPT2_DIGITS, "minerva-7b": _GPT2_DIGITS,
    **dict.fromkeys(["llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "dbrx",
                     "smaug-bpe", "lfm2", "midm-2.0"], _LLAMA3_SPLIT),
    **dict.fromkeys(["qwen2", "deepseek-r1-qwen", "megrez", "kormo"], _QWEN2_SPLIT),
    "qwen35": _QWEN35_SPLIT, "tekken": _TEKKEN_SPLIT,
    **dict.fromkeys(["gpt-4o", "llama4", "minimax-m2"], _GPT4O_SPLIT),
}
# Pre-types whose reference tokenizer.json sets `ignore_merges` (a word found in the vocabulary is taken
# whole; llama.cpp does the same for these), and pre-types whose tokenizer.json normalizes to NFC first.
_IGNORE_MERGES_PRE = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"}
_NFC_PRE = {"qwen2", "deepseek-r1-qwen", "qwen35"}

# Control tokens that end an assistant turn in common chat formats (also in llama.cpp's EOG list).
END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>", "<|end|>", "<|endoftext|>",
                      "<|end_of_text|>", "<EOT>", "<|return|>", "<|call|>", "<｜end▁of▁sentence｜>", "</s>")


@lru_cache(maxsize=1)
def byte_level_alphabet() -> dict[int, str]:
    """GPT-2's byte -> printable character table used to spell byte-level BPE tokens."""
    printable = {*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)}
    unprintable = [b for b in range(256) if b not in printable]  # spelled as chr(256), chr(257), ...
    return {b: chr(b) if b in printable else chr(256 + unprintable.index(b)) for b in range(256)}


def _split_merge(merge: str, source: str) -> tuple[str, str]:
    # The separator is the first space after the first character (a piece may itself be a space).
    cut = merge.find(" ", 1)
    if cut < 0:
        raise ValueError(f"{source}: tokenizer merge {merge!r} is not two pieces separated by a space")
    return merge[:cut], merge[cut + 1:]


def merges_from_scores(tokens: list[str], scores: list[float], mergeable: list[bool]) -> list[tuple[str, str]]:
    """BPE merges implied by a SentencePiece vocabulary: every split of a piece into two pieces of the
    vocabulary, best merged-piece score first (ties: longer left piece, then vocabulary order)."""
    ids = {t: i for i, t in enumerate(tokens) if mergeable[i]}
    found = []
    for merged, score, ok in zip(tokens, scores, mergeable):
        if not ok or len(merged) < 2:
            continue
        local = [(merged[:k], merged[k:]) for k in range(1, len(merged)) if merged[:k] in ids and merged[k:] in ids]
        local.sort(key=lambda pair: (ids[pair[0]], ids[pair[1]]))
        found.extend((score, left, right) for left, right in local)
    found.sort(key=lambda m: (m[0], len(m[1]), len(m[2])), reverse=True)
    return [(left, right) for _, left, right in found]


class Tokenizer:
    """A model's tokenizer: `encode`/`decode`, its special tokens and its chat template."""

    def __init__(self, backend: tokenizers.Tokenizer, *, bos_token: str | None, eos_token: str | None,
                 unk_token: str | None = None, pad_token: str | None = None,
                 chat_templates: dict[str, str] | None = None, extra_eos_ids: tuple[int, ...] = (),
                 source: str = "<tokenizer>"):
        self.backend = backend
        self.source = source
        self.bos_token, self.eos_token, self.unk_token, self.pad_token = bos_token, eos_token, unk_token, pad_token
        self.chat_templates = dict(chat_templates or {})
        self._vocab = backend.get_vocab(with_added_tokens=True)
        self._vocab_size = max(self._vocab.values(), default=-1) + 1
        self._special_ids = sorted({i for i, t in backend.get_added_tokens_decoder().items() if t.special})
        self._eos_ids = sorted({i for i in (self.eos_token_id, *extra_eos_ids) if i is not None})

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_gguf(cls, path: str | os.PathLike) -> Tokenizer:
        from onecat.models.gguf_file import GGUFFile

        return cls.from_gguf_metadata(GGUFFile(path).metadata, source=os.fspath(path))

    @classmethod
    def from_gguf_metadata(cls, metadata: dict[str, Any], source: str = "<gguf>") -> Tokenizer:
        """The tokenizer a GGUF file's metadata describes."""
        model = metadata.get("tokenizer.ggml.model")
        tokens = metadata.get("tokenizer.ggml.tokens")
        if not isinstance(tokens, list) or not tokens:
            raise ValueError(f"{source}: GGUF metadata has no tokenizer.ggml.tokens vocabulary")
        types = metadata.get("tokenizer.ggml.token_type") or [TOKEN_NORMAL] * len(tokens)
        if len(types) != len(tokens):
            raise ValueError(f"{source}: tokenizer.ggml.token_type has {len(types)} entries for {len(tokens)} tokens")

        def token_at(key: str) -> str | None:
            index = metadata.get(f"tokenizer.ggml.{key}")
            return tokens[index] if isinstance(index, int) and 0 <= index < len(tokens) else None

        arch = str(metadata.get("general.architecture", ""))
        if model == "gpt2":
            backend = _byte_level_backend(metadata, tokens, types, source)
            add_bos_default = False
        elif model == "llama":
            backend = _sentencepiece_backend(metadata, tokens, types, token_at("unknown_token_id"), arch, source)
            add_bos_default = True  # llama.cpp and transformers both add BOS to an SPM vocab that does not say
        else:
            raise ValueError(f"{source}: tokenizer.ggml.model {model!r} is not supported "
                             "(supported: 'gpt2', 'llama')")

        bos, eos, unk, pad = (token_at(f"{k}_token_id") for k in ("bos", "eos", "unknown", "padding"))
        special = [AddedToken(t, special=True, normalized=False)
                   for t, ty in zip(tokens, types) if ty == TOKEN_CONTROL]
        special += [AddedToken(t, special=True, normalized=False) for t in (bos, eos, unk, pad) if t is not None]
        backend.add_special_tokens(special)
        backend.add_tokens([AddedToken(t, special=False, normalized=False)
                            for t, ty in zip(tokens, types) if ty == TOKEN_USER_DEFINED and t
                            and not (model == "llama" and arch.startswith("gemma") and not t.strip(" "))])
        add_bos = bool(metadata.get("tokenizer.ggml.add_bos_token", add_bos_default))
        add_eos = bool(metadata.get("tokenizer.ggml.add_eos_token", False))
        _set_bos_eos_post_processor(backend, bos if add_bos else None, eos if add_eos else None)

        templates = {}
        if isinstance(metadata.get("tokenizer.chat_template"), str):
            templates["default"] = metadata["tokenizer.chat_template"]
        for key, value in metadata.items():  # llama.cpp writes named templates as tokenizer.chat_template.NAME
            if key.startswith("tokenizer.chat_template.") and isinstance(value, str):
                templates[key.removeprefix("tokenizer.chat_template.")] = value
        explicit_eos = [metadata.get(f"tokenizer.ggml.{k}_token_id") for k in ("eot", "eom")]
        extra = [i for i in explicit_eos if isinstance(i, int) and 0 <= i < len(tokens)]
        extra += _end_of_turn_ids(tokens, types, templates)
        return cls(backend, bos_token=bos, eos_token=eos, unk_token=unk, pad_token=pad,
                   chat_templates=templates, extra_eos_ids=tuple(extra), source=source)

    @classmethod
    def from_hf_dir(cls, path: str | os.PathLike) -> Tokenizer:
        """The tokenizer of a Hugging Face model directory (tokenizer.json + tokenizer_config.json)."""
        path = os.fspath(path)
        tokenizer_json = os.path.join(path, "tokenizer.json")
        if not os.path.isfile(tokenizer_json):
            raise ValueError(f"{path}: no tokenizer.json (only fast-tokenizer directories are supported)")
        try:
            backend = tokenizers.Tokenizer.from_file(tokenizer_json)
        except Exception as e:
            raise ValueError(f"{tokenizer_json}: not a readable tokenizers file ({e})") from e
        config = _read_json(os.path.join(path, "tokenizer_config.json")) or {}
        names = {k: _token_content(config.get(k)) for k in ("bos_token", "eos_token", "unk_token", "pad_token")}
        backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in names.values() if t])
        # As transformers 5: tokenizer.json's post-processor alone decides whether BOS/EOS are added
        # (tokenizer_config.json's add_bos_token/add_eos_token are ignored when tokenizer.json exists).
        templates = _hf_chat_templates(path, config)
        vocab = backend.get_vocab(with_added_tokens=True)
        tokens_by_id = {i: t for t, i in vocab.items()}
        control = {a.content for a in backend.get_added_tokens_decoder().values() if a.special}
        eos_from_generation = _read_json(os.path.join(path, "generation_config.json")) or {}
        extra = eos_from_generation.get("eos_token_id", [])
        extra = [extra] if isinstance(extra, int) else [i for i in extra if isinstance(i, int)]
        extra += [vocab[t] for t in END_OF_TURN_TOKENS
                  if t in control and any(t in tpl for tpl in templates.values())]
        extra = [i for i in extra if i in tokens_by_id]
        return cls(backend, **names, chat_templates=templates, extra_eos_ids=tuple(extra), source=path)

    # ---- encoding and decoding ----------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`; special tokens written in the text become their ids. With
        `add_special_tokens`, BOS/EOS are added exactly where the reference tokenizer adds them."""
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, not {type(text).__name__}")
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """The text of `ids`. Bytes of an unfinished UTF-8 character (a prefix of a streamed
        generation) come out as U+FFFD, as in transformers; no tokenization-space clean-up."""
        return self.backend.decode(self._checked_ids(ids), skip_special_tokens=skip_special_tokens)

    def token_texts(self, ids: list[int]) -> list[str]:
        """Each id's text decoded on its own (' world' for 'Ġworld'; U+FFFD for a piece of a UTF-8 character),
        special tokens kept: how vLLM spells the tokens of logprobs."""
        return self.backend.decode_batch([[i] for i in self._checked_ids(ids)], skip_special_tokens=False)

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        """The vocabulary entries of `ids`, spelled as stored (e.g. 'Ġworld', '▁world', '<0x0A>')."""
        ids = self._checked_ids(ids)
        return [self.backend.id_to_token(i) or "" for i in ids]

    def _checked_ids(self, ids: list[int]) -> list[int]:
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self._vocab_size]
        if bad:
            raise ValueError(f"token ids {bad[:5]} are outside the vocabulary (size {self._vocab_size})")
        return ids

    def token_to_id(self, token: str) -> int | None:
        return self._vocab.get(token)

    # ---- vocabulary facts ---------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        """Number of token ids (highest id + 1), added tokens included."""
        return self._vocab_size

    @property
    def bos_token_id(self) -> int | None:
        return self._vocab.get(self.bos_token) if self.bos_token is not None else None

    @property
    def eos_token_id(self) -> int | None:
        return self._vocab.get(self.eos_token) if self.eos_token is not None else None

    @property
    def pad_token_id(self) -> int | None:
        return self._vocab.get(self.pad_token) if self.pad_token is not None else None

    @property
    def eos_token_ids(self) -> list[int]:
        """Ids that end a generation: EOS; the file's explicit EOT/EOM ids (GGUF) or generation_config's
        eos_token_id (HF); and every control token of `END_OF_TURN_TOKENS` the chat template writes
        (e.g. `<|im_end|>`, `<|eot_id|>`, `<end_of_turn>`)."""
        return list(self._eos_ids)

    @property
    def all_special_ids(self) -> list[int]:
        """Ids of the special tokens (control tokens and the named bos/eos/unk/pad), sorted."""
        return list(self._special_ids)

    @property
    def chat_template(self) -> str | None:
        """The default chat template, or None when the model has none."""
        return self.chat_templates.get("default")

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = False,
                            tokenize: bool = False, **kwargs: Any) -> str | list[int]:
        """Render `messages` with the model's chat template (as transformers' `apply_chat_template`);
        `tokenize=True` returns the ids of the rendered text (no BOS added: the template writes it)."""
        template = kwargs.pop("chat_template", None)
        if template is None:
            name = "tool_use" if kwargs.get("tools") is not None and "tool_use" in self.chat_templates else "default"
            template = self.chat_templates.get(name)
        if template is None:
            raise ValueError(f"{self.source}: this model has no chat template; send a plain prompt "
                             "or configure a chat template")
        named = {"bos_token": self.bos_token, "eos_token": self.eos_token,
                 "unk_token": self.unk_token, "pad_token": self.pad_token}
        context = {**{k: v for k, v in named.items() if v is not None}, **kwargs}
        text = render_chat_template(template, messages, add_generation_prompt=add_generation_prompt, **context)
        return self.encode(text, add_special_tokens=False) if tokenize else text

    def __repr__(self) -> str:
        return (f"Tokenizer({self.source!r}, vocab_size={self._vocab_size}, "
                f"bos={self.bos_token!r}, eos={self.eos_token!r})")


def _byte_level_backend(metadata: dict, tokens: list[str], types: list[int], source: str) -> tokenizers.Tokenizer:
    pre = metadata.get("tokenizer.ggml.pre") or "default"
    split = _BYTE_LEVEL_SPLITS.get(pre)
    if split is None:
        raise ValueError(f"{source}: byte-level pre-tokenizer {pre!r} (tokenizer.ggml.pre) is not supported; "
                         f"known: {sorted(_BYTE_LEVEL_SPLITS)}")
    merges = metadata.get("tokenizer.ggml.merges")
    if not isinstance(merges, list) or not merges:
        raise ValueError(f"{source}: byte-level vocabulary without tokenizer.ggml.merges")
    alphabet = byte_level_alphabet()
    spelled = set(alphabet.values())
    vocab = {}
    for i, (token, token_type) in enumerate(zip(tokens, types)):
        # Control/user-defined tokens are stored as their text; a normal token outside the byte
        # alphabet is respelled byte by byte so the merges can reach it.
        if token_type == TOKEN_NORMAL and not set(token) <= spelled:
            token = "".join(alphabet[b] for b in token.encode("utf-8"))
        vocab[token] = i
    model = BPE(vocab=vocab, merges=[_split_merge(m, source) for m in merges],
                ignore_merges=pre in _IGNORE_MERGES_PRE, fuse_unk=False)
    backend = tokenizers.Tokenizer(model)
    gpt2_split = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if split == _GPT2:
        backend.pre_tokenizer = gpt2_split
    elif split == _GPT2_DIGITS:
        backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), gpt2_split])
    else:
        backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), behavior="isolated"),
                                                         pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                                  use_regex=False)])
    if pre in _NFC_PRE:
        backend.normalizer = normalizers.NFC()
    backend.decoder = decoders.ByteLevel()
    return backend


def _sentencepiece_backend(metadata: dict, tokens: list[str], types: list[int], unk: str | None,
                           arch: str, source: str) -> tokenizers.Tokenizer:
    gemma = arch.startswith("gemma")
    if gemma:  # Gemma files store runs of spaces as spaces; its tokenizer spells them with "▁"
        tokens = ["▁" * len(t) if t and not t.strip(" ") else t for t in tokens]
    vocab = {t: i for i, t in enumerate(tokens)}
    if isinstance(metadata.get("tokenizer.ggml.merges"), list) and metadata["tokenizer.ggml.merges"]:
        merges = [_split_merge(m, source) for m in metadata["tokenizer.ggml.merges"]]
    else:
        scores = metadata.get("tokenizer.ggml.scores")
        if gemma or not isinstance(scores, list):  # Gemma's scores do not follow its merge order; its vocab order does
            scores = [-float(i) for i in range(len(tokens))]
        if len(scores) != len(tokens):
            raise ValueError(f"{source}: tokenizer.ggml.scores has {len(scores)} entries for {len(tokens)} tokens")
        merges = merges_from_scores(tokens, scores, [ty in (TOKEN_NORMAL, 0) or (gemma and not t.strip("▁"))
                                                     for t, ty in zip(tokens, types)])
    backend = tokenizers.Tokenizer(BPE(vocab=vocab, merges=merges, unk_token=unk, fuse_unk=True, byte_fallback=True))
    # Spaces become "▁" in a normalizer (no pre-tokenizer split), and with add_space_prefix each run of
    # text (the whole text, and the text after each special token) gets one "▁" in front, as SentencePiece
    # and llama.cpp do; so " x" starts "▁▁x". Phi-3 files say nothing but are written this way too.
    add_prefix = not gemma and bool(metadata.get("tokenizer.ggml.add_space_prefix", True))
    replace_spaces = normalizers.Replace(" ", "▁")
    backend.normalizer = (normalizers.Sequence([normalizers.Prepend("▁"), replace_spaces]) if add_prefix
                          else replace_spaces)
    steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    if add_prefix:
        steps.append(decoders.Strip(" ", 1, 0))
    backend.decoder = decoders.Sequence(steps)
    return backend


def _set_bos_eos_post_processor(backend: tokenizers.Tokenizer, bos: str | None, eos: str | None) -> None:
    """Add `bos` before and `eos` after each sequence (None: not added), as transformers' post-processor."""
    def wrap(piece: str, type_id: int) -> list[str]:
        return [f"{bos}:{type_id}"] * bool(bos) + [piece] + [f"{eos}:{type_id}"] * bool(eos)

    vocab = backend.get_vocab(with_added_tokens=True)
    special = [(t, vocab[t]) for t in dict.fromkeys((bos, eos)) if t is not None]
    backend.post_processor = processors.TemplateProcessing(
        single=" ".join(wrap("$A:0", 0)), pair=" ".join(wrap("$A:0", 0) + wrap("$B:1", 1)), special_tokens=special)


def _end_of_turn_ids(tokens: list[str], types: list[int], templates: dict[str, str]) -> list[int]:
    wanted = {t for t in END_OF_TURN_TOKENS if any(t in tpl for tpl in templates.values())}
    return [i for i, (t, ty) in enumerate(zip(tokens, types))
            if ty in (TOKEN_CONTROL, TOKEN_USER_DEFINED) and t in wanted]


def _read_json(path: str) -> Any:
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not readable JSON ({e})") from e


def _token_content(value: Any) -> str | None:
    if isinstance(value, dict):  # serialized AddedToken
        value = value.get("content")
    return value if isinstance(value, str) else None


def _hf_chat_templates(path: str, config: dict) -> dict[str, str]:
    """Named chat templates of an HF directory: chat_template.jinja (+ additional_chat_templates/*.jinja)
    as transformers prefers them, else tokenizer_config.json's chat_template (a string or a list of
    {name, template}), else a processor's chat_template.json."""
    templates = {}
    jinja_path, extra_dir = os.path.join(path, "chat_template.jinja"), os.path.join(path, "additional_chat_templates")
    if os.path.isfile(jinja_path):
        templates["default"] = Path(jinja_path).read_text(encoding="utf-8")
    if os.path.isdir(extra_dir):
        for name in sorted(os.listdir(extra_dir)):
            if name.endswith(".jinja"):
                templates[name.removesuffix(".jinja")] = Path(extra_dir, name).read_text(encoding="utf-8")
    if templates:
        return templates
    raw = config.get("chat_template")
    if raw is None:
        raw = (_read_json(os.path.join(path, "chat_template.json")) or {}).get("chat_template")
    if isinstance(raw, str):
        return {"default": raw}
    if isinstance(raw, list):
        return {item["name"]: item["template"] for item in raw if isinstance(item, dict) and "name" in item}
    return {}
