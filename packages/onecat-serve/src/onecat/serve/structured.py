"""Structured outputs: generation held to a JSON schema, any JSON object, a regex, a list of choices or an
EBNF grammar, by xgrammar (the library vLLM and SGLang use). At each step a request's grammar matcher says
which tokens may come next; the sampler sets the others' logits to -inf before penalties, temperature and
truncation (sampler.apply_penalties), and every token the request emits advances its matcher
(Request.append_output_token). Once the grammar is complete only the stop tokens remain allowed; a
matcher that has accepted one ends the request (Scheduler._check_token_stop).

The mask is built on the host from xgrammar's bitmask and applied with torch on the logits' device, so
every route (the CPU reference, Volta, newer GPUs) runs the same code. Requests with structured output
take the synchronous step (their sampling depends on the tokens before) and get no speculative drafts.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class StructuredOutputs:
    """What the output must match: exactly one of these (vLLM's StructuredOutputsParams)."""

    json: str | dict | None = None  # a JSON schema (as a dict or its JSON text)
    json_object: bool = False  # any JSON object
    regex: str | None = None
    choice: tuple[str, ...] | None = None  # one of these strings
    grammar: str | None = None  # an EBNF grammar (GBNF, as llama.cpp writes it; root rule `root`)

    def __post_init__(self) -> None:
        if self.choice is not None:
            object.__setattr__(self, "choice", tuple(self.choice))
        given = [k for k in ("json", "regex", "choice", "grammar") if getattr(self, k) is not None]
        given += ["json_object"] if self.json_object else []
        if len(given) != 1:
            raise ValueError("structured output takes exactly one of json, json_object, regex, choice, grammar; "
                             f"got {', '.join(given) or 'none'}")
        if self.choice is not None and (not self.choice or not all(isinstance(c, str) and c for c in self.choice)):
            raise ValueError("structured output choice must be a non-empty list of non-empty strings")


class GrammarCompiler:
    """One per engine: the model's vocabulary as xgrammar sees it and a cache of compiled grammars."""

    def __init__(self, tokenizer, vocab_size: int):
        try:
            import xgrammar as xgr
        except ImportError as e:  # pinned in requirements; a trimmed install may lack it
            raise ValueError(f"structured output needs xgrammar (pip install xgrammar): {e}") from None
        self.xgr, self.vocab_size = xgr, vocab_size
        vocab = tokenizer.convert_ids_to_tokens(list(range(tokenizer.vocab_size)))
        if "<0x00>" in tokenizer.backend.get_vocab():
            kind = xgr.VocabType.BYTE_FALLBACK
        elif type(tokenizer.backend.decoder).__name__ == "ByteLevel":
            kind = xgr.VocabType.BYTE_LEVEL
        else:
            kind = xgr.VocabType.RAW
        first = tokenizer.encode("a", add_special_tokens=False)
        prefix = bool(first) and tokenizer.convert_ids_to_tokens(first[:1])[0].startswith("\u2581")
        info = xgr.TokenizerInfo(vocab, kind, vocab_size=vocab_size, stop_token_ids=list(tokenizer.eos_token_ids),
                                 add_prefix_space=prefix)
        self.compiler = xgr.GrammarCompiler(info)

    def compile(self, so: StructuredOutputs):
        """The compiled grammar of `so`; ValueError (API-ready) for a schema, regex or grammar xgrammar refuses."""
        try:
            if so.json_object:  # OpenAI's json_object: an object (vLLM compiles the same schema)
                return self.compiler.compile_json_schema('{"type": "object"}')
            if so.json is not None:
                schema = so.json if isinstance(so.json, str) else json.dumps(so.json)
                return self.compiler.compile_json_schema(schema)
            if so.regex is not None:
                return self.compiler.compile_regex(so.regex)
            if so.choice is not None:
                rule = " | ".join(json.dumps(c) for c in so.choice)  # EBNF string literals: JSON escapes
                return self.compiler.compile_grammar(f"root ::= {rule}")
            return self.compiler.compile_grammar(so.grammar)
        except (RuntimeError, ValueError, TypeError) as e:
            what = next(k for k in ("json", "regex", "choice", "grammar") if getattr(so, k) is not None)
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            first = re.sub(r"^\[[0-9:]+\] \S+:[0-9]+: ", "", first)  # xgrammar's "[time] file.cc:line: " prefix
            raise ValueError(f"structured output {what}: {first}") from None

    def matcher(self, compiled) -> Grammar:
        return Grammar(self.xgr, self.xgr.GrammarMatcher(compiled), self.vocab_size)


class Grammar:
    """One request's matcher: the tokens allowed next, and the tokens it has emitted."""

    def __init__(self, xgr, matcher, vocab_size: int):
        self.matcher, self.vocab_size = matcher, vocab_size
        self._bits = xgr.allocate_token_bitmask(1, vocab_size)
        self._shifts = torch.arange(32, dtype=torch.int32)

    def allowed(self) -> torch.Tensor:
        """[vocab_size] bool on the host: the tokens the grammar accepts next."""
        self.matcher.fill_next_token_bitmask(self._bits)
        words = self._bits[0]
        return ((words[:, None] >> self._shifts) & 1).bool().reshape(-1)[:self.vocab_size]

    def mask_(self, logits: torch.Tensor) -> torch.Tensor:
        """logits [V] with every token the grammar refuses set to -inf (in place; V >= the mask's width)."""
        keep = self.allowed().to(logits.device, non_blocking=True)
        logits[:keep.numel()].masked_fill_(~keep, -float("inf"))
        logits[keep.numel():] = -float("inf")
        return logits

    def accept(self, token_id: int) -> bool:
        return self.matcher.accept_token(token_id)

    @property
    def terminated(self) -> bool:
        return self.matcher.is_terminated()
