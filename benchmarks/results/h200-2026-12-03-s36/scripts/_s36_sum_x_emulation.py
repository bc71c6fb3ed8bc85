"""s36 (CPU): which part of the front GEMV's arithmetic the GLU case's error comes from: its chunk sum(x) (the q4_k
min term) as the kernel computes it (fp16 pair-sum tree), as fp16 pairs then fp32, or in fp32. From the repo root:

    python3 benchmarks/results/h200-2026-12-03-s36/scripts/_s36_sum_x_emulation.py
"""
import importlib.util, numpy as np, torch, torch.nn.functional as F
spec_ = importlib.util.spec_from_file_location("e", "benchmarks/results/h200-2026-12-03-s36/scripts/_s36_gemv_chain_emulation.py")
e = importlib.util.module_from_spec(spec_); spec_.loader.exec_module(e)
from onecat.kernels import ops, reference
spec = ops.registry.ops[e.OP]

def gemv(x16, w, chain_dtype, sx_fp32):
    codes, dl, ml = e.q4k_parts(w)
    n, nch, _ = codes.shape
    wv = ((codes - 8) / 16).astype(np.float16)
    xc = x16.reshape(nch, 32)
    chains = np.zeros((n, nch, 4), dtype=chain_dtype)
    for i in range(8):
        prod = wv[:, :, 4*i:4*i+4].astype(np.float64) * xc[None, :, 4*i:4*i+4].astype(np.float64)
        chains = (chains.astype(np.float64) + prod).astype(chain_dtype)
    dot = chains.astype(np.float32).sum(-1, dtype=np.float32)
    if sx_fp32 == "pairs":
        p = xc.astype(np.float16)
        sx = (p[:, 0::2].astype(np.float64) + p[:, 1::2]).astype(np.float16).astype(np.float32).sum(-1)
    elif sx_fp32:
        sx = xc.astype(np.float32).sum(-1)
    else:
        sx = np.zeros(nch, dtype=np.float32)
        for s in range(4):
            p = xc[:, 8*s:8*s+8].astype(np.float16)
            t = ((p[:, 0:2] + p[:, 2:4]).astype(np.float16) + (p[:, 4:6] + p[:, 6:8]).astype(np.float16)).astype(np.float16)
            sx += t.astype(np.float32).sum(-1)
    return ((16*dl)*dot + (8*dl - ml)*sx[None, :]).astype(np.float32).sum(-1, dtype=np.float32)

print("seed | front sum(x): fp16 tree (kernel), fp16 pairs then fp32, fp32 -> GLU err vs FP32 | coef/scale ratio")
for seed in [7, 32, 0, 1433399752, 12]:
    gen = torch.Generator().manual_seed(seed + len(e.OP))
    x, w_in, res, nw, eps, w, bias, act = next(c.args for c in spec.make_inputs(torch.float16, "cpu", gen) if c.label == e.LABEL)
    ref32 = spec.reference(x.float(), w_in, res.float(), nw.float(), eps, w, bias, act)[0].double()[0]
    out = []
    for cd, sx32 in ((np.float16, False), (np.float16, "pairs"), (np.float16, True)):
        y = torch.from_numpy(gemv(x[0].numpy(), w_in, cd, sx32)).half()
        xt = reference.rms_norm(y[None], nw, eps, res)[0]
        yg = torch.from_numpy(e.gemv(xt[0].numpy(), w, np.float16)).half().float()
        g, u = yg.chunk(2)
        out.append(float(((F.silu(g)*u).half().double() - ref32).norm() / ref32.norm()))
    _, dl, ml = e.q4k_parts(w_in)
    print(seed, " ".join(f"{v:.2e}" for v in out))
