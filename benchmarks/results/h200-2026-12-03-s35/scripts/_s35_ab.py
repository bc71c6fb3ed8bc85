"""tools/ncu/target.py's in-process A/B with pseudo --ab-disable entries `glu:SHAPE`: the q4_k gate_up behind the
join (N > 8192, normed) launched in SHAPE (R, U, KS, SFX written rRuUkKS+SFX, e.g. glu:r2u1k1n) instead of the shape
cuda_ops.gemv_m1_shape picks, (4, 1, 1, "n"), while a variant's graphs are captured. The shapes need
../glu-shapes.diff's instances (not on main). Run from the repo root:

    python benchmarks/results/h200-2026-12-03-s35/scripts/_s35_ab.py --model M.gguf --ab-disable "glu:r2u1k1n;..."
"""
import re
import sys

sys.path.insert(0, "tools/ncu")
import target  # noqa: E402

from onecat.kernels import linear_norm_ops, ops  # noqa: E402

_configure, _shape = ops.registry.configure, linear_norm_ops.gemv_m1_shape


def _parse(name: str) -> tuple[int, int, int, str]:
    m = re.fullmatch(r"glu:r(\d)u(\d)k(\d)(\w*)", name)
    return int(m[1]), int(m[2]), int(m[3]), m[4]


def configure(*args, disabled=None, **kw):
    names = list(disabled or ())
    glu = [_parse(n) for n in names if n.startswith("glu:")]

    def shape(fmt, n, k, normed=False):
        if glu and fmt == "q4_k" and normed and n > 8192:
            return glu[0]
        return _shape(fmt, n, k, normed)

    linear_norm_ops.gemv_m1_shape = shape
    return _configure(*args, disabled=[n for n in names if not n.startswith("glu:")], **kw)


ops.registry.configure = configure
target.SAME_ROUTE_OK = True  # glu: changes launches, not selections
sys.exit(target.main())
