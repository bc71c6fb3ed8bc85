#!/usr/bin/env bash
# #7's goals G1-G3 in one same-run peers report on the lent GPU (~220 s with llama.cpp's binaries carried):
# smollm2-135m Q4_1 and llama3-8b Q4_0 / Q4_K_M at batch 1, llama3-8b Q4_0 at 32 / 64 concurrent sequences
# (llama-batched-bench), llama.cpp and onecat on the same synthesized GGUF files, then the report's own table,
# ratios and goal lines (peers_report.py states G1-G3 against ../shared/perf.md). Sessions 36, 41 and 42 each
# wrote this call by hand; it is one script now.
#
#   OUT=... bash tools/gpu/goals_check.sh   # repo root; carry .whl, .peers/llama-bin.tar.xz.0* and
#                                           # .peers/llama.cpp/ONECAT_SOURCE (tools/peers/build_here.sh makes them)
# GOALS_LIMIT_S (default 570): seconds for the whole script (peers_check.sh's PEERS_LIMIT_S).
# GOALS_ARGS: more options for `onecat-bench peers` (e.g. "--repeats 5"; "--kv 8bit": both engines with 8-bit KV
# caches, onecat E4M3 against llama.cpp q8_0, the G3 lines naming them; "--onecat-prefill-first": onecat's scheduler
# runs every prompt of a G3 batch before its decode rows, as llama-batched-bench does, and the report says so).
# Everything lands in $OUT itself: check.log and peers/ (peers.md, peers.jsonl, the logs). Keep $OUT shallow: the
# device tool brings back nothing 4 folders down (s43's first run wrote $OUT/call2/goals/peers/ and lost it). The
# carried binaries that peers_check.sh may leave in $OUT are removed, so that the report alone comes back.
set -u
cd "$(dirname "$0")/../.."
G=${OUT:-/tmp/onecat-goals}
mkdir -p "$G"
# shellcheck disable=SC2086  # GOALS_ARGS: options split on spaces on purpose
PEERS_LIMIT_S=${GOALS_LIMIT_S:-570} OUT=$G bash tools/gpu/peers_check.sh \
  --configs smollm2-135m:Q4_1 llama3-8b:Q4_0 llama3-8b:Q4_K_M --engines llama.cpp onecat \
  --batched llama3-8b:Q4_0=32,64 ${GOALS_ARGS:-} > /dev/null 2>&1
rc=$?
rm -f "$G"/llama-bin.tar.xz.*
echo "peers_check.sh rc=$rc ($G/check.log)"
if [ -f "$G/peers/peers.md" ]; then
  grep -m1 "^- Machine" "$G/peers/peers.md"
  grep -m1 "copy bandwidth" "$G/peers/peers.md"
  sed -n '/^| shape/,/^$/p' "$G/peers/peers.md"
  sed -n '/^Goals/,/^How measured/p' "$G/peers/peers.md" | sed '$d'
else
  echo "no peers.md: the report did not finish"; tail -15 "$G/check.log" 2>/dev/null
  exit 1
fi
exit $rc
