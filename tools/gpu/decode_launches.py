"""A few launches of the register-direct decode kernel on one KV set, for Nsight Compute
(tools/gpu/ncu_decode.sh): `python tools/gpu/decode_launches.py KV BATCH CTX [FORM]` (FORM w4 / w1 /
deep, default the route's pick) with 32/8 heads, D 128, block 16 (llama3-8b's attention;
decode_trace.kv_set, metadata as eager decode passes it), KV random (FP8: quantized at scale 0.02)."""

from __future__ import annotations

import sys

import torch

from onecat.kernels import attention_ops

sys.path.insert(0, "tools/gpu")
from decode_trace import kv_set  # noqa: E402


def main(kv: str, batch: int, ctx: int, form: str | None = None) -> None:
    args = kv_set(kv, batch, ctx, 10, host_written=False)
    for _ in range(4):
        attention_ops.paged_attention_rd(*args, form=form)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
