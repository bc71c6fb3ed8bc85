"""Per-step attention metadata: the only thing attention providers learn about the batch."""

from __future__ import annotations

from dataclasses import dataclass

import torch


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
    """

    query_start_loc: torch.Tensor
    seq_lens: torch.Tensor
    block_tables: torch.Tensor
    slot_mapping: torch.Tensor
    query_start_loc_cpu: list[int]
    seq_lens_cpu: list[int]
    max_query_len: int
    max_seq_len: int

    @property
    def num_requests(self) -> int:
        return len(self.seq_lens_cpu)

    @property
    def is_pure_decode(self) -> bool:
        return self.max_query_len == 1
