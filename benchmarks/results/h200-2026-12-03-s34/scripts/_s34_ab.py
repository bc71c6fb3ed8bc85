"""tools/ncu/target.py's in-process A/B with pseudo --ab-disable entries that change a route choice while a variant's
graphs are captured (each holds for that capture only; the registry entries pass through):

* `front:FMT`: FMT dropped from linear_norm_ops.FRONT_SHAPES (its projections in front then take the route they had
  before: the plain GEMV, then the normed-prologue GEMV behind);
* `mix:a_first`: linear_fused_ops.MIX_B_FIRST = False (the two-format qkv launch's [q | k] blocks first);
* `glu:nw8`: the q4_k gate_up behind the join in 8-warp blocks, (4, 1, 1, "nw8"), instead of (4, 1, 1, "n").

Calls 1 (front:) and 2 (mix:, glu:; with ../mix-order-glu-nw8.diff applied, which has MIX_B_FIRST and the nw8 _rs_glu
instance; neither is on main). Run from the repo root:

    python benchmarks/results/h200-2026-12-03-s34/scripts/_s34_ab.py --model M.gguf --ab-disable "front:q6_k;..."
"""
import sys

sys.path.insert(0, "tools/ncu")
import target  # noqa: E402

from onecat.kernels import linear_fused_ops, linear_norm_ops, ops  # noqa: E402

_fronts, _configure = dict(linear_norm_ops.FRONT_SHAPES), ops.registry.configure
_shape = linear_norm_ops.gemv_m1_shape


def _glu_nw8(fmt, n, k, normed=False):
    if fmt == "q4_k" and normed and n > 8192:
        return (4, 1, 1, "nw8")
    return _shape(fmt, n, k, normed)


def configure(*args, disabled=None, **kw):
    names = list(disabled or ())
    drop = {n.split(":", 1)[1] for n in names if n.startswith("front:")}
    linear_norm_ops.FRONT_SHAPES.clear()
    linear_norm_ops.FRONT_SHAPES.update({k: v for k, v in _fronts.items() if k not in drop})
    linear_fused_ops.MIX_B_FIRST = "mix:a_first" not in names
    linear_norm_ops.gemv_m1_shape = _glu_nw8 if "glu:nw8" in names else _shape
    pseudo = ("front:", "mix:", "glu:")
    return _configure(*args, disabled=[n for n in names if not n.startswith(pseudo)], **kw)


ops.registry.configure = configure
target.SAME_ROUTE_OK = True  # mix: / glu: change launches, not selections
sys.exit(target.main())
