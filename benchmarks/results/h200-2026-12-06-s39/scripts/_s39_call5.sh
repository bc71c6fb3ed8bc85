#!/usr/bin/env bash
# s39 call 5: w64b2d1 (w64 held to 168 registers for two blocks per SM: W one step ahead, the x row offsets from
# shared memory) against w64 and w64x2p4: the wgmma tile tests, gate_up (GLU) / down at M 64 / 48
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
FINAL=$OUT; OUT=$FINAL/call5; mkdir -p $OUT
machine_info > $OUT/machine.txt 2>&1
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd.py -k "wgmma_tile and (w64] or w64b2d1)" > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s"
timeout 130 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48 --tiles w64,w64x2p4,w64b2d1 --splits 1,2 --shapes 28672x4096 \
  --glu --no-cublas --budget 300 > $OUT/gateup-glu.txt 2>&1; echo "gate_up rc=$? at ${SECONDS}s"
timeout 130 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48 --tiles w64,w64x2p4,w64b2d1 --splits 4,8 --shapes 4096x14336 \
  --no-cublas --budget 300 > $OUT/down.txt 2>&1; echo "down rc=$? at ${SECONDS}s"
python3 -c "
import torch; from onecat.kernels import gemm_ops
print('resident', gemm_ops.gemm_slots('q4_0', torch.device('cuda'))[1])" > $OUT/resident.txt 2>&1
cat $OUT/resident.txt | cut -c1-300
tail -n 4 $OUT/tests.txt
grep "route" $OUT/gateup-glu.txt $OUT/down.txt | cut -d: -f2- | sed 's/(err [0-9.e-]*)//g'
