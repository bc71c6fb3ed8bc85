"""s39: tools/ncu/target.py's in-process A/B with pseudo --ab-disable entries `wg:FROM=TO,...`: while a variant's
decode graphs are captured, every batched GEMM that gemm_ops.gemm_shape gives tile FROM runs on tile TO instead, with
the K splits gemm_shape's rule gives TO (its own resident blocks per SM). w64x2 / w32x2: gemm_wg.cu's two-warpgroup
forms. From the repo root:

    python benchmarks/results/h200-2026-12-06-s39/scripts/_s39_wg_form.py --model M.gguf --ab-disable "wg:w64=w64x2;..."
"""
import sys

sys.path.insert(0, "tools/ncu")
import target  # noqa: E402

from onecat.kernels import gemm_ops, ops  # noqa: E402

_configure, _shape = ops.registry.configure, gemm_ops.gemm_shape


def remapped(swap):
    def shape(m, n, k, sms, resident=None, rd=False):
        tile, splits = _shape(m, n, k, sms, resident, rd)
        if tile not in swap or (resident is not None and swap[tile] not in resident):
            return tile, splits  # (the rotary path passes resident without the wgmma tiles: no epilogue there)
        to, t = swap[tile], gemm_ops._tile(swap[tile])
        blocks = -(-n // t.bn) * -(-m // t.bm)
        slots = sms * (resident or {}).get(to, 1)
        cap = gemm_ops.RD_LONG_K_SPLITS if k >= gemm_ops.RD_LONG_K else gemm_ops.RD_MAX_SPLITS
        return to, max(1, min(cap, (k // t.bk) // 4, slots // blocks))
    return shape


def configure(*args, disabled=None, **kw):
    names = list(disabled or ())
    v = [n[3:] for n in names if n.startswith("wg:")]
    gemm_ops.gemm_shape = remapped(dict(p.split("=") for p in v[0].split(","))) if v else _shape
    return _configure(*args, disabled=[n for n in names if not n.startswith("wg:")], **kw)


ops.registry.configure = configure
target.SAME_ROUTE_OK = True  # wg: changes launches, not selections
sys.exit(target.main())
