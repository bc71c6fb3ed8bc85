"""Per-step attention metadata: the only thing attention providers learn about the batch."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

DECODE_MAX_QUERY = 16  # new tokens per request the decode/verify tiles take; more is prefill


def batch_bucket(n: int) -> int:
    """The batch size launches are planned for: 1, 2, 4, 8, then multiples of 8 (vLLM's CUDA-graph
    sizes). Decode captured for a bucket and decode run eagerly at any batch inside it then use the
    same split-KV plan, hence the same fp32 summation order and the same tokens."""
    if n <= 8:
        return 1 if n <= 1 else 1 << (n - 1).bit_length()
    return -(-n // 8) * 8


@dataclass
class AttentionMetadata:
    """Where each request's new tokens sit in the flat batch and where its context lives.

    query_start_loc [B+1]: request i's new tokens are rows query_start_loc[i]:query_start_loc[i+1].
    seq_lens [B]: tokens in request i's cache after this step (context + new tokens).
    block_tables [B, max_blocks] int32: physical KV block ids per request, in order.
    slot_mapping [T] int64: flat cache slot (block * block_size + offset) of each new token.
    The *_cpu lists mirror the tensors on the host so reference code never syncs the device.
    host_written: query_start_loc, seq_lens and block_tables are filled by host copies issued before
    the step's first kernel and no kernel of the step writes them (the CUDA-graph decode's static
    buffers), and the cache rows of each request's earlier keys (positions < seq_len - its query
    length) were written before the step began (only this step's tokens' rows are written in it):
    on sm_90 the decode attention then reads the metadata and those keys' K/V before waiting on the
    kernel ahead of it (programmatic dependent launch). Leave False where any of them may come from a
    kernel of the same step.
    """

    query_start_loc: torch.Tensor
    seq_lens: torch.Tensor
    block_tables: torch.Tensor
    slot_mapping: torch.Tensor
    query_start_loc_cpu: list[int]
    seq_lens_cpu: list[int]
    max_query_len: int
    max_seq_len: int
    host_written: bool = False
    _split: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def num_requests(self) -> int:
        return len(self.seq_lens_cpu)

    @property
    def is_pure_decode(self) -> bool:
        return self.max_query_len == 1

    @property
    def num_leading_decodes(self) -> int:
        """Requests at the head of the batch with at most DECODE_MAX_QUERY new tokens (the
        scheduler puts running requests, which decode, before newly admitted prompts)."""
        q = self.query_start_loc_cpu
        n = 0
        while n < self.num_requests and q[n + 1] - q[n] <= DECODE_MAX_QUERY:
            n += 1
        return n

    def split(self, n: int) -> tuple[AttentionMetadata, AttentionMetadata]:
        """(the first n requests, the rest) as two batches of their own; the rest's query rows
        start at 0. Made once per step (every layer's attention asks for the same split)."""
        if n not in self._split:
            self._split[n] = self._requests(0, n), self._requests(n, self.num_requests)
        return self._split[n]

    def _requests(self, lo: int, hi: int) -> AttentionMetadata:
        """Requests [lo, hi) as a batch of their own (query rows renumbered from 0)."""
        q, lens = self.query_start_loc_cpu[lo:hi + 1], self.seq_lens_cpu[lo:hi]
        r0, r1 = q[0], q[-1]
        qsl = self.query_start_loc[lo:hi + 1]
        return replace(self, query_start_loc=qsl - r0 if r0 else qsl, seq_lens=self.seq_lens[lo:hi],
                       block_tables=self.block_tables[lo:hi], slot_mapping=self.slot_mapping[r0:r1],
                       query_start_loc_cpu=[x - r0 for x in q], seq_lens_cpu=lens,
                       max_query_len=max(b - a for a, b in zip(q, q[1:])), max_seq_len=max(lens), _split={},
                       host_written=self.host_written and not r0)  # qsl - r0 is a kernel's output
