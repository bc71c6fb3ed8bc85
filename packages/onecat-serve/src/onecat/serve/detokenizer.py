"""Incremental detokenization and stop strings.

Text grows by decoding a short window of recent tokens twice (with and without the newest
ones) and keeping the difference; a window that ends inside a multi-byte UTF-8 character
decodes to U+FFFD and is held back until the character completes, so streamed text never
carries broken characters. While a request runs, the last (longest stop string - 1)
characters are held back too, so a stop string is never streamed before it is recognized.
"""

from __future__ import annotations

from .sampling_params import SamplingParams

PREFIX_WINDOW = 6  # tokens of left context that make a piece decode as it does mid-text


class IncrementalDetokenizer:
    def __init__(self, tokenizer, prompt_token_ids: list[int], params: SamplingParams):
        self.tokenizer = tokenizer
        self.skip_special = params.skip_special_tokens
        self.stop = params.stop
        self.include_stop = params.include_stop_str_in_output
        self.hold = max((len(s) for s in self.stop), default=1) - 1
        self.ids = list(prompt_token_ids[-PREFIX_WINDOW:])
        self.prefix_offset = 0
        self.read_offset = len(self.ids)
        self.text = ""
        self.stop_matched: str | None = None
        self.num_added = 0  # output tokens seen

    def add(self, token_id: int) -> str | None:
        """Append one token; returns the stop string if the text now contains one."""
        self.num_added += 1
        self.ids.append(token_id)
        prefix = self.tokenizer.decode(self.ids[self.prefix_offset:self.read_offset], skip_special_tokens=self.skip_special)
        full = self.tokenizer.decode(self.ids[self.prefix_offset:], skip_special_tokens=self.skip_special)
        if len(full) > len(prefix) and not full.endswith("\ufffd"):
            new = full[len(prefix):]
            self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
        else:
            new = ""
        if not new:
            return None
        start = max(0, len(self.text) - self.hold)
        self.text += new
        found = [(i, s) for s in self.stop if (i := self.text.find(s, start)) != -1]
        if found:
            idx, s = min(found)
            self.text = self.text[: idx + len(s)] if self.include_stop else self.text[:idx]
            self.stop_matched = s
            return s
        return None

    def flush(self) -> None:
        """At the end: emit tokens held back for an incomplete character, as they decode."""
        if self.stop_matched is None and self.read_offset < len(self.ids):
            prefix = self.tokenizer.decode(self.ids[self.prefix_offset:self.read_offset], skip_special_tokens=self.skip_special)
            full = self.tokenizer.decode(self.ids[self.prefix_offset:], skip_special_tokens=self.skip_special)
            self.text += full[len(prefix):]
            self.read_offset = len(self.ids)

    def output_text(self, finished: bool) -> str:
        if finished or self.stop_matched or not self.hold:
            return self.text
        return self.text[: max(0, len(self.text) - self.hold)]
