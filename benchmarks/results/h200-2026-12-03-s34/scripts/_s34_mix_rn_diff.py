"""s34 call 6: how far the two-format qkv with the norm in front (_mix..._rn_rope) is from the unfused route at the seed
where call 5's test_norm_in_front_against_unfused found them unequal (FP16 cache, GPT-J)."""
import sys

import torch

sys.path.insert(0, ".")
from onecat.kernels import linear_fused_ops  # noqa: E402
from tests.kernels.test_gemv_mixed import _mixed_qkv_args  # noqa: E402

for seed in (1171421130, 1, 2, 3):
    a = _mixed_qkv_args(4096, 32, 8, 128, 128, device="cuda", seed=seed)
    kw, vw = a[10].clone(), a[11].clone()
    want, want_res = linear_fused_ops.rms_norm_qkv_rotary_cache_unfused(*a[:10], kw, vw, *a[12:])
    got, got_res = linear_fused_ops.rms_norm_qkv_rotary_cache_mix(*a)
    d = (got.float() - want.float()).abs()
    bad = (got != want).nonzero()[:, -1].tolist()
    print(f"seed {seed}: q differs at {len(bad)} of {got.numel()} (cols {bad[:8]}), max |diff| {float(d.max()):.3g} "
          f"(|q| max {float(want.abs().max()):.3g}); residual equal {torch.equal(got_res, want_res)}; "
          f"k cache equal {torch.equal(a[10], kw)}, v cache equal {torch.equal(a[11], vw)}")
