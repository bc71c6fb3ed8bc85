import torch, sys
sys.path.insert(0, "tests")
from kernels.test_gemm_rd import _qkv_args
from onecat.kernels import gemm_ops, ops
for (m, k, hq, hk, d, rot) in ((64, 768, 6, 3, 128, 128), (64, 768, 6, 3, 128, 64), (40, 768, 6, 3, 128, 128), (64, 1280, 8, 2, 128, 64)):
    x, norm, eps, w, res, b, pos, d, cs, neox, kc, vc, slots, hq, hk = _qkv_args(m, k, hq, hk, d, rot, "q4_0", device="cuda", seed=1)
    qs, kvs = hq * d, hk * d
    for tile in ("r16", "r32"):
        y = gemm_ops.gemm_launch(x, w, b, tile, 1)
        kw, vw = kc.clone(), vc.clone()
        want = ops.rotary_and_cache(pos, y[:, :qs], y[:, qs:qs + kvs], y[:, qs + kvs:], d, cs, False, kw, vw, slots)
        kg, vg = kc.clone(), vc.clone()
        got = gemm_ops.gemm_launch(x, w, b, tile, 1, rope=(pos, slots, cs, kg, vg, qs, kvs, d, rot))
        diff = (got.float() - want.float()).abs()
        bad = (diff > 0).nonzero()
        print(m, k, hq, hk, d, rot, tile, "q bad", len(bad), "max", float(diff.max()), "rows", sorted(set(bad[:, 0].tolist()))[:10],
              "cols", sorted(set((bad[:, 1] % d).tolist()))[:12], "k bad", int((kg != kw).sum()), "v bad", int((vg != vw).sum()))
        sel = ops.registry.select(ops.problem("rotary_and_cache", pos, y[:, :qs], y[:, qs:qs + kvs], y[:, qs + kvs:], d, cs, False, kw, vw, slots))
        print("  rotary provider", sel.provider.name)
