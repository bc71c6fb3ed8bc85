"""s47: tools/ncu/target.py's in-process A/B with a pseudo --ab-disable entry `gs:1`: while that variant's decode graphs
are captured, the normed GEMVs whose shape linear_fused_ops.GS_SHAPES holds (q4_0 gate_up with the GLU at batch 1) run
their grid-stride entries (one resident wave, the norm prologue once a block; linear_fused_ops.GRID_STRIDE). `gs:0` is
a control (the route captured again). From the repo root:

    python benchmarks/results/h100-2026-12-07-s47/scripts/_s47_gs_ab.py --model M.gguf --ab-disable "gs:1;gs:0"
"""
import sys

sys.path.insert(0, "tools/ncu")
import target  # noqa: E402

from onecat.kernels import linear_fused_ops, ops  # noqa: E402

_configure = ops.registry.configure


def configure(*args, disabled=None, **kw):
    names = list(disabled or ())
    linear_fused_ops.GRID_STRIDE = "gs:1" in names
    return _configure(*args, disabled=[n for n in names if not n.startswith("gs:")], **kw)


ops.registry.configure = configure
target.SAME_ROUTE_OK = True  # gs: changes launches, not selections
sys.exit(target.main())
