"""s35: the joined q4_k o -> norm -> gate_up GEMVs (cuda_gemv_norm) and the unfused route, each against an FP32
reference (the same fp16 residual stream, the norm and both projections in FP32), over seeds: how far apart the two
FP16 routes are and how far each is from the reference (test_gemv_o_gate_up_against_unfused's tolerance)."""
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, ".")
from tests.kernels.packed_gemm_cases import rel_err  # noqa: E402
from tests.kernels.test_linear_norm import _fused_and_unfused, _glu_args  # noqa: E402

fused, unfused = _fused_and_unfused("linear_rms_norm_linear", "cuda_gemv_norm")
print("seed | joined vs unfused | joined vs fp32 | unfused vs fp32 | max |joined - unfused| in fp16 ulps of the output")
for seed in [*range(12), 1171421130]:
    a = _glu_args(1, 4096, 4096, 14336, "q4_k", "q4_k", "cuda", seed)
    got, res = fused(*a)
    want, want_res = unfused(*a)
    assert torch.equal(res, want_res)
    r = res.float()
    h = r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + a[4]) * a[3].float()
    y = h @ a[5].dequantize(torch.float32).T
    d = y.shape[-1] // 2
    ref = F.silu(y[..., :d]) * y[..., d:]
    ulp = (got.float() - want.float()).abs() / torch.finfo(torch.float16).eps / want.float().abs().clamp_min(6e-5)
    print(f"{seed} | {rel_err(got, want):.2e} | {rel_err(got.float(), ref):.2e} | {rel_err(want.float(), ref):.2e} | "
          f"{float(ulp.max()):.1f}")
