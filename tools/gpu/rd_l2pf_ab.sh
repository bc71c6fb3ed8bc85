#!/usr/bin/env bash
# tools/gpu/rd_l2pf_ab.sh: the register-direct GEMM's L2-prefetch experiment (gemm_rd.cu L2PF: the rest of
# each block's W slice sent towards L2 before pdl_wait) against the route, in one device call (~6 min):
#   1. GPU tests of the register-direct tiles and routes (the <tile>pf kernels bit-equal to the plain ones);
#   2. gemm_bench q4_0 M 32 / 64, the route with ONECAT_RD_L2PF=0 and =1 (standalone: no PDL predecessor);
#   3. peers, onecat only, llama3-8b Q4_0 batch 1 / 32 / 64, with ONECAT_RD_L2PF=0, =1, =0, =1 (in the
#      engine, where PDL overlaps the prefetch with the previous kernel), as many rounds as time leaves.
#   OUT=$OUT bash tools/gpu/rd_l2pf_ab.sh      # carry .whl
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
T0=$(date +%s); LIMIT=${AB_LIMIT_S:-560}
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_packed.py -k "register_direct" --tb=line \
  > "$OUT/tests.txt" 2>&1; echo "rc=$?" >> "$OUT/tests.txt"
for pf in 0 1; do
  ONECAT_RD_L2PF=$pf timeout 60 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 32,64 --iters 8 --no-variants \
    > "$OUT/gemm-pf$pf.txt" 2>&1
done
round=0
while [ "$(left)" -gt 150 ] && [ $round -lt 4 ]; do
  pf=$(( round % 2 ))
  ONECAT_RD_L2PF=$pf timeout $(( $(left) - 20 )) python3 -m onecat.bench.cli peers --out "$OUT/peers-$round-pf$pf" \
    --configs llama3-8b:Q4_0 --engines onecat --deadline 120 > "$OUT/peers-$round.log" 2>&1
  round=$(( round + 1 ))
done
tail -3 "$OUT/tests.txt"
for pf in 0 1; do echo "== gemm ONECAT_RD_L2PF=$pf"; grep -E "^q4_0" "$OUT/gemm-pf$pf.txt" | awk '{print $2, $3, $5, $6}'; done
for d in "$OUT"/peers-*-pf*; do echo "== $(basename $d)"; grep -E "^\| llama3" "$d"/peers.md | awk -F'|' '{print $5, $7, $8}'; done
