#!/usr/bin/env bash
# tools/gpu/gemv_chain_check.sh: the M = 1 GEMVs in decode's dependent chain (gemv_chain.py: graphs,
# PDL on / off, kernel shapes), optionally alone (gemv_variants.py), the attention GPU tests and
# llama3-8b decode-step timelines with PDL off / on; one device call, logs into $OUT.
# TESTS=1 also runs the attention and normed / plain linear GPU tests first.
#   OUT=$OUT [FORMATS=q4_0,q4_k] [CHAINS=...] [VARIANTS=auto,...] [ALONE=1] [TESTS=1] [TIMELINES=1] \
#     bash tools/gpu/gemv_chain_check.sh
set -u
. tools/gpu/common.sh
gpu_env /tmp/site /tmp/onecat-cache
machine_info > "$OUT/machine.txt" 2>&1
if [ "${TESTS:-0}" = 1 ]; then
  timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_attention_gpu.py > "$OUT/tests.txt" 2>&1
  echo "rc=$?" >> "$OUT/tests.txt"
  timeout 90 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_gpu_kernels.py -k "rms_norm or linear" \
    >> "$OUT/tests.txt" 2>&1
  echo "rc=$?" >> "$OUT/tests.txt"
  tail -3 "$OUT/tests.txt"
fi
timeout ${CHAIN_S:-240} python3 tools/gpu/gemv_chain.py --formats "${FORMATS:-q4_0,q4_k}" \
  --chains "${CHAINS:-decode,4096x4096,4096x14336,rn:6144x4096,glu:28672x4096}" \
  --variants "${VARIANTS:-auto,r4u1k2n,r4u1k2,r4u2k2n,r4u1k1n,r4u2k1n}" \
  --pdl "${PDL:-1,0}" \
  --json "$OUT/chain.json" > "$OUT/chain.txt" 2>&1
echo "rc=$?" >> "$OUT/chain.txt"
if [ "${ALONE:-0}" = 1 ]; then
  timeout 200 python3 tools/gpu/gemv_variants.py --formats "${FORMATS:-q4_0,q4_k}" --json "$OUT/variants.json" \
    > "$OUT/variants.txt" 2>&1
  echo "rc=$?" >> "$OUT/variants.txt"
fi
if [ "${TIMELINES:-0}" = 1 ]; then
  for pdl in 0 1; do
    echo "== llama3-8b q4_0 batch 1 x 512, ONECAT_PDL=$pdl" >> "$OUT/timelines.txt"
    ONECAT_PDL=$pdl timeout 60 python3 tools/ncu/target.py --shape llama3-8b --weights q4_0 --batch 1 --context 512 \
      --timed 20 --timeline 2 --profiled 0 2>&1 | grep -v Warn >> "$OUT/timelines.txt"
  done
  grep -v "^ " "$OUT/timelines.txt" | tail -40
fi
grep -v "^ " "$OUT/chain.txt" | tail -130
