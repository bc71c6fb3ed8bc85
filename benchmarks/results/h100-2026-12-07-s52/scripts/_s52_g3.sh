#!/usr/bin/env bash
# s52: G3 (#7) with the decode phase timed as llama-batched-bench times its own (peer_runners.decode_phase; the rate
# by t(generate 128) - t(generate 1) stays in each record as decode_tok_s_by_difference), on main with XB routed:
# llama3-8b Q4_0, llama.cpp and onecat, batch 1 / 32 / 64, first both with FP16 KV caches, then both with 8-bit ones
# (onecat E4M3, llama.cpp q8_0). Carry .whl, .peers/llama-bin.tar.xz.0* and .peers/llama.cpp/ONECAT_SOURCE.
set -u
ROOT=$OUT
for kv in fp16 8bit; do
  mkdir -p $ROOT/$kv
  # the second run gets what the first left of ~470 s
  TOTAL=${G3_TOTAL:-470}; [ "$kv" = fp16 ] && lim=240 || lim=$((TOTAL - SECONDS))
  [ $lim -lt 150 ] && { echo "$kv skipped: $lim s left"; break; }
  PEERS_LIMIT_S=$lim OUT=$ROOT/$kv bash tools/gpu/peers_check.sh --configs llama3-8b:Q4_0 --engines llama.cpp onecat \
    --batched llama3-8b:Q4_0=32,64 --kv $kv > /dev/null 2>&1
  echo "$kv rc=$? at ${SECONDS}s"
  rm -f $ROOT/$kv/llama-bin.tar.xz.*
  grep -m1 "copy bandwidth" $ROOT/$kv/peers/peers.log
  sed -n '/^| shape/,/^$/p' $ROOT/$kv/peers/peers.md | cut -c1-150
  grep -h "G3\|decode_tok_s_by_difference" $ROOT/$kv/peers/peers.md | head -4
done
