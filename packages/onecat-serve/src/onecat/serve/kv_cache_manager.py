"""Paged KV cache bookkeeping (pure CPU): a block pool with reference counts, hash-chained prefix
caching and LRU eviction.

A block is free when no running request holds it (ref_cnt == 0). Free blocks stay in the
prefix cache (keyed by the hash chain of the tokens they hold) until a new allocation evicts
them, oldest-freed first. Only full blocks are ever cached; a request's own partial last block
is private to it.
"""

from __future__ import annotations

from collections import OrderedDict

from .request import Request


class Block:
    __slots__ = ("block_id", "ref_cnt", "block_hash", "tokens")

    def __init__(self, block_id: int):
        self.block_id = block_id
        self.ref_cnt = 0
        self.block_hash: int | None = None
        self.tokens: tuple[int, ...] | None = None

    def __repr__(self) -> str:
        return f"Block({self.block_id}, ref={self.ref_cnt}, cached={self.block_hash is not None})"


def chain_hash(parent_hash: int | None, tokens: tuple[int, ...]) -> int:
    return hash((parent_hash, tokens))


class BlockPool:
    def __init__(self, num_blocks: int):
        if num_blocks < 1:
            raise ValueError(f"the KV cache needs at least one block, got {num_blocks}")
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free: OrderedDict[int, Block] = OrderedDict((b.block_id, b) for b in self.blocks)
        self.cached: dict[int, Block] = {}
        self.num_evictions = 0

    @property
    def num_free(self) -> int:
        return len(self.free)

    def allocate(self) -> Block:
        """Take the least recently freed block, evicting its cached content if it has any."""
        _, block = self.free.popitem(last=False)
        if block.block_hash is not None:
            del self.cached[block.block_hash]
            block.block_hash, block.tokens = None, None
            self.num_evictions += 1
        block.ref_cnt = 1
        return block

    def touch(self, block: Block) -> None:
        """Take another reference on a (possibly free) cached block."""
        if block.ref_cnt == 0:
            del self.free[block.block_id]
        block.ref_cnt += 1

    def release(self, block: Block) -> None:
        block.ref_cnt -= 1
        assert block.ref_cnt >= 0, f"{block} released too often"
        if block.ref_cnt == 0:
            self.free[block.block_id] = block

    def lookup(self, block_hash: int, tokens: tuple[int, ...]) -> Block | None:
        block = self.cached.get(block_hash)
        return block if block is not None and block.tokens == tokens else None

    def cache(self, block: Block, block_hash: int, tokens: tuple[int, ...]) -> None:
        if block.block_hash is not None or block_hash in self.cached:
            return  # already cached, or an identical block is (this one stays private)
        block.block_hash, block.tokens = block_hash, tokens
        self.cached[block_hash] = block


class KVCacheManager:
    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True):
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.pool = BlockPool(num_blocks)
        self.req_blocks: dict[str, list[Block]] = {}
        self.req_hashes: dict[str, list[int]] = {}  # hash chain of the request's full blocks
        self.prefix_queries = 0  # prompt tokens looked up
        self.prefix_hits = 0  # of which found cached

    @property
    def num_blocks(self) -> int:
        return len(self.pool.blocks)

    @property
    def num_free_blocks(self) -> int:
        return self.pool.num_free

    @property
    def usage(self) -> float:
        return 1.0 - self.pool.num_free / self.num_blocks

    def block_ids(self, request_id: str) -> list[int]:
        return [b.block_id for b in self.req_blocks.get(request_id, ())]

    def _hashes(self, req: Request, num_tokens: int) -> list[int]:
        """Hash chain over the request's first num_tokens // block_size full blocks (memoized)."""
        hashes = self.req_hashes.setdefault(req.request_id, [])
        bs = self.block_size
        while len(hashes) < num_tokens // bs:
            i = len(hashes)
            tokens = tuple(req.all_token_ids[i * bs:(i + 1) * bs])
            hashes.append(chain_hash(hashes[-1] if hashes else None, tokens))
        return hashes

    def get_computed_blocks(self, req: Request) -> tuple[list[Block], int]:
        """Longest cached prefix of full blocks. At least one token is always left to compute,
        so the step produces logits for the request."""
        if not self.enable_prefix_caching:
            return [], 0
        max_blocks = (req.num_tokens - 1) // self.block_size
        hashes = self._hashes(req, max_blocks * self.block_size)
        hits: list[Block] = []
        bs = self.block_size
        for i, h in enumerate(hashes[:max_blocks]):
            block = self.pool.lookup(h, tuple(req.all_token_ids[i * bs:(i + 1) * bs]))
            if block is None:
                break
            hits.append(block)
        self.prefix_queries += req.num_tokens
        self.prefix_hits += len(hits) * bs
        return hits, len(hits) * bs

    def allocate_slots(self, req: Request, num_new_tokens: int, computed_blocks: list[Block] = ()) -> bool:
        """Make room for num_new_tokens after the request's computed (and newly hit) tokens.
        Returns False, changing nothing, when the pool cannot supply the blocks."""
        held = self.req_blocks.get(req.request_id, [])
        num_computed = req.num_computed_tokens + len(computed_blocks) * self.block_size
        total = num_computed + num_new_tokens
        need = -(-total // self.block_size) - len(held) - len(computed_blocks)
        revived = sum(1 for b in computed_blocks if b.ref_cnt == 0)  # free cached blocks we take back
        if need + revived > self.pool.num_free:
            return False
        blocks = self.req_blocks.setdefault(req.request_id, held)
        for b in computed_blocks:
            self.pool.touch(b)
        blocks.extend(computed_blocks)
        blocks.extend(self.pool.allocate() for _ in range(max(need, 0)))
        if self.enable_prefix_caching:
            # Every confirmed token scheduled now is written this step: register its full blocks.
            # Drafted tokens are not confirmed (they may be rejected) and are never registered.
            # tokens whose values are still on the GPU (asynchronous scheduling) register later
            confirmed = min(total, req.num_tokens - getattr(req, "num_placeholders", 0))
            hashes = self._hashes(req, confirmed)
            bs = self.block_size
            for i in range(confirmed // bs):
                if blocks[i].block_hash is None:
                    self.pool.cache(blocks[i], hashes[i], tuple(req.all_token_ids[i * bs:(i + 1) * bs]))
        return True

    def free(self, req: Request) -> None:
        """Release the request's blocks, tail first, so its prefix outlives its suffix in the cache."""
        for block in reversed(self.req_blocks.pop(req.request_id, [])):
            self.pool.release(block)
        self.req_hashes.pop(req.request_id, None)
