#!/usr/bin/env bash
# tools/gpu/rd_experiments_ab.sh: the register-direct GEMM's two switched-off experiments against the route,
# in one device call (~8 min):
#   ONECAT_RD_L2PF=1  gemm_rd.cu L2PF: the rest of each block's W slice sent towards L2 before pdl_wait;
#   ONECAT_RD_NORM=1  cuda_pack_gemm_rd_norm: rms_norm_linear's RMSNorm fused in front of the GEMM (17..32
#                     rows), one launch instead of rms_norm + linear for qkv and gate_up.
#   1. GPU tests: the register-direct tiles / routes (the <tile>pf kernels bit-equal to the plain ones) and
#      test_gemm_rd_norm.py (against the reference, residual bit-equal, split-K, graph replay);
#   2. engine_check llama3-8b 2-layer q4_0, 32 requests, with ONECAT_RD_NORM=1 (greedy tokens vs the CPU route);
#   3. gemm_bench q4_0 M 32 / 64, the route with ONECAT_RD_L2PF=0 / 1 (standalone: no PDL predecessor);
#   4. peers, onecat only, llama3-8b Q4_0 batch 1 / 32 / 64: base, L2PF, NORM, both; again while time is left.
#   OUT=$OUT bash tools/gpu/rd_experiments_ab.sh      # carry .whl (tools/gpu/prepare_carry.sh)
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
machine_info > "$OUT/machine.txt" 2>&1
T0=$(date +%s); LIMIT=${AB_LIMIT_S:-570}
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
{
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_packed.py -k "register_direct" --tb=line 2>&1 | tail -3
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gemm_rd_norm.py --tb=short 2>&1 | tail -15
} > "$OUT/tests.txt" 2>&1
ONECAT_RD_NORM=1 timeout 120 python3 tools/gpu/engine_check.py --shape llama3-8b --weights q4_0 --layers 2 --prompts 32 \
  --max-tokens 16 > "$OUT/engine-norm.txt" 2>&1; echo "rc=$?" >> "$OUT/engine-norm.txt"
for pf in 0 1; do
  ONECAT_RD_L2PF=$pf timeout 60 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 32,64 --iters 8 --no-variants \
    > "$OUT/gemm-pf$pf.txt" 2>&1
done
round=0
CONFIGS=("0 0" "1 0" "0 1" "1 1")
while [ "$(left)" -gt 100 ] && [ $round -lt 8 ]; do
  set -- ${CONFIGS[$(( round % 4 ))]}
  ONECAT_RD_L2PF=$1 ONECAT_RD_NORM=$2 timeout $(( $(left) - 15 )) python3 -m onecat.bench.cli peers \
    --out "$OUT/peers-$round-pf$1-norm$2" --configs llama3-8b:Q4_0 --engines onecat --deadline 100 \
    > "$OUT/peers-$round.log" 2>&1
  round=$(( round + 1 ))
done
cat "$OUT/tests.txt"
grep -E "mismatch|clear positions|==|rc=|rms_norm_linear\[sm90.*rows=17-64" "$OUT/engine-norm.txt" | head -8
for pf in 0 1; do echo "== gemm ONECAT_RD_L2PF=$pf"; grep -E "^q4_0" "$OUT/gemm-pf$pf.txt" | awk '{print $2, $3, $5, $6}'; done
for d in "$OUT"/peers-*-pf*; do echo "== $(basename $d)"; grep -E "^\| llama3" "$d"/peers.md | awk -F'|' '{print $5, $7, $8}'; done
