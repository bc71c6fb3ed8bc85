#!/usr/bin/env bash
# s49 call 4: #7's goals (tools/gpu/goals_check.sh: llama.cpp beside onecat on the same files) with s48's q4_0
# norm-weight-first route. Carry .whl, .peers/llama-bin.tar.xz.0* and .peers/llama.cpp/ONECAT_SOURCE.
set -u
. tools/gpu/common.sh; gpu_env /tmp/site /tmp/onecat-cache
machine_info > $OUT/machine.txt 2>&1; head -2 $OUT/machine.txt | tail -1
GOALS_LIMIT_S=${GOALS_LIMIT_S:-330} OUT=$OUT bash tools/gpu/goals_check.sh > $OUT/goals.txt 2>&1
echo "goals rc=$? at ${SECONDS}s"; cat $OUT/goals.txt
