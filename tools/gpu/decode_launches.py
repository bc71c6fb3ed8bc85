"""A few launches of the register-direct decode kernel on one KV set, for Nsight Compute
(tools/gpu/ncu_decode.sh): `python tools/gpu/decode_launches.py KV BATCH CTX [WARPS]` with 32/8 heads,
D 128, block 16 (llama3-8b's attention), KV random (FP8: quantized at scale 0.02)."""

from __future__ import annotations

import sys

import torch

from onecat.kernels import attention_ops
from onecat.kernels import reference as ref
from onecat.kernels.inputs import paged_metadata

KV = {"f16": torch.float16, "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def main(kv: str, batch: int, ctx: int, warps: int | None = None) -> None:
    hq, hk, d, bs = 32, 8, 128, 16
    nb = batch * (-(-ctx // bs)) + 4
    md = paged_metadata([1] * batch, [ctx] * batch, bs, nb, torch.Generator().manual_seed(10), "cuda")
    q = torch.randn(batch, hq, d, device="cuda").half()
    x = torch.randn(nb, bs, hk, d, device="cuda")
    kc = x.half() if kv == "f16" else ref.fp8_quantize(x, 0.02, KV[kv])
    vc = kc.clone()
    scales = () if kv == "f16" else (0.02, 0.02)
    for _ in range(4):
        attention_ops.paged_attention_rd(q, kc, vc, md, d ** -0.5, None, None, *scales, warps=warps)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else None)
