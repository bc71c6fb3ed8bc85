// wmma.cuh: PTX wmma m16n16k16 (fp16 in, fp32 accumulate) as inline PTX (NVRTC has no mma.h): on
// sm_70 each mma is HMMA.884. A and B fragments are 8 x f16x2 per thread, the accumulator 8 floats.
#pragma once
#include "common.cuh"

struct FragAB { unsigned r[8]; };
struct FragC { float r[8]; };

ONECAT_DEVICE void wmma_load_a_row(FragAB& f, const __half* p, int ldm) {  // global memory
  asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
               : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3]), "=r"(f.r[4]), "=r"(f.r[5]),
                 "=r"(f.r[6]), "=r"(f.r[7])
               : "l"(p), "r"(ldm));
}
ONECAT_DEVICE void wmma_load_a_row_shared(FragAB& f, const __half* p, int ldm) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.shared.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
               : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3]), "=r"(f.r[4]), "=r"(f.r[5]),
                 "=r"(f.r[6]), "=r"(f.r[7])
               : "r"(a), "r"(ldm) : "memory");
}
ONECAT_DEVICE void wmma_load_b_col_shared(FragAB& f, const __half* p, int ldm) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("wmma.load.b.sync.aligned.col.m16n16k16.shared.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8], %9;"
               : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3]), "=r"(f.r[4]), "=r"(f.r[5]),
                 "=r"(f.r[6]), "=r"(f.r[7])
               : "r"(a), "r"(ldm) : "memory");
}
ONECAT_DEVICE void wmma_mma(FragC& d, const FragAB& a, const FragAB& b) {
  asm volatile("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, "
               "{%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19,%20,%21,%22,%23}, "
               "{%0,%1,%2,%3,%4,%5,%6,%7};"
               : "+f"(d.r[0]), "+f"(d.r[1]), "+f"(d.r[2]), "+f"(d.r[3]), "+f"(d.r[4]), "+f"(d.r[5]),
                 "+f"(d.r[6]), "+f"(d.r[7])
               : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(a.r[4]), "r"(a.r[5]),
                 "r"(a.r[6]), "r"(a.r[7]), "r"(b.r[0]), "r"(b.r[1]), "r"(b.r[2]), "r"(b.r[3]),
                 "r"(b.r[4]), "r"(b.r[5]), "r"(b.r[6]), "r"(b.r[7]));
}
ONECAT_DEVICE void wmma_store_d_row_shared(float* p, const FragC& d, int ldm) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("wmma.store.d.sync.aligned.row.m16n16k16.shared.f32 [%0], {%1,%2,%3,%4,%5,%6,%7,%8}, %9;"
               :: "r"(a), "f"(d.r[0]), "f"(d.r[1]), "f"(d.r[2]), "f"(d.r[3]), "f"(d.r[4]), "f"(d.r[5]),
                  "f"(d.r[6]), "f"(d.r[7]), "r"(ldm) : "memory");
}
