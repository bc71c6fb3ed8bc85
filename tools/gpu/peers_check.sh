#!/usr/bin/env bash
# The peer comparison on the lent H200, in one call: build llama.cpp (CUDA, sm_90) from the trimmed
# llama-cpp-python sdist source while the GGUF files are synthesized, then `onecat-bench peers`:
# llama.cpp (llama-bench, llama-batched-bench), HF transformers and onecat on the same shapes and
# files, one report. Everything the run writes lands under $OUT (the device tool brings it back).
#
#   bash tools/gpu/peers_check.sh [PEERS OPTIONS]   # repo root; carry .peers and .whl; options go to
#                                                   # `onecat-bench peers` (e.g. --configs, --repeats)
#
# Before the call, on a CPU machine (no network there):
#   tools/peers/prepare_llama_cpp.sh       # -> .peers/llama.cpp (22 MB, ignored)
#   pip download --no-deps --only-binary=:all: -d .whl gguf==0.19.0   # if the machine lacks gguf
# PEERS_LIMIT_S (default 570): seconds for the whole script; the peers run gets what the build left.
# PEERS_SKIP_BUILD=1: no llama.cpp build (e.g. with --engines hf onecat).
# Prebuilt binaries in .peers/ (llama-bin.tar.xz.00, .01, ...: an earlier call's $OUT, or built on the
# CPU machine with tools/peers/toolkit_here.sh) skip the build if they run here; if not, it builds. $OUT keeps at most 8 files: check.log, 4 under peers/, 3 parts.
set -uo pipefail
cd "$(dirname "$0")/../.."
T0=$(date +%s)
LIMIT=${PEERS_LIMIT_S:-570}
OUT=${OUT:-/tmp/onecat-peers-check}
PY=${PYTHON:-python3}
BUILD=/tmp/onecat-llama.cpp-build
GGUF_DIR=/tmp/onecat-peers-gguf
SITE=/tmp/onecat-peers-site
mkdir -p "$OUT/peers" "$SITE"
exec > >(tee -a "$OUT/check.log") 2>&1
elapsed() { echo $(( $(date +%s) - T0 )); }

export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD/packages/onecat-kernels/src:$PWD/packages/onecat-quant/src:$PWD/packages/onecat-models/src:$PWD/packages/onecat-spec/src:$PWD/packages/onecat-serve/src:$PWD/packages/onecat-bench/src:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export ONECAT_CACHE_DIR=/tmp/onecat-cache
if ! $PY -c "import gguf" 2>/dev/null; then
  w=$(ls .whl/gguf-*.whl 2>/dev/null | head -1)
  [ -n "$w" ] && $PY -m zipfile -e "$w" "$SITE" && echo "gguf from $w"
fi

echo "== machine ($(elapsed) s)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,memory.total --format=csv
$PY -c "import torch, transformers, importlib.metadata as m; print('torch', torch.__version__, 'cuda', torch.version.cuda, '| transformers', transformers.__version__, '| gguf', m.version('gguf'))"
nvcc --version | tail -1; echo "cores: $(nproc)"

echo "== llama.cpp ($(elapsed) s)"
BUILD_PID=
if [ "${PEERS_SKIP_BUILD:-0}" = 1 ]; then
  echo "PEERS_SKIP_BUILD=1: not building llama.cpp"
elif [ -x "$BUILD/bin/llama-bench" ]; then
  echo "already built: $BUILD/bin"
else
  if [ -f .peers/llama-bin.tar.xz.00 ]; then  # built by an earlier call, or here (tools/peers/toolkit_here.sh)
    mkdir -p "$BUILD/bin" && cat .peers/llama-bin.tar.xz.* | tar -xJf - -C "$BUILD/bin"
    if "$BUILD/bin/llama-bench" --help > /dev/null 2>&1; then
      echo "prebuilt binaries from .peers/llama-bin.tar.xz.*"
    else  # e.g. built against other system libraries: build here after all
      echo "prebuilt binaries do not run here ($("$BUILD/bin/llama-bench" --help 2>&1 | head -1)): building"
      rm -rf "$BUILD"
    fi
  fi
  if [ ! -x "$BUILD/bin/llama-bench" ]; then
    ( s=$(date +%s); tools/peers/build_llama_cpp.sh .peers/llama.cpp "$BUILD" > /tmp/llama_build.log 2>&1
      echo "rc=$? seconds=$(( $(date +%s) - s ))" >> /tmp/llama_build.log ) &
    BUILD_PID=$!
  fi
fi

echo "== GGUF files ($(elapsed) s)"
$PY -m onecat.bench.cli peers --out "$OUT/peers" --gguf-dir "$GGUF_DIR" --synth-only "$@" || echo "synthesis FAILED"
ls -la "$GGUF_DIR"

if [ -n "$BUILD_PID" ]; then
  wait "$BUILD_PID"
  echo "-- build log, last 25 lines"; tail -n 25 /tmp/llama_build.log
  if [ -x "$BUILD/bin/llama-bench" ]; then  # keep the binaries for a later call (no rebuild): 3 parts at most
    tar -C "$BUILD/bin" -cf - . | xz -T0 -6 | split -b 15000000 -d - "$OUT/llama-bin.tar.xz."
    ls -la "$OUT"/llama-bin.tar.xz.*
    [ -e "$OUT/llama-bin.tar.xz.03" ] && { echo "binaries too large to bring back"; rm -f "$OUT"/llama-bin.tar.xz.*; }
  fi
fi
export LD_LIBRARY_PATH="$BUILD/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

LEFT=$(( LIMIT - $(elapsed) ))
echo "== peers ($(elapsed) s; ${LEFT} s left)"
timeout $(( LEFT - 5 )) $PY -m onecat.bench.cli peers --out "$OUT/peers" --gguf-dir "$GGUF_DIR" \
  --llama-cpp-bin "$BUILD/bin" --llama-cpp-source .peers/llama.cpp/ONECAT_SOURCE --deadline $(( LEFT - 20 )) \
  --timeout 420 "$@" || echo "peers exited $?"
echo "== report ($(elapsed) s)"
cat "$OUT/peers/peers.md" 2>/dev/null | sed -n '/^| shape/,/^$/p'
