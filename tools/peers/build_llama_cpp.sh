#!/usr/bin/env bash
# Build llama.cpp's llama-bench and llama-batched-bench with CUDA from the trimmed source that
# tools/peers/prepare_llama_cpp.sh wrote (default .peers/llama.cpp).
#
#   tools/peers/build_llama_cpp.sh [SRC] [BUILD_DIR]     (default BUILD_DIR: /tmp/onecat-llama.cpp-build)
#
# CUDA_ARCH (default 90), JOBS (default: all cores). Only the two targets are built; flash
# attention keeps llama.cpp's default kernel set (no GGML_CUDA_FA_ALL_QUANTS), no curl/openssl,
# no native CPU tuning (-DGGML_NATIVE=OFF: the build must run on the machine it is built for
# without AMX surprises, ../shared/models.md). Prints the binaries' directory last.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SRC=${1:-$ROOT/.peers/llama.cpp}
BUILD=${2:-/tmp/onecat-llama.cpp-build}
ARCH=${CUDA_ARCH:-90}
JOBS=${JOBS:-$(nproc)}
[[ -f "$SRC/CMakeLists.txt" ]] || { echo "build_llama_cpp: no llama.cpp source at $SRC (run tools/peers/prepare_llama_cpp.sh)" >&2; exit 2; }
command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || { echo "build_llama_cpp: nvcc not found" >&2; exit 2; }
export PATH=$PATH:/usr/local/cuda/bin
export GIT_CEILING_DIRECTORIES=$(dirname "$(cd "$SRC" && pwd)")  # no git above the source: commit from ONECAT_SOURCE
COMMIT=$(sed -n 's/^llama_cpp_commit=//p' "$SRC/ONECAT_SOURCE" 2>/dev/null || echo unknown)

cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DGGML_NATIVE=OFF -DGGML_CUDA_FA_ALL_QUANTS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_COMMON=ON \
    -DBUILD_SHARED_LIBS=ON -DLLAMA_BUILD_COMMIT="${COMMIT:0:9}" -DLLAMA_BUILD_NUMBER=0 >&2
cmake --build "$BUILD" --target llama-bench llama-batched-bench -j "$JOBS" >&2
ls "$BUILD/bin/llama-bench" "$BUILD/bin/llama-batched-bench" >&2
echo "$BUILD/bin"
