// s38 experiment (not routed): prefetch byte ranges of a weight into L2 from a tiny PDL kernel placed in the decode
// step's launch chain, so the next large GEMV reads part of its weight from L2 (DRAM is mostly idle while the
// small qkv GEMV, attention and o run). sm_90: cp.async.bulk.prefetch.L2 (one instruction per `chunk` bytes) or
// prefetch.global.L2::evict_last per 128-byte line; elsewhere the kernel only keeps the chain's order.
// mode bit 0: wait for the kernel in front before issuing (else issue at once, wait at the end);
//      bit 1: per-line prefetch with evict_last (else bulk, evict_normal).
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(128) l2_prefetch(const unsigned char* p0, long long n0,
                                                               const unsigned char* p1, long long n1,
                                                               const unsigned char* p2, long long n2,
                                                               const unsigned char* p3, long long n3,
                                                               long long chunk, int mode) {
  pdl_launch_dependents();
  if (mode & 1) pdl_wait();
  const long long nt = (long long)gridDim.x * blockDim.x;
  long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x, base = 0;
  // thread t takes pieces t, t + nt, ... of the concatenated ranges (each range's pieces numbered from base)
  for (int r = 0; r < 4; ++r) {
    const unsigned char* p = r == 0 ? p0 : r == 1 ? p1 : r == 2 ? p2 : p3;
    const long long n = r == 0 ? n0 : r == 1 ? n1 : r == 2 ? n2 : n3;
    if (p && n > 0) {
      const long long pieces = (n + chunk - 1) / chunk;
      for (long long i = t - base; i < pieces; i += nt) {
        if (i < 0) continue;
        const long long off = i * chunk, sz = min(chunk, n - off);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        if (mode & 2) {
          for (long long o = 0; o < sz; o += 128) asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(p + off + o));
        } else {
          asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"((unsigned)(sz & ~15LL)) : "memory");
        }
#endif
      }
      base += pieces;
    }
  }
  if (!(mode & 1)) pdl_wait();  // complete only after the kernel in front: the chain's order holds
}
