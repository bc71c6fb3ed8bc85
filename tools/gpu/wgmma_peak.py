"""The tensor-pipe rate of Hopper's warpgroup MMA (wgmma.mma_async m64nNk16, FP16 in, FP32 accumulation) by N,
A from registers (RS, as gemm_wg.cu issues it: W dequantized into A, x as B with N = the 64 rows of x) or from
shared memory (SS), for 1-3 resident warpgroups an SM, with operands that never change (no loads, no
dequantization) and 128 accumulator registers a thread (RS N 64: 64). For G3 (#7): whether the decode-batch GEMM's
N = 64 shape caps the tensor pipe below the rate a weights-as-N tile (N 128 / 256, W dequantized into shared memory)
could reach. `dq` rows add q4_0-like rebuilds of the A registers between groups (RS; the rest into a sink): one warpgroup
doing both, as gemm_wg.cu's consumer does. Device-only tool (sm_90a); TFLOP/s by CUDA events over the launch (best
of 3); the json keeps each block's clock64 span too (its FMA-a-clock figure holds only where an SM's blocks run
side by side).

    python3 tools/gpu/wgmma_peak.py [--iters 4096] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import torch

from onecat.kernels import build, driver

HEAD = r"""
#include <cuda_fp16.h>
__device__ __forceinline__ unsigned long long desc(unsigned saddr, int swz) {
  // K-major: no swizzle (LBO 128, SBO 256, gemm_wg.cu's) or 128-byte swizzle (SBO 1024)
  if (swz) return (unsigned long long)((saddr & 0x3FFFFu) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
  return (unsigned long long)((saddr & 0x3FFFFu) >> 4) | (8ull << 16) | (16ull << 32);
}
__device__ __forceinline__ unsigned h2u(__half2 h) { return *reinterpret_cast<unsigned*>(&h); }
__device__ __forceinline__ unsigned lop(unsigned v, unsigned m, unsigned magic) {
  unsigned d; asm volatile("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(v), "r"(m), "r"(magic)); return d;
}
"""


def mma_fn(mode: str, n: int) -> str:
    na = n // 2
    dl = ", ".join(f"%{i}" for i in range(na))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(na))
    if mode == "rs":
        ins = ", ".join(f'"r"(a[{i}])' for i in range(4)) + ', "l"(b)'
        ops = f"{{{dl}}}, {{%{na}, %{na + 1}, %{na + 2}, %{na + 3}}}, %{na + 4}, 1, 1, 1, 0;"
        sig = "const unsigned (&a)[4], unsigned long long b"
    else:
        ins = '"l"(a), "l"(b)'
        ops = f"{{{dl}}}, %{na}, %{na + 1}, 1, 1, 1, 0, 0;"
        sig = "unsigned long long a, unsigned long long b"
    return (f"__device__ __forceinline__ void mma_{mode}{n}(float (&d)[{na}], {sig}) {{\n"
            f'  asm volatile("wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16 {ops}"\n'
            f'    : {outs} : {ins} : "memory");\n}}\n')


def accumulators(mode: str, n: int) -> int:
    """m64nNk16 accumulators a thread: 128 registers of them (RS N 64: two, gemm_wg.cu's two tiles; with 4, ptxas
    serializes the wgmma for want of registers, C7512)."""
    return 2 if (mode, n) == ("rs", 64) else 256 // n


def kernel(mode: str, n: int, swz: int, dq: int, da: bool = False, gs: int = 1) -> tuple[str, str]:
    """dq: q4_0-like rebuilds (LOP3, HFMA2, HMUL2: one FP16 pair each) a group; they write the A registers first (RS),
    the rest go into a sink kept live to the end. da (RS N 64): each accumulator its own A registers, as gemm_wg.cu's
    two tiles (16 A registers a group instead of 8). gs: groups a loop iteration, all rebuilt from that iteration's
    word (gs 4: gemm_wg.cu's step of 4 groups from one W load, where ptxas may compute a later group's A early)."""
    nacc = accumulators(mode, n)
    na = nacc if da else 1
    name = f"k_{mode}{n}_s{swz}{f'_dq{dq}' if dq else ''}{'_da' if da else ''}{f'_g{gs}' if gs > 1 else ''}"
    a_decl = (f"unsigned a[{na}][2][4];\n  for (int i = 0; i < {8 * na}; ++i) a[i / 8][i / 4 % 2][i % 4] = "
              "0x2C002C00u ^ (threadIdx.x & 1);")
    a_arg = f"a[{'j' if da else '0'}][s]" if mode == "rs" else "desc(sbase + (swz ? 32 : 2048) * s, swz)"
    def rebuilds(grp: int) -> list[str]:  # per group, A registers (then the sink) rebuilt as q4_0_word does: 4 pairs
        # a word, each word its own (s51: before, pairs 8.. repeated pairs 0..7's words and masks, so ptxas merged
        # them: dq 16 / 24 / 32 rows rebuilt 8 distinct pairs a group, half of gemm_wg.cu's 16)
        lines = []
        n_a = 8 * na if mode == "rs" else 0
        for i in range(dq):
            k, e = divmod(i, 4)
            w = f"w{grp}_{k}"
            if e == 0:
                lines.append(f"    const unsigned {w} = v ^ {0x9E3779B9 * (k + 1 + 8 * grp) & 0xFFFFFFFF:#010x}u, "
                             f"{w}h = {w} >> 8;")
            mask, mul, add = ("0x00F000F0u", "shi", "nhi") if e % 2 else ("0x000F000Fu", "one", "nlo")
            dst = f"a[{i // 8}][{i // 4 % 2}][{i % 4}] = h2u(h);" if i < n_a else "sink ^= h2u(h);"
            lines.append(f"    {{ const unsigned w = lop({w if e < 2 else w + 'h'}, {mask}, magic); "
                         f"__half2 h = __hfma2(*reinterpret_cast<const __half2*>(&w), {mul}, {add}); "
                         f"h = __hmul2(h, dd); {dst} }}")
        return lines

    group = f"""
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int s = 0; s < 2; ++s)
#pragma unroll
      for (int j = 0; j < {nacc}; ++j) mma_{mode}{n}(d[j], {a_arg}, desc(sbase + 8192 + (swz ? 32 : 8192) * s, swz));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");"""
    body = ("\n    v = v * 1664525u + 1013904223u;" if dq else "") + "".join(
        "\n" + "\n".join(rebuilds(grp)) + group for grp in range(gs))
    src = f"""
extern "C" __global__ void __launch_bounds__(128) {name}(float* out, long long* clk, int iters) {{
  __shared__ __align__(1024) unsigned char smem[8192 + 32768];  // A: 8 KB, B: 32 KB (N 256 at 128-byte swizzle)
  for (int i = threadIdx.x; i < (int)sizeof(smem) / 4; i += 128) reinterpret_cast<unsigned*>(smem)[i] = 0x2C002C00u;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);
  const int swz = {swz};
  float d[{nacc}][{n // 2}];
  for (int j = 0; j < {nacc}; ++j) for (int i = 0; i < {n // 2}; ++i) d[j][i] = 0.f;
  {a_decl}
  unsigned v = threadIdx.x, magic = 0x64006400u, sink = 0;
  asm volatile("" : "+r"(magic));
  const __half2 one = __float2half2_rn(1.f), nlo = __float2half2_rn(-1032.f), dd = __float2half2_rn(0.01f),
               shi = __float2half2_rn(0.0625f), nhi = __float2half2_rn(-72.f);
  const long long t0 = clock64();
  for (int it = 0; it < iters; it += {gs}) {{{body}
  }}
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  const long long t1 = clock64();
  float sum = 0.f;
  for (int j = 0; j < {nacc}; ++j) for (int i = 0; i < {n // 2}; ++i) sum += d[j][i];
  if (sum == 1234.5f || sink == 0x12345678u) out[0] = sum + (float)sink;
  if (threadIdx.x == 0) clk[blockIdx.x] = t1 - t0;
}}
"""
    return name, src


CASES = [("rs", 64, 0, 0), ("rs", 128, 0, 0), ("rs", 256, 0, 0),
         ("ss", 64, 0, 0), ("ss", 128, 0, 0), ("ss", 256, 0, 0),
         ("ss", 64, 1, 0), ("ss", 256, 1, 0), ("rs", 64, 1, 0), ("rs", 256, 1, 0),
         ("rs", 64, 0, 8), ("rs", 128, 0, 8), ("rs", 256, 0, 8)]
# --set alu (s50): the tensor rate against the ALU work beside it. gemm_wg.cu's group rebuilds 16 A registers (one per
# tile: da) for 2 x 2 m64n64k16; SS N 256 with 32 rebuilds a group (into the sink) has the same rebuilds per FMA, as a
# weights-as-N tile that dequantizes into shared memory would (before its stores).
ALU_CASES = [("rs", 64, 0, 0, True), ("rs", 64, 0, 8, True), ("rs", 64, 0, 16, True), ("rs", 64, 0, 24, True),
             ("ss", 256, 0, 0), ("ss", 256, 0, 16), ("ss", 256, 0, 32), ("ss", 64, 0, 32),
             ("ss", 256, 1, 32),
             # s51: gemm_wg.cu's step shape, 4 groups from one word (its _nwxb issues ~81 instructions a group)
             ("rs", 64, 0, 16, True, 4), ("rs", 64, 0, 24, True, 4)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=4096)
    ap.add_argument("--json", default="")
    ap.add_argument("--set", choices=["all", "alu"], default="all", help="all: s49's rows; alu: s50's ALU_CASES")
    a = ap.parse_args()
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    cases = [c + (False, 1)[len(c) - 4:] for c in (CASES if a.set == "all" else ALU_CASES)]  # kernel()'s defaults
    fns = {c[0] + str(c[1]): mma_fn(c[0], c[1]) for c in cases}
    kerns = [kernel(*c) for c in cases]
    src = HEAD + "".join(fns.values()) + "".join(s for _, s in kerns)
    path = os.path.join(tempfile.mkdtemp(), "wgmma_peak.cu")
    with open(path, "w") as f:
        f.write(src)
    build.ARCH_FEATURES["wgmma_peak.cu"] = frozenset({90})  # sm_90a, as gemm_wg.cu
    _, compiled = driver.load_module(path, 0)
    # ptxas serializes a kernel's wgmma when it must (C7510-C7514, in its log only): such a row is no tensor rate
    serialized = {name for name, _ in kerns for line in compiled.log.splitlines()
                  if "(C751" in line and f"'{name}'" in line}
    out = torch.zeros(1, device="cuda")
    rows = []
    for (mode, n, swz, dq, da, gs), (name, _) in zip(cases, kerns):
        usage = compiled.usage.get(name, {})
        k = driver.Kernel(path, name, "ppi")
        for bps in (1, 2, 3):
            if usage.get("registers", 0) * 128 * bps > 65536:
                continue
            clk = torch.zeros(sms * bps, dtype=torch.int64, device="cuda")
            k((sms * bps, 1, 1), (128, 1, 1), out.data_ptr(), clk.data_ptr(), 64)
            torch.cuda.synchronize()
            best = None
            for _ in range(3):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                k((sms * bps, 1, 1), (128, 1, 1), out.data_ptr(), clk.data_ptr(), a.iters)
                e1.record()
                e1.synchronize()
                t = e0.elapsed_time(e1) * 1e-3
                if best is None or t < best[0]:
                    best = (t, float(clk.double().median()))
            cyc = best[1]
            fma_block = a.iters * 2 * accumulators(mode, n) * 64 * n * 16
            tflops = 2 * fma_block * sms * bps / best[0] / 1e12
            fma_clk = fma_block * bps / cyc  # per SM: the blocks of an SM run together
            rows.append({"mode": mode, "n": n, "swizzle": swz, "dequant": dq, "da": da, "groups_an_iteration": gs,
                         "blocks_per_sm": bps, "serialized_by_ptxas": name in serialized,
                         "registers": usage.get("registers"), "tflops": tflops, "block_clocks": cyc,
                         "fma_per_clk_sm_if_side_by_side": fma_clk})
    print(f"{props.name} (sm_{props.major}{props.minor}, {sms} SMs); wgmma m64nNk16 f16 -> f32, 2 k16 slices x "
          f"256/N accumulators a group, wait_group 1; {a.iters} groups a block")
    print("| A | N | swizzle | rebuilds a group | A per tile | groups an iteration | blocks/SM | regs | TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mode']} | {r['n']} | {r['swizzle']} | {r['dequant'] or '-'} | {'yes' if r['da'] else '-'} "
              f"| {r['groups_an_iteration']} | {r['blocks_per_sm']} | {r['registers']} | {r['tflops']:.0f}"
              f"{' (wgmma serialized by ptxas)' if r['serialized_by_ptxas'] else ''} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": props.name, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
