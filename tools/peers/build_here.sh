#!/usr/bin/env bash
# Everything the peers need carried to the GPU machine, built on this CPU machine in one command (16 min on
# 2 cores; run it in the background at a session's start, since ignored folders do not survive into a new
# checkout): the trimmed llama.cpp source (prepare_llama_cpp.sh), a toolkit that can build its CUDA backend
# here (toolkit_here.sh), llama-bench and llama-batched-bench for sm_90 (build_llama_cpp.sh), packed as
# .peers/llama-bin.tar.xz.NN the way peers_check.sh unpacks them. Carry .peers/llama-bin.tar.xz.* and
# .peers/llama.cpp/ONECAT_SOURCE (not the source: 64 MiB limit).
#   tools/peers/build_here.sh            (CUDA_ARCH, JOBS as build_llama_cpp.sh takes them)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
[[ -f .peers/llama.cpp/CMakeLists.txt ]] || tools/peers/prepare_llama_cpp.sh
TK=$(tools/peers/toolkit_here.sh /tmp/onecat-cuda13 | tail -1)
BUILD=/tmp/onecat-llama.cpp-build  # the binaries' RUNPATH (absolute): where peers_check.sh unpacks them
PATH=$TK/bin:$PATH CUDACXX=$TK/bin/nvcc CUDAToolkit_ROOT=$TK LD_LIBRARY_PATH=$TK/lib:$TK/lib/stubs \
  JOBS=${JOBS:-$(nproc)} tools/peers/build_llama_cpp.sh .peers/llama.cpp "$BUILD"
rm -f .peers/llama-bin.tar.xz.*
tar -C "$BUILD/bin" -cf - . | xz -T0 -6 | split -b 15000000 -d - .peers/llama-bin.tar.xz.
ls -la .peers/llama-bin.tar.xz.*
