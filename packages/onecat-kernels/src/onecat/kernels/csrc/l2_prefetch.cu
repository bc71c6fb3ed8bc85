// l2_prefetch.cu: stream `bytes` of global memory into L2 ahead of the kernel that will read them (an
// experiment for batch-1 decode, tools/gpu/gemv_chain.py --l2-ahead: while one GEMV of the chain
// runs, a concurrent branch of the graph pulls a later GEMV's weights into L2, so that GEMV starts
// from L2 instead of paying DRAM latency during its ramp). Two ways, both on sm_70:
//   l2_prefetch_pf: prefetch.global.L2 per 128-byte line (a hint: no registers, no data returned);
//   l2_prefetch_ld: one 128-bit ld.global.cg load (cached in L2 only) per 32-byte sector, the unit
//     DRAM fills L2 in, folded into a value stored only when it equals `magic` (so the loads are not
//     dead code): the data moves for certain.
// Grid-stride loops: pf one 128-byte line per thread and iteration, ld one sector.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256) l2_prefetch_pf(const unsigned char* p, i64 bytes) {
  const i64 stride = (i64)gridDim.x * blockDim.x * 128;
  for (i64 off = ((i64)blockIdx.x * blockDim.x + threadIdx.x) * 128; off < bytes; off += stride)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off));
}

extern "C" __global__ void __launch_bounds__(256) l2_prefetch_ld(const unsigned char* p, i64 bytes,
                                                                  unsigned* sink, unsigned magic) {
  constexpr int U = 8;  // loads in flight per thread: all issued before any is used
  const i64 stride = (i64)gridDim.x * blockDim.x * 32;
  unsigned acc = 0;
  for (i64 off = ((i64)blockIdx.x * blockDim.x + threadIdx.x) * 32; off < bytes; off += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const i64 o = off + u * stride;
      v[u] = o + 16 <= bytes ? __ldcg(reinterpret_cast<const uint4*>(p + o)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == magic) *sink = acc;
}
