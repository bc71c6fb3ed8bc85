#!/usr/bin/env bash
# s29 call 6: same-run peers for #7 G2 / G3: llama.cpp (llama-bench tg, llama-batched-bench; built on the CPU machine by
# tools/peers/build_here.sh, carried) against onecat, llama3-8b Q4_0, batch 1 / 32 / 64
set -u
PEERS_LIMIT_S=480 bash tools/gpu/peers_check.sh --configs llama3-8b:Q4_0 --engines llama.cpp onecat \
  --batched llama3-8b:Q4_0=32,64 > /dev/null 2>&1
echo "peers rc=$?"
sed -n '/^| shape/,/^$/p' $OUT/peers/peers.md; sed -n '/^Ratios/,/^How measured/p' $OUT/peers/peers.md
tail -5 $OUT/check.log
