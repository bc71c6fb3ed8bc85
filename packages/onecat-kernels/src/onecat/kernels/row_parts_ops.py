"""`linear` over a weights.RowParts (one projection's rows held as consecutive parts in different formats):
provider `row_parts`, on every device, for that format only.

Each part goes through ops.linear, so through its own admitted provider (on the GPU the packed GEMV / GEMMs of
its format, on the CPU the torch reference with its row chunking), with its share of the bias; the outputs are
concatenated along N. It comes first in linear's priority: the only other provider that takes a RowParts is the
reference, which would decode the whole projection at once. One launch over the whole projection is the business
of the composite ops that take it (a normed qkv: linear_fused_ops, linear_norm_ops), whose unfused routes come
back here through ops.linear.
"""

from __future__ import annotations

import torch

from .registry import KernelRegistry, Problem, Provider

NAME = "row_parts"


def supports_linear_row_parts(p: Problem) -> list[str]:
    fmt = p.param("format")
    return [] if fmt == "row_parts" else [f"weight format {fmt} not row_parts (a weights.RowParts)"]


def linear_row_parts(x: torch.Tensor, weight, bias: torch.Tensor | None = None) -> torch.Tensor:
    from . import ops

    return weight.linear_by_parts(ops.linear, x, bias)


def register(reg: KernelRegistry) -> None:
    """Register `row_parts` and put it first in linear's priority, whether or not the others' list is there yet
    (cuda_ops.register extends the list it finds)."""
    reg.register(Provider(NAME, "linear", linear_row_parts, supports=supports_linear_row_parts))
    reg.priority["linear"] = [NAME, *(n for n in reg.priority.get("linear", []) if n != NAME)]
