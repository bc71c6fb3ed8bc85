#!/usr/bin/env bash
# s53 (carry .whl): XB behind XB. gate_up's _glu_xb_xs writes its GLU output as down's x stages and down's w64 tile
# copies them whole (_norm_xb / _xb). The GPU tests (bit-equal to the row-major route, the chain and ops.linear on the
# stages, split-K), the batch-64 llama3-8b q4_0 decode step with it off (the route, A) / on (B) (switch_ab.py,
# linear_norm_ops.XB_FEEDS), then with the time left the engine against its CPU reference at 48 concurrent requests
# (llama3-8b-shaped, 2 layers, q4_0: down on w64, eager and graphed). Ordered and limited for S53_LIMIT seconds
# (default 445) of device time.
set -u
L=${S53_LIMIT:-445}
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
git log --oneline -1 > $OUT/tree.txt 2>/dev/null; git status --short >> $OUT/tree.txt 2>/dev/null
timeout 190 python3 -m pytest -q tests/kernels/test_linear_norm.py tests/kernels/test_gemm_wg.py \
  tests/kernels/test_x_stages.py -m gpu -k "x_stages or o_gate_up or down_qkv or wgmma" > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.txt)"
timeout $((L - 45 - SECONDS)) python3 tools/gpu/switch_ab.py --shape llama3-8b --weights q4_0 --batch 64 --context 512 \
  --timed ${S53_TIMED:-20} --rounds ${S53_ROUNDS:-3} --profiled 0 --ab-disable "set:linear_norm_ops.XB_FEEDS=True" > $OUT/switch_b64.txt 2>&1
echo "switch rc=$? at ${SECONDS}s"; tail -6 $OUT/switch_b64.txt
[ $((L - SECONDS)) -gt 30 ] && timeout $((L - SECONDS)) python3 -c "
import runpy, sys
from onecat.kernels import linear_norm_ops
linear_norm_ops.XB_FEEDS = True  # the route under test (off by default until this script has run)
sys.argv = ['engine_check.py', '--shape', 'llama3-8b', '--weights', 'q4_0', '--layers', '2', '--prompts', '48',
            '--max-tokens', '8']
runpy.run_path('tools/gpu/engine_check.py', run_name='__main__')" > $OUT/engine48.txt 2>&1
echo "engine rc=$? at ${SECONDS}s"; tail -5 $OUT/engine48.txt
