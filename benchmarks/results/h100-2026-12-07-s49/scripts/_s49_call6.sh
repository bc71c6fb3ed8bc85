#!/usr/bin/env bash
# s49, prepared for the next session (carry .whl; ~9 min cold): the wgmma GPU tests (w64b2s / w64b2q / WLE bit-equal
# to w64b2; the diagnostics run), what W's loads / x's staging cost w64b2 (_s49_diag.py), w64b2e against w64b2s /
# w64b2 (_s49_wle.py), gemm_bench of w64b2q (four x stages, four A-register sets), and the batch-64 step A/B of
# w64b2q / w64b2s through gemm_ops.TWO_PER_SM.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 220 python3 -m pytest -q tests/kernels/test_gemm_rd.py -m gpu -k "wgmma" > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.txt)"
timeout 120 python3 benchmarks/results/h100-2026-12-07-s49/scripts/_s49_diag.py > $OUT/diag.txt 2>&1; echo "diag rc=$? at ${SECONDS}s"
timeout 120 python3 benchmarks/results/h100-2026-12-07-s49/scripts/_s49_wle.py > $OUT/wle.txt 2>&1; echo "wle rc=$? at ${SECONDS}s"
timeout 90 python3 tools/gpu/gemm_bench.py --formats q4_0 --m 64,48 --shapes 28672x4096 --tiles w64b2,w64b2s,w64b2q --glu \
  --splits 1 --no-cublas --iters 20 > $OUT/bench-gate_up.txt 2>&1; echo "bench rc=$? at ${SECONDS}s"
tail -3 $OUT/diag.txt; tail -6 $OUT/wle.txt; grep -E "^q4_0 .*GLU" $OUT/bench-gate_up.txt
timeout $(( 570 - SECONDS )) python3 tools/gpu/switch_ab.py --shape llama3-8b --weights q4_0 --max-model-len 656 \
  --batch 64 --context 512 --timed 20 --profiled 0 --rounds 2 --steps-json $OUT/ab-b64.json \
  --ab-disable "set:gemm_ops.TWO_PER_SM='w64b2q';set:gemm_ops.TWO_PER_SM='w64b2s';set:gemm_ops.TWO_PER_SM='w64b2'" \
  > $OUT/ab-b64.txt 2>&1
echo "ab rc=$? at ${SECONDS}s"; grep -E "^round|^decode" $OUT/ab-b64.txt | tail -4 | cut -c1-600
