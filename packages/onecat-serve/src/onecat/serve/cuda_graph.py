"""CUDA graphs of the decode step: one captured graph per batch bucket, replayed when every
scheduled request feeds exactly one token (plain decode, no drafts).

At batch 1 an eager decode step is almost all host time (Python, the registry's per-call problem
lookup, one driver launch per kernel; tools/ncu measured kernels busy 5% of the step). A graph
replays the whole forward plus the LM head as one launch.

What a graph needs, and how it gets it:
- Static input buffers (ids, positions, slot mapping, sequence lengths, block tables) sized for
  the largest bucket; each step writes its rows with one host-to-device copy and pads the rest.
- Padding rows must not touch real KV: they write their token into one spare cache block that no
  request owns (`pad_block`, the runner allocates num_blocks + 1 blocks) and attend to it alone.
- Launch shapes fixed at capture: the metadata says max_query_len = 1 and max_seq_len =
  max_model_len, the bound the attention providers size their grids with (attention_ops plans
  its split-KV grid from max_seq_len and the SM count only), so one capture serves every step.
- The providers each op selected for the captured problem are the ones eager mode selects for
  the same batch (selection depends on shapes, dtypes and device, not on values).
"""

from __future__ import annotations

import logging

import torch

from onecat.kernels import AttentionMetadata, registry
from onecat.kernels.attention_metadata import batch_bucket
from onecat.kernels.registry import REFERENCE

log = logging.getLogger(__name__)


class GraphCaptureRefused(RuntimeError):
    """The admitted route cannot be captured (the runner then stays eager and says why)."""


HOST_LIST_OPS = ("paged_attention",)  # their torch references loop over metadata.*_cpu


def graph_unsafe_ops(used) -> list[str]:
    """Of the selections a capture used, the ones whose provider is the torch reference of a host-list op."""
    return sorted({s.problem.describe() for s in used if s.problem.op in HOST_LIST_OPS and s.provider.name == REFERENCE})


def batch_buckets(max_batch: int) -> list[int]:
    """Every planning bucket (attention_metadata.batch_bucket: 1, 2, 4, 8, 16, 24, ...) up to the one
    holding max_batch, so a batch of n always replays the graph of batch_bucket(n)."""
    out, n = [], 1
    while not out or out[-1] < batch_bucket(max_batch):
        out.append(batch_bucket(n))
        n = out[-1] + 1
    return out


class DecodeGraphs:
    """Captures model.forward + compute_logits for each batch bucket; `run` replays one."""

    def __init__(self, model, kv_caches, device: torch.device, block_size: int, max_model_len: int,
                 pad_block: int, max_batch: int, host_buffers: int = 1):
        if device.type != "cuda":
            raise ValueError("CUDA graphs need a CUDA device")
        self.model, self.kv_caches, self.device = model, kv_caches, device
        self.block_size, self.max_model_len, self.pad_block = block_size, max_model_len, pad_block
        self.buckets = batch_buckets(max_batch)
        self.max_batch = self.buckets[-1]
        self.max_blocks = -(-max_model_len // block_size)
        B, dev = self.max_batch, device
        # static inputs as views of one int32 device buffer (int64 words first: ids, positions, slots;
        # then int32: seq_lens, block tables), filled by one copy per step from a pinned host twin
        W = self.max_blocks
        self._dev = torch.full((6 * B + B + B * W,), pad_block, dtype=torch.int32, device=dev)
        dev64, dev32 = self._dev[:6 * B].view(torch.long), self._dev[6 * B:]
        self.ids, self.positions, self.slots = dev64[0:B], dev64[B:2 * B], dev64[2 * B:3 * B]
        self.ids.zero_()
        self.positions.zero_()
        self.slots.fill_(pad_block * block_size)
        self.seq_lens, self.tables = dev32[0:B], dev32[B:].view(B, W)
        self.seq_lens.fill_(1)
        self.qsl = torch.arange(B + 1, dtype=torch.int32, device=dev)
        # host_buffers = 2 under asynchronous scheduling: the host fills one set while the other's copy
        # may still wait in the stream behind the step before
        self._host_sets = [torch.empty(6 * B + B + B * W, dtype=torch.int32).pin_memory() for _ in range(host_buffers)]
        self._turn = 0
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.logits: dict[int, torch.Tensor] = {}
        self.pool = None

    def _metadata(self, b: int) -> AttentionMetadata:
        return AttentionMetadata(query_start_loc=self.qsl[:b + 1], seq_lens=self.seq_lens[:b],
                                 block_tables=self.tables[:b], slot_mapping=self.slots[:b],
                                 query_start_loc_cpu=list(range(b + 1)), seq_lens_cpu=[self.max_model_len] * b,
                                 max_query_len=1, max_seq_len=self.max_model_len,
                                 host_written=True)  # run() copies them in before each replay

    def _forward(self, b: int) -> torch.Tensor:
        hidden = self.model.forward(self.ids[:b], self.positions[:b], self.kv_caches, self._metadata(b))
        return self.model.compute_logits(hidden, upcast=False)  # the sampler converts what it must

    @torch.inference_mode()
    def capture(self) -> None:
        """Capture every bucket, largest first (later, smaller graphs reuse its memory pool)."""
        for b in reversed(self.buckets):
            self._forward(b)  # eager warm-up: providers selected, kernels compiled and loaded
            torch.cuda.synchronize(self.device)
            g = torch.cuda.CUDAGraph()
            # what this capture used (not registry.selections(): another model in the process, e.g. a
            # drafter or an earlier test's, may have selected the reference for its own shapes)
            with registry.recording() as used, torch.cuda.graph(g, pool=self.pool):
                self.logits[b] = self._forward(b)
            if self.pool is None:
                self.pool = g.pool()
            self.graphs[b] = g
            unsafe = graph_unsafe_ops(used)
            if unsafe:
                self.graphs.clear()
                raise GraphCaptureRefused("the captured decode step would use host-side reference code that "
                                          f"reads per-step host lists: {unsafe}")
        torch.cuda.synchronize(self.device)
        log.info("captured decode CUDA graphs for batch sizes %s", self.buckets)

    def bucket(self, n: int) -> int | None:
        b = batch_bucket(n)
        return b if b in self.graphs else None

    @torch.inference_mode()
    def run(self, seqs: list[tuple[int, int, list[int]]], fed_from=None, fed_prefix=None) -> torch.Tensor:
        """seqs: (token_id, position, block_ids) per request -> logits [len(seqs), V] as the model's
        compute_logits(upcast=False) gives them (FP16 for Llama-style heads: the sampler converts).
        The returned tensor is the graph's output buffer: consume it before the next run.
        Asynchronous scheduling, tokens sampled last step and still on the device: fed_from (rows,
        src, tokens): rows[j] feeds tokens[src[j]] (index tensors on the device); fed_prefix
        (tokens): rows 0..len(tokens)-1 feed them in order (the steady decode: one device copy, no
        index upload and gather kernels)."""
        n = len(seqs)
        b = self.bucket(n)
        if b is None:
            raise ValueError(f"batch {n} exceeds the largest captured graph ({self.max_batch})")
        B, W, bs = self.max_batch, self.max_blocks, self.block_size
        host = self._host_sets[self._turn]
        self._turn = (self._turn + 1) % len(self._host_sets)
        words = host.numpy()  # a view of the pinned buffer: no torch dispatch per element
        h, g = words[:6 * B].view("int64"), words[6 * B:]
        ids, pos, slots = h[0:B], h[B:2 * B], h[2 * B:3 * B]
        lens, tables = g[0:B], g[B:].reshape(B, W)
        ids[:b] = 0
        pos[:b] = 0
        slots[:b] = self.pad_block * bs
        lens[:b] = 1
        tables[:b] = self.pad_block
        for i, (tok, p, blocks) in enumerate(seqs):
            if len(blocks) > W:
                raise ValueError(f"request holds {len(blocks)} blocks, graphs were captured for {W}")
            ids[i], pos[i], lens[i] = tok, p, p + 1
            slots[i] = blocks[p // bs] * bs + p % bs
            tables[i, :len(blocks)] = blocks
        # a host buffer set is rewritten only after the caller has read the logits of the step that
        # used it (synchronous: this step's; asynchronous, two sets: the step before)
        used = 6 * B + B + b * W  # the int64 inputs, seq_lens, the bucket's block-table rows
        self._dev[:used].copy_(host[:used], non_blocking=True)
        if fed_from is not None:
            rows, src, tokens = fed_from
            self.ids[rows] = tokens[src]
        if fed_prefix is not None:
            self.ids[:len(fed_prefix)].copy_(fed_prefix)
        self.graphs[b].replay()
        return self.logits[b][:n]
