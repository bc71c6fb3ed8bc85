"""One paged causal prefill row for the GPU scripts (attention_check.sh's prefill table, prefill_volta_ab.py):
`batch` requests of `s` new tokens each (no cached prefix), K / V written into a paged cache of block 16
(FP16, or FP8 E4M3 / E5M2 with scale 0.02) by ops.reshape_and_cache, and the reference the kernel's output is
held to: torch SDPA (FP16, no window) or the float reference on the same (dequantized) cache. `flops` is the
useful causal work (visible keys only), the numerator of every prefill TFLOP/s here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from onecat.kernels import ops
from onecat.kernels import reference as ref
from onecat.kernels.inputs import paged_metadata

from decode_attention_row import KV  # the cache dtype per KV kind (its callers put tools/gpu on sys.path)

FP8_SCALE = 0.02


@dataclass
class PrefillCase:
    batch: int
    s: int
    hq: int
    hk: int
    d: int
    kv: str
    window: int
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    args: tuple  # paged_attention's / flash_prefill's arguments
    flops: float

    def sdpa_fn(self):
        """torch SDPA on the un-cached K / V, laid out [B, H, S, D] once: the call (what attention_check.sh
        times beside the kernels), returning [B, hq, s, d]; FP16 without a window only."""
        qt, kt, vt = (x.view(self.batch, self.s, -1, self.d).transpose(1, 2).contiguous() for x in (self.q, self.k, self.v))
        return lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, enable_gqa=True)

    def tokens(self, o: torch.Tensor) -> torch.Tensor:
        """[B, hq, s, d] -> the kernels' [T, hq, d]."""
        return o.transpose(1, 2).reshape(self.batch * self.s, self.hq, self.d)

    def reference(self) -> torch.Tensor:
        """What a kernel's output is held to (float): SDPA where it applies, else the float reference on
        the cache as stored (dequantized for FP8)."""
        if self.kv == "f16" and not self.window:
            return self.tokens(self.sdpa_fn()()).float()
        q, kc, vc, md, scale = self.args[:5]
        deq = (lambda c: ref.kv_dequantize(c, FP8_SCALE)) if self.kv != "f16" else (lambda c: c.float())
        return ref.paged_attention(q.float(), deq(kc), deq(vc), md, scale, self.window or None)


def prefill_case(batch: int, s: int, hq: int, hk: int, d: int, kv: str = "f16", window: int = 0,
                 bs: int = 16, dev: str = "cuda") -> PrefillCase:
    nb = batch * (s // bs) + 4
    md = paged_metadata([s] * batch, [s] * batch, bs, nb, torch.Generator().manual_seed(2), dev)
    q = torch.randn(batch * s, hq, d, device=dev).half()
    k = torch.randn(batch * s, hk, d, device=dev).half()
    v = torch.randn(batch * s, hk, d, device=dev).half()
    kc = torch.zeros(nb, bs, hk, d, device=dev, dtype=KV[kv])
    vc = torch.zeros_like(kc)
    scales = () if kv == "f16" else (FP8_SCALE, FP8_SCALE)
    ops.reshape_and_cache(k, v, kc, vc, md.slot_mapping, *scales)
    visible = sum(min(i + 1, window) if window else i + 1 for i in range(s))
    return PrefillCase(batch, s, hq, hk, d, kv, window, q, k, v,
                       (q, kc, vc, md, d ** -0.5, window or None, None, *scales), batch * 4 * hq * d * visible)
