"""s29 diagnostic (wrong outputs except DG 0): what each part of the register-direct GEMM's step costs at 32 rows.
Builds csrc/gemm_rd_diag.cu from gemm_rd.cu with a DG template parameter:
  0 the route's code (checked bit-equal to the route), 1 q4_0 weights by LOP3 + one HFMA2 with d (no HMUL2: the
  instruction count of a round(q d) dequantization), 2 no dequantization (the raw words XOR d as B), 3 no MMAs
  (operands consumed by an empty asm), 4 no per-step barrier, 5 no W loads past the first PDW steps, 6 = 2 + 4 + 5 (MMAs and x's shared loads only),
  7 = 6 without x's global loads past the first steps (the MMA / shared-load structure alone), 8 the route's math
  with a step's W / x loads issued after its first dequantization (the loads' one scoreboard is then waited on a
  step after they were issued, not right away; outputs bit-equal, checked), 9 the route's math with each k16 slice's
  x (A) fragments loaded from shared memory one slice ahead (bit-equal, checked), 10 = 7 with 9's A prefetch,
  11 = 7 with x's A fragments loaded from shared memory once per step (the MMAs alone), 12 the route with A loaded
  for even slices only (odd slices reuse them: half the shared-memory loads of x), 13 = 11 and 14 = the route with
  a slice's MMAs ordered n8 block outer, row tile inner (B reused by consecutive MMAs; each accumulator's sequence
  unchanged: 14 checked bit-equal).
Times gemm_launch's r32w GLU (gate_up) / r32w (down) / r32 (qkv, o) at M 32, route splits, CUDA events as gemm_bench."""
from __future__ import annotations

import pathlib
import statistics
import sys

import torch

from onecat.kernels import gemm_ops
from onecat.kernels.bench import ROTATE_BYTES, packed_gpu, time_sets
from onecat.kernels.driver import Kernel

CSRC = pathlib.Path(gemm_ops.__file__).parent / "csrc"
DIAGS = {0: "route", 1: "no-hmul", 2: "no-dequant", 3: "no-mma", 4: "no-barrier", 5: "no-W-loads", 6: "mma+lds-only", 7: "no-global-loads", 8: "loads-after-deq", 9: "A-prefetch", 10: "A-prefetch no-global", 11: "no-global no-A-LDS", 12: "half-A-LDS", 13: "no-global no-A-LDS b-outer", 14: "b-outer"}


def build_source() -> None:
    s = (CSRC / "gemm_rd.cu").read_text()
    s = s[: s.index("#define GEMM_RD_ENTRY")]
    head = "template <int F, int MT, int NB, int KS, int PDW, int PDX, int PF = 0, bool GLU = false, bool ROPE = false>\n__device__ void gemm_rd("
    assert head in s
    s = s.replace(head, head.replace("bool ROPE = false>", "bool ROPE = false, int DG = 0>").replace("gemm_rd(", "gemm_rd_dg("))
    for a, b in (("h ? r.w[b][j].z : r.w[b][j].x, d, magic, lo", "lo"), ("h ? r.w[b][j].w : r.w[b][j].y, d, magic, hi", "hi")):
        old = f"q4_0_word({a});"
        assert s.count(old) == 1, old
        s = s.replace(old, f"q4w_dg<DG>({a});")
    old = """#pragma unroll
          for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int b = 0; b < NB; ++b)
              mma_16816(acc[b][mt], a[mt].x, a[mt].y, a[mt].z, a[mt].w, bf[b][2 * s], bf[b][2 * s + 1]);"""
    assert s.count(old) == 1
    s = s.replace(old, """          if constexpr (DG == 13 || DG == 14) {
#pragma unroll
            for (int b = 0; b < NB; ++b)
#pragma unroll
              for (int mt = 0; mt < MT; ++mt)
                mma_16816(acc[b][mt], a[mt].x, a[mt].y, a[mt].z, a[mt].w, bf[b][2 * s], bf[b][2 * s + 1]);
          } else {
""" + old + """
          }""")
    old = "mma_16816(acc[b][mt], a[mt].x, a[mt].y, a[mt].z, a[mt].w, bf[b][2 * s], bf[b][2 * s + 1]);"
    assert s.count(old) == 2
    s = s.replace(old, "mma_dg<DG>(acc[b][mt], a[mt].x, a[mt].y, a[mt].z, a[mt].w, bf[b][2 * s], bf[b][2 * s + 1]);")
    old = "        __syncthreads();\n        if (st == s_begin) block_trace(tr, 2);"
    assert s.count(old) == 1
    s = s.replace(old, "        if constexpr (DG != 4 && DG != 6) __syncthreads();\n        if (st == s_begin) block_trace(tr, 2);")
    old = """        if (st + PDW < s_end) fetch_w(rs[(u + PDW) % R], st + PDW);
        if (st + PDX < s_end) fetch_x(rs[(u + PDX) % R], st + PDX);
        compute(rs[u], buf, st);"""
    assert s.count(old) == 1
    s = s.replace(old, """        auto issue = [&] {
          if (DG != 5 && DG != 6 && DG != 7 && DG != 10 && DG != 11 && DG != 13 && st + PDW < s_end) fetch_w(rs[(u + PDW) % R], st + PDW);
          if (DG != 7 && DG != 10 && DG != 11 && DG != 13 && st + PDX < s_end) fetch_x(rs[(u + PDX) % R], st + PDX);
        };
        if constexpr (DG != 8) issue();
        compute(rs[u], buf, st, [&] { if constexpr (DG == 8) issue(); });""")
    old = "auto compute = [&](const Regs& r, int buf, int st) {"
    assert s.count(old) == 1
    s = s.replace(old, "auto compute = [&](const Regs& r, int buf, int st, auto&& after_deq) {")
    old = "        for (int s = 0; s < 4; ++s) {  // slice-major"
    assert s.count(old) == 1
    s = s.replace("#pragma unroll\n" + old, "        if (j == 0 && h == 0) {\n          asm volatile(\"\" ::: \"memory\");\n          after_deq();\n        }\n#pragma unroll\n" + old)
    assert "after_deq();" in s
    old = """          uint4 a[MT];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) a[mt] = *reinterpret_cast<const uint4*>(xa + (mt * 8 * PS + 8 * j + 4 * h + s) * 8);"""
    assert s.count(old) == 1
    s = s.replace(old, """          uint4 a[MT];
          if constexpr (DG == 11 || DG == 12 || DG == 13) {
            const int i = 8 * j + 4 * h + s;
            if (((DG == 11 || DG == 13) && i == 0) || (DG == 12 && i % 2 == 0)) {
#pragma unroll
              for (int mt = 0; mt < MT; ++mt) an[mt] = *reinterpret_cast<const uint4*>(xa + (mt * 8 * PS + i) * 8);
            }
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) a[mt] = an[mt];
          } else if constexpr (DG == 9 || DG == 10) {
            const int i = 8 * j + 4 * h + s;
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) a[mt] = an[mt];
            if (i + 1 < 8 * KS) {
#pragma unroll
              for (int mt = 0; mt < MT; ++mt) an[mt] = *reinterpret_cast<const uint4*>(xa + (mt * 8 * PS + i + 1) * 8);
            }
          } else {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) a[mt] = *reinterpret_cast<const uint4*>(xa + (mt * 8 * PS + 8 * j + 4 * h + s) * 8);
          }""")
    old = """    const __half* xa = sh + buf * STAGE + a_off;
"""
    assert s.count(old) == 1
    s = s.replace(old, old + """    uint4 an[MT];
    if constexpr (DG == 9 || DG == 10 || DG == 11 || DG == 12 || DG == 13) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) an[mt] = *reinterpret_cast<const uint4*>(xa + (mt * 8 * PS) * 8);
    }
""")
    helpers = r'''
template <int DG>
ONECAT_DEVICE void q4w_dg(unsigned v, __half2 d, unsigned magic, unsigned (&p)[4]) {
  if constexpr (DG == 1) {
    const unsigned v2 = v >> 8;
    const __half2 nlo = h2c(-1024.f), nhi = h2c(-64.f);
    p[0] = h2u(__hfma2(u2h(lop_or_reg(v, 0x000F000Fu, magic)), d, nlo));
    p[1] = h2u(__hfma2(u2h(lop_or_reg(v, 0x00F000F0u, magic)), d, nhi));
    p[2] = h2u(__hfma2(u2h(lop_or_reg(v2, 0x000F000Fu, magic)), d, nlo));
    p[3] = h2u(__hfma2(u2h(lop_or_reg(v2, 0x00F000F0u, magic)), d, nhi));
  } else if constexpr (DG == 2 || DG == 6 || DG == 7 || DG == 10 || DG == 11 || DG == 13) {
    const unsigned x = h2u(d);
    p[0] = v; p[1] = v ^ x; p[2] = v >> 8; p[3] = (v >> 8) ^ x;
  } else {
    q4_0_word(v, d, magic, p);
  }
}
template <int DG>
ONECAT_DEVICE void mma_dg(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  if constexpr (DG == 3)
    asm volatile("" ::"r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    mma_16816(c, a0, a1, a2, a3, b0, b1);
}
'''
    i = s.index("template <int F, int MT, int NB, int KS, int PDW, int PDX, int PF = 0, bool GLU = false, bool ROPE = false, int DG = 0>")
    s = s[:i] + helpers + s[i:]
    ent = []
    for dg in DIAGS:
        for name, mt, nb, ks, pdw, pdx, pf, glu in (("r32w_glu", 2, 4, 1, 2, 1, 128, "true"), ("r32w", 2, 4, 1, 2, 1, 128, "false"),
                                                    ("r32", 2, 2, 1, 2, 2, 0, "false")):
            ent.append(f'''extern "C" __global__ void __launch_bounds__(128) gemm_rd_dg{dg}_{name}(
    __half* out, const __half* x, const unsigned char* q, const unsigned char* qh, const unsigned char* meta,
    const __half* bias, float* ws, unsigned* counters, int M, int N, int K, int gchunks, int steps_per_split) {{
  gemm_rd_dg<F_Q4_0, {mt}, {nb}, {ks}, {pdw}, {pdx}, {pf}, {glu}, false, {dg}>(out, x, q, qh, meta, bias, ws, counters, M, N, K,
                                                                   gchunks, steps_per_split);
}}''')
    (CSRC / "gemm_rd_diag.cu").write_text(s + "\n".join(ent) + "\n")


def main() -> int:
    build_source()
    dev = torch.device("cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    sms, res = gemm_ops.gemm_slots("q4_0", dev)
    res = {t: v for t, v in res.items() if t != "w64"}
    shapes = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
    if len(sys.argv) > 1:
        shapes = {k: v for k, v in shapes.items() if k in sys.argv[1].split(",")}
    m = 32
    print(f"{'matrix':8} {'tile':9} " + " ".join(f"{v:>11}" for v in DIAGS.values()), flush=True)
    for name, (n, k) in shapes.items():
        glu = name == "gate_up"
        first = packed_gpu(n, k, "q4_0", gen)
        nsets = max(1, min(16, -(-ROTATE_BYTES // first.nbytes)))
        ws = [first] + [packed_gpu(n, k, "q4_0", gen) for _ in range(nsets - 1)]
        xs = [torch.randn(m, k, device="cuda", generator=gen).half() for _ in range(nsets)]
        tile, split = gemm_ops.gemm_shape(m, n, k, sms, res, rd=True)
        table = gemm_ops._RD_GLU if glu else gemm_ops._RD
        route_kern = table[("q4_0", tile)]
        want = gemm_ops.gemm_launch(xs[0], ws[0], None, tile, split, glu=glu)
        times = {}
        for dg in DIAGS:
            table[("q4_0", tile)] = Kernel("gemm_rd_diag.cu", f"gemm_rd_dg{dg}_{tile}{'_glu' if glu else ''}", "ppppppppiiiii", pdl=True)
            try:
                got = gemm_ops.gemm_launch(xs[0], ws[0], None, tile, split, glu=glu)
                if dg in (0, 8, 9, 14) and not torch.equal(got, want):
                    raise SystemExit(f"{name}: DG {dg} differs from the route")
                times[dg] = statistics.median(time_sets(
                    lambda i: gemm_ops.gemm_launch(xs[i], ws[i], None, tile, split, glu=glu), nsets, 30))
            finally:
                table[("q4_0", tile)] = route_kern
        route_t = statistics.median(time_sets(lambda i: gemm_ops.gemm_launch(xs[i], ws[i], None, tile, split, glu=glu), nsets, 30))
        print(f"{name:8} {tile}x{split:<4} " + " ".join(f"{times[d]:11.1f}" for d in DIAGS) + f"   (route again {route_t:.1f} us;"
              f" {first.nbytes / 1e6:.1f} MB, copy-rate time {first.nbytes / 4.256e6:.1f} us)", flush=True)
        del ws, xs
    return 0


if __name__ == "__main__":
    sys.exit(main())
