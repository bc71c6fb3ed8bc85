#!/usr/bin/env bash
# s46 call 2 (no carry): the serve GPU tests (graphs on / off, asynchronous scheduling on / off) on a synthetic
# SmolLM2 GGUF, with this session's sampling rules (allowed_token_ids, bad_words, logit_bias) among the cases.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
timeout 40 python3 -m onecat.bench.cli peers --out /tmp/onecat-synth --synth-only --configs smollm2-135m:Q4_1 \
  > $OUT/synth.txt 2>&1; echo "synth rc=$? at ${SECONDS}s"
ONECAT_TEST_GGUF=$SMOLLM2_GGUF timeout $(( 380 - SECONDS )) python3 -m pytest -q -p no:cacheprovider -m gpu -rs \
  tests/serve/test_cuda_graph.py tests/serve/test_async_scheduling.py > $OUT/serve-gpu-tests.txt 2>&1
echo "rc=$? at ${SECONDS}s" >> $OUT/serve-gpu-tests.txt
tail -12 $OUT/serve-gpu-tests.txt | cut -c1-300
