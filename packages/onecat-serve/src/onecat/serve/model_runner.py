"""Owns the model and the KV cache tensors; turns a SchedulerOutput into sampled tokens.

Hot path per step: build flat inputs (ids, positions, slots) and attention metadata on the
host, copy them over, run the model, gather the last hidden state of each sampling request,
compute logits, sample.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass

import torch

from onecat.kernels import AttentionMetadata, registry
from onecat.models.loader import LoadedModel, load_model

from .config import CacheConfig, EngineConfig
from .cuda_graph import DecodeGraphs, GraphCaptureRefused
from .request import PLACEHOLDER
from .sampler import SampleRow, prompt_token_logprobs, sample, sample_on_device, sample_with_drafts
from .scheduler import SchedulerOutput

log = logging.getLogger(__name__)

PROMPT_LOGPROBS_ROWS = 256  # prompt positions per LM-head call for prompt logprobs (a [rows, vocab] fp32 block each)

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
KV_DTYPES = {**DTYPES, "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} requested but no CUDA device is available")
    return dev


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        return torch.float16 if device.type == "cuda" else torch.float32
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of auto, {', '.join(DTYPES)}; got {name!r}")
    return DTYPES[name]


def resolve_kv_dtype(name: str, compute: torch.dtype) -> torch.dtype:
    """CacheConfig.dtype -> the paged caches' torch dtype: the compute dtype (auto) or FP8 (E4M3 / E5M2, written
    as fp8(x), scale 1); the model code writes and reads its caches in no other."""
    if name == "auto":
        return compute
    if name not in KV_DTYPES:
        raise ValueError(f"cache dtype must be one of auto, {', '.join(KV_DTYPES)}; got {name!r}")
    kv = KV_DTYPES[name]
    if kv != compute and kv.itemsize != 1:
        raise ValueError(f"cache dtype {name} with {str(compute).removeprefix('torch.')} compute: the caches are "
                         "kept in the compute dtype (auto) or FP8 (float8_e4m3fn, float8_e5m2)")
    return kv


def _lp(t):
    return t if t.logprob is not None else None


@dataclass
class InFlight:
    """A launched step (asynchronous scheduling) whose sampled tokens are on their way to the host."""
    out: SchedulerOutput
    rows: list[str]  # request id of each sampled token, in order
    tokens: torch.Tensor  # [len(rows)] int64 on the device: what the next step feeds
    host: torch.Tensor  # their copy on the host (pinned on CUDA), complete once `event` is
    event: object  # torch.cuda.Event, or None on the CPU

    def wait(self) -> dict[str, int]:
        if self.event is not None:
            self.event.synchronize()
        return dict(zip(self.rows, self.host.tolist()))


class ModelRunner:
    def __init__(self, config: EngineConfig, loaded: LoadedModel | None = None, progress: bool = True):
        self.config = config
        self.device = resolve_device(config.model.device)
        self.dtype = resolve_dtype(config.model.dtype, self.device)
        self.kv_dtype = resolve_kv_dtype(config.cache.dtype, self.dtype)
        self.loaded = loaded or load_model(config.model.path, self.dtype, self.device, progress=progress,
                                               dense=config.model.dense)
        self.model, self.spec = self.loaded.model, self.loaded.spec
        self.max_model_len = min(config.model.max_model_len or self.spec.max_position, self.spec.max_position)
        self.block_size = config.cache.block_size
        self.num_blocks = self._num_blocks(config.cache)
        # on CUDA one spare block past num_blocks (no request owns it): CUDA-graph padding rows write there
        spare = 1 if self.device.type == "cuda" else 0
        shape = (self.num_blocks + spare, self.block_size, self.spec.num_kv_heads, self.spec.head_dim)
        self.kv_caches = [(torch.zeros(shape, dtype=self.kv_dtype, device=self.device),
                           torch.zeros(shape, dtype=self.kv_dtype, device=self.device))
                          for _ in self.spec.attention_layers]
        self.generators: dict[str, torch.Generator] = {}
        self.seeds: dict[str, int] = {}
        self.keep_hidden = False  # MTP drafting: keep the scored positions' final hidden states
        self.last_hidden: dict[str, tuple[int, torch.Tensor]] = {}
        self._seed_source = torch.Generator().manual_seed(config.seed)
        self._warm_up()
        self.graphs, self.graph_status = self._capture_graphs()

    def _num_blocks(self, cache: CacheConfig) -> int:
        if cache.num_blocks:
            return cache.num_blocks
        per_block = (2 * len(self.spec.attention_layers) * self.block_size * self.spec.num_kv_heads
                     * self.spec.head_dim * torch.empty((), dtype=self.kv_dtype).element_size())
        if self.device.type == "cuda":
            free, total = torch.cuda.mem_get_info(self.device)
            budget = free - (1 - cache.gpu_memory_utilization) * total
        else:
            budget = cache.kv_cache_memory_gib * 2**30
        num = int(budget // per_block)
        if num < 1:
            raise ValueError(f"no memory left for the KV cache ({budget / 2**20:.0f} MiB for "
                             f"{per_block / 2**20:.2f} MiB blocks)")
        # never more than enough for max_num_seqs full contexts
        cap = -(-self.max_model_len // self.block_size) * self.config.scheduler.max_num_seqs
        return max(1, min(num, cap))

    def _warm_up(self) -> None:
        """One tiny forward so every op resolves its provider (reported at start-up)."""
        md = self._metadata([0, 2], [2], [[0]], [0, 1])
        ids = torch.zeros(2, dtype=torch.long, device=self.device)
        pos = torch.arange(2, device=self.device)
        with torch.inference_mode():
            self.model.compute_logits(self.model.forward(ids, pos, self.kv_caches, md)[-1:])

    def _capture_graphs(self) -> tuple[DecodeGraphs | None, str]:
        """Decode CUDA graphs for batch 1..max_num_seqs, or None and the reason (eager stays correct)."""
        if self.device.type != "cuda":
            return None, "eager: not a CUDA device"
        if self.config.model.enforce_eager:
            return None, "eager: model.enforce_eager is set"
        graphs = DecodeGraphs(self.model, self.kv_caches, self.device, self.block_size, self.max_model_len,
                              pad_block=self.num_blocks, max_batch=self.config.scheduler.max_num_seqs,
                              host_buffers=2 if self.config.scheduler.async_scheduling else 1)
        try:
            graphs.capture()
        except GraphCaptureRefused as e:
            log.warning("decode stays eager: %s", e)
            return None, f"eager: {e}"
        return graphs, f"CUDA graphs for decode batches {graphs.buckets}"

    def _graph_step(self, out: SchedulerOutput) -> bool:
        """Whether a captured graph runs this step: plain decode (one token per request, each
        sampling, no drafts) within the largest bucket, and no hidden states to keep."""
        sched = out.scheduled
        return (self.graphs is not None and not self.keep_hidden and bool(sched) and len(sched) <= self.graphs.max_batch
                and all(len(s.token_ids) == 1 and not s.draft_token_ids and s.sample for s in sched))

    def _decode_by_graph(self, out: SchedulerOutput) -> dict[str, list[tuple[int, object]]] | None:
        """A plain decode step (one token per request, no drafts) replayed from a graph, else None."""
        if not self._graph_step(out):
            return None
        sched = out.scheduled
        logits = self.graphs.run([(s.token_ids[0], s.start_pos, s.block_ids) for s in sched])
        toks = sample(logits, [self.sample_row(s.request) for s in sched])
        return {s.request.request_id: [(t.token_id, _lp(t))] for s, t in zip(sched, toks)}

    def route_report(self) -> list[dict]:
        rows = []
        for sel in registry.selections():
            refused = {n: r for n, r in sel.refused.items()}
            rows.append({"op": sel.problem.op, "problem": sel.problem.describe(), "provider": sel.provider.name,
                         "refused": refused})
        return sorted(rows, key=lambda r: r["op"])

    def _metadata(self, qsl: list[int], seq_lens: list[int], tables: list[list[int]],
                  slots: list[int]) -> AttentionMetadata:
        width = max(len(t) for t in tables)
        padded = [t + [0] * (width - len(t)) for t in tables]
        dev = self.device
        max_query_len = max(b - a for a, b in zip(qsl, qsl[1:]))
        max_seq_len = max(seq_lens)
        if dev.type == "cuda" and max_query_len == 1:
            # decode declares the model's length as its span bound, as the captured graphs do, so the
            # split-KV plan (and the fp32 summation order) is the same with graphs on and off
            max_seq_len = max(max_seq_len, self.max_model_len)
        return AttentionMetadata(
            query_start_loc=torch.tensor(qsl, dtype=torch.int32, device=dev),
            seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=dev),
            block_tables=torch.tensor(padded, dtype=torch.int32, device=dev),
            slot_mapping=torch.tensor(slots, dtype=torch.long, device=dev),
            query_start_loc_cpu=qsl, seq_lens_cpu=seq_lens,
            max_query_len=max_query_len, max_seq_len=max_seq_len)

    def _forward(self, seqs: list[tuple[list[int], int, list[int]]], fed_from=None, **model_kwargs):
        """Feed each (token_ids, start_pos, block_ids) into its paged KV. Returns the final hidden
        states [sum(len(token_ids)), H] and the query start locations. fed_from: (positions, src,
        tokens): the flat input at positions[j] is tokens[src[j]] (asynchronous scheduling)."""
        ids, positions, slots, qsl, seq_lens, tables = [], [], [], [0], [], []
        bs = self.block_size
        for fed, start, block_ids in seqs:
            n = len(fed)
            ids += fed
            pos = range(start, start + n)
            positions += pos
            slots += [block_ids[p // bs] * bs + p % bs for p in pos]
            qsl.append(qsl[-1] + n)
            seq_lens.append(start + n)
            tables.append(block_ids)
        md = self._metadata(qsl, seq_lens, tables, slots)
        ids_t = torch.tensor(ids, dtype=torch.long, device=self.device)
        if fed_from is not None:
            at, src, tokens = fed_from
            ids_t[at] = tokens[src]
        hidden = self.model.forward(ids_t,
                                    torch.tensor(positions, dtype=torch.long, device=self.device),
                                    self.kv_caches, md, **model_kwargs)
        return hidden, qsl

    @torch.inference_mode()
    def last_logits(self, seqs: list[tuple[list[int], int, list[int]]], return_hidden: bool = False,
                    **model_kwargs):
        """Logits [B, V] (float32) at the last fed token of each (token_ids, start_pos, block_ids);
        for drafters that run their own model and KV cache through this runner. With return_hidden:
        (logits, the final hidden states [B, H] there)."""
        hidden, qsl = self._forward(seqs, **model_kwargs)
        last = hidden[torch.tensor([q - 1 for q in qsl[1:]], device=self.device)]
        logits = self.model.compute_logits(last)
        return (logits, last) if return_hidden else logits

    @torch.inference_mode()
    def execute(self, out: SchedulerOutput) -> dict[str, list[tuple[int, object]]]:
        """Run one step. Returns, per sampling request, the tokens it emits: one, or with drafts
        the accepted drafts and the token after them, each with its logprobs (or None).
        With `keep_hidden` set (MTP drafting), `last_hidden[request_id]` is (start_pos, the final
        hidden states [n, H] of the n tokens fed for it this step: prompt chunk, or last confirmed
        token + drafts, i.e. the scored positions); the plain path stores nothing."""
        by_graph = self._decode_by_graph(out)
        if by_graph is not None:
            return by_graph
        hidden, qsl = self._forward([(s.token_ids + s.draft_token_ids, s.start_pos, s.block_ids)
                                     for s in out.scheduled])
        if self.keep_hidden:
            self.last_hidden = {s.request.request_id: (s.start_pos, hidden[qsl[i]:qsl[i + 1]])
                                for i, s in enumerate(out.scheduled)}
        self._prompt_logprobs(out, hidden, qsl)
        sampling = [s for s in out.scheduled if s.sample]
        if not sampling:
            return {}
        # logits at the last confirmed token and at every draft
        logit_rows = [range(qsl[i + 1] - 1 - len(s.draft_token_ids), qsl[i + 1])
                      for i, s in enumerate(out.scheduled) if s.sample]
        flat = torch.tensor([r for rows in logit_rows for r in rows], device=self.device)
        logits = self.model.compute_logits(hidden[flat])
        starts = list(itertools.accumulate((len(r) for r in logit_rows), initial=0))  # row of each request
        result: dict[str, list[tuple[int, object]]] = {}
        plain = [i for i, s in enumerate(sampling) if not s.draft_token_ids]
        if plain:
            toks = sample(logits[torch.tensor([starts[i] for i in plain], device=self.device)],
                          [self.sample_row(sampling[i].request) for i in plain])
            for i, t in zip(plain, toks):
                result[sampling[i].request.request_id] = [(t.token_id, _lp(t))]
        for i, s in enumerate(sampling):
            k = len(s.draft_token_ids)
            if k:
                req = s.request
                probs = req.spec_probs[:k] if req.spec_probs is not None else None
                rows = logits[starts[i]:starts[i] + k + 1]
                toks = sample_with_drafts(rows, self.sample_row(req), s.draft_token_ids, probs)
                result[req.request_id] = [(t.token_id, _lp(t)) for t in toks]
        return result

    def _prompt_logprobs(self, out: SchedulerOutput, hidden: torch.Tensor, qsl: list[int]) -> None:
        """Requests that asked for prompt logprobs: the logits at each prompt position this step fed, but the last
        (it predicts the first generated token), give the next prompt token's logprob, written into
        request.prompt_logprobs at that token's position (a preempted request recomputes the same entries)."""
        for i, s in enumerate(out.scheduled):
            req = s.request
            if req.prompt_logprobs is None:
                continue
            end = min(s.start_pos + len(s.token_ids), req.num_prompt_tokens - 1)
            for a in range(s.start_pos, end, PROMPT_LOGPROBS_ROWS):
                b = min(a + PROMPT_LOGPROBS_ROWS, end)
                rows = hidden[qsl[i] + a - s.start_pos:qsl[i] + b - s.start_pos]
                lps = prompt_token_logprobs(self.model.compute_logits(rows), req.prompt_token_ids[a + 1:b + 1],
                                            req.params.prompt_logprobs)
                req.prompt_logprobs[a + 1:b + 1] = lps

    @torch.inference_mode()
    def execute_async(self, out: SchedulerOutput, prev: InFlight | None) -> InFlight:
        """Launch one step and return without waiting for it (asynchronous scheduling): inputs that
        are placeholders take the tokens `prev` sampled on the device, this step's tokens are
        sampled on the device (sampler.sample_on_device; every request's params value_free) and
        copied to the host behind an event. No drafts, no hidden states kept."""
        sched = out.scheduled
        at, src = [], []
        prev_row = {rid: i for i, rid in enumerate(prev.rows)} if prev is not None else {}
        flat = 0
        for s in sched:
            for j, t in enumerate(s.token_ids):
                if t == PLACEHOLDER:
                    at.append(flat + j)
                    src.append(prev_row[s.request.request_id])
            flat += len(s.token_ids)
        fed = prefix = None
        graphed = self._graph_step(out)
        if at and graphed and at == src == list(range(len(at))):
            prefix = prev.tokens[:len(at)]  # steady decode: row j feeds row j's token, one device copy
        elif at:
            idx = torch.tensor([at, src], dtype=torch.long, pin_memory=self.device.type == "cuda")
            idx = idx.to(self.device, non_blocking=True)
            fed = (idx[0], idx[1], prev.tokens)
        sampling = [s for s in sched if s.sample]
        if graphed:
            logits = self.graphs.run([(max(s.token_ids[0], 0), s.start_pos, s.block_ids) for s in sched], fed,
                                     prefix)
        else:
            hidden, qsl = self._forward([(s.token_ids, s.start_pos, s.block_ids) for s in sched], fed)
            last = [qsl[i + 1] - 1 for i, s in enumerate(sched) if s.sample]
            logits = self.model.compute_logits(hidden[torch.tensor(last, device=self.device)]) if last else None
        rows = [s.request.request_id for s in sampling]
        if not sampling:
            tokens = torch.empty(0, dtype=torch.long, device=self.device)
        else:
            tokens = sample_on_device(logits, [self.sample_row(s.request) for s in sampling])
        if self.device.type == "cuda":
            host = torch.empty(len(rows), dtype=torch.long, pin_memory=True)
            host.copy_(tokens, non_blocking=True)
            event = torch.cuda.Event()
            event.record()
        else:
            host, event = tokens.clone(), None
        return InFlight(out, rows, tokens, host, event)

    def sample_row(self, req, with_generator: bool = True) -> SampleRow:
        """How this request samples; with_generator=False leaves its generator out (and unseeded),
        for drafters that process logits like the target but draw with their own generator. The
        seed (explicit, else drawn once per request) keys the `sample` op and the generator alike."""
        p = req.params
        gen, seed = None, 0
        if not p.greedy:
            seed = self.seeds.get(req.request_id)
            if seed is None:
                seed = p.seed if p.seed is not None else int(torch.randint(0, 2**62, (), generator=self._seed_source))
                self.seeds[req.request_id] = seed
            if with_generator:
                gen = self.generators.get(req.request_id)
                if gen is None:
                    gen = self.generators[req.request_id] = torch.Generator(device=self.device).manual_seed(seed)
        stops = frozenset(p.stop_token_ids) | (frozenset() if p.ignore_eos else req.eos_token_ids)
        return SampleRow(p, req.prompt_token_ids, req.output_token_ids, gen, stops if p.min_tokens else frozenset(),
                         seed, req.grammar, req.bad_word_ids)

    def release(self, request_id: str) -> None:
        self.generators.pop(request_id, None)
        self.seeds.pop(request_id, None)

    @torch.inference_mode()
    def score(self, token_ids: list[int], first: int = 0) -> torch.Tensor:
        """Logits [T - first, V] (float32) at positions first.. of one sequence, on a scratch KV cache
        (the engine's cache and its prefix entries are untouched). For fidelity and PPL checks; `first`
        spares the LM head the positions a check does not read (on a 128K vocabulary most of the cost)."""
        if not 0 <= first < len(token_ids):
            raise ValueError(f"score: first={first} outside the sequence's {len(token_ids)} positions")
        return self.model.compute_logits(self.hidden_states(token_ids)[first:])

    @torch.inference_mode()
    def hidden_states(self, token_ids: list[int]) -> torch.Tensor:
        """The final (normed) hidden states [T, H] of one sequence, on a scratch KV cache as `score`."""
        T, bs = len(token_ids), self.block_size
        nblk = -(-T // bs)
        shape = (nblk, bs, self.spec.num_kv_heads, self.spec.head_dim)
        caches = [(torch.zeros(shape, dtype=self.kv_dtype, device=self.device),
                   torch.zeros(shape, dtype=self.kv_dtype, device=self.device)) for _ in self.spec.attention_layers]
        md = self._metadata([0, T], [T], [list(range(nblk))], list(range(T)))
        ids = torch.tensor(token_ids, dtype=torch.long, device=self.device)
        return self.model.forward(ids, torch.arange(T, device=self.device), caches, md)
