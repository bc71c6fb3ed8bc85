"""s36 (CPU): the failing q4_k GLU case with BOTH GEMVs emulated (the front o-like q4_k GEMV and gate_up, as
_s36_gemv_chain_emulation.py emulates one): reproduces the GPU's unfused-route error per seed. From the repo root:

    python3 benchmarks/results/h200-2026-12-03-s36/scripts/_s36_front_emulation.py
"""
import importlib.util, numpy as np, torch, torch.nn.functional as F
spec_ = importlib.util.spec_from_file_location("e", "benchmarks/results/h200-2026-12-03-s36/scripts/_s36_gemv_chain_emulation.py")
e = importlib.util.module_from_spec(spec_); spec_.loader.exec_module(e)
from onecat.kernels import ops, reference
spec = ops.registry.ops[e.OP]
for seed in [7, 32, 0, 1433399752]:
    gen = torch.Generator().manual_seed(seed + len(e.OP))
    x, w_in, res, nw, eps, w, bias, act = next(c.args for c in spec.make_inputs(torch.float16, "cpu", gen) if c.label == e.LABEL)
    ref32 = spec.reference(x.float(), w_in, res.float(), nw.float(), eps, w, bias, act)[0].double()[0]
    y32 = reference.linear(x.float(), w_in)[0]
    y16e = torch.from_numpy(e.gemv(x[0].numpy(), w_in, np.float16)).half()
    yref = reference.linear(x, w_in)[0]
    print(seed, "front: emu vs fp32", float((y16e.double()-y32.double()).norm()/y32.double().norm()),
          "ref16 vs fp32", float((yref.double()-y32.double()).norm()/y32.double().norm()),
          "|y| rms", float(y32.pow(2).mean().sqrt()), "|res| rms", float(res.float().pow(2).mean().sqrt()), "|x| rms", float(x.float().pow(2).mean().sqrt()))
    xt = reference.rms_norm(y16e[None], nw, eps, res)[0]
    yg = torch.from_numpy(e.gemv(xt[0].numpy(), w, np.float16)).half().float()
    g, u = yg.chunk(2)
    print("   full emu GLU vs fp32", float(((F.silu(g)*u).half().double()-ref32).norm()/ref32.norm()))
