"""s35: the joined down -> norm -> qkv + rotary + cache GEMVs (cuda_gemv_norm, one format; cuda_gemv_mix, q4_k + q6_k)
against the unfused route over 40 seeds: how far apart q and the FP16 caches' new rows are (the GPU tests' bound:
rel_err < 2e-3), to see whether s35's finding for the GLU (glu-err.txt: the two FP16 routes differ by up to 3e-3 at
some seeds) threatens these tests too."""
import sys

import torch

sys.path.insert(0, ".")
from tests.kernels.packed_gemm_cases import rel_err  # noqa: E402
from tests.kernels.test_gemv_mixed import _down_mixed_args  # noqa: E402
from tests.kernels.test_linear_norm import _down_qkv_args, _fused_and_unfused  # noqa: E402

OP = "linear_rms_norm_qkv_rotary_cache"
for name, provider, make in (
        ("q4_k", "cuda_gemv_norm", lambda s: _down_qkv_args(1, 4096, 14336, 32, 8, 128, 128, "q4_k", "q4_k", "cuda", s,
                                                            blocks=64)),
        ("q6_k down, q4_k qkv", "cuda_gemv_norm",
         lambda s: _down_qkv_args(1, 4096, 14336, 32, 8, 128, 128, "q4_k", "q6_k", "cuda", s, blocks=64)),
        ("mixed qkv", "cuda_gemv_mix", lambda s: _down_mixed_args(4096, 14336, 32, 8, 128, 128, device="cuda", seed=s))):
    fused, unfused = _fused_and_unfused(OP, provider)
    worst = []
    for seed in [*range(40), 1171421130]:
        b = make(seed)
        kw, vw = b[11].clone(), b[12].clone()
        want, want_res = unfused(*b[:11], kw, vw, *b[13:])
        got, got_res = fused(*b)
        assert torch.equal(got_res, want_res)
        worst.append((rel_err(got, want), rel_err(b[11], kw), rel_err(b[12], vw), seed))
    worst.sort(reverse=True)
    print(f"{name} ({provider}): worst 5 of {len(worst)} seeds (q, k cache, v cache rel_err, seed):")
    for w in worst[:5]:
        print(f"  {w[0]:.2e} {w[1]:.2e} {w[2]:.2e} {w[3]}")
