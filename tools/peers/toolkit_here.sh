#!/usr/bin/env bash
# Assemble a CUDA toolkit that can build llama.cpp's CUDA backend on this CPU-only machine, so the
# GPU machine is spared the 258 s build: the machine's CUDA 13.0 (nvcc, cudart; no cuBLAS, no driver)
# copied to DEST, cuBLAS's headers and libraries from PyPI (nvidia-cublas 13.0), and a link-time
# stand-in for the driver library (soname libcuda.so.1, the driver-API symbols ggml-cuda calls; the
# GPU machine's real libcuda.so.1 is what loads at run time).
#
#   tools/peers/toolkit_here.sh [DEST]          (default /tmp/onecat-cuda13; prints DEST last)
#
# tools/peers/build_here.sh uses it to build and pack the binaries (the environment the build needs is
# there: LD_LIBRARY_PATH=DEST/lib:DEST/lib/stubs lets the linker resolve libggml-cuda's cuBLAS and
# driver symbols when it links the executables). The binaries need glibc 2.34 and GLIBCXX 3.4.30
# (gcc 12); peers_check.sh tries them on the GPU machine and builds there if they fail.
set -euo pipefail
DEST=${1:-/tmp/onecat-cuda13}
# the toolkit: $CUDA_HOME, else /usr/local/cuda, else where nvcc lives (a directory with bin/nvcc.profile:
# /usr/local/bin/nvcc here is a wrapper script, not the toolkit's)
SRC=${CUDA_HOME:-}
if [[ -z "$SRC" ]]; then
  for c in /usr/local/cuda "$(dirname "$(dirname "$(readlink -f "$(command -v nvcc || echo /nonexistent)")")")"; do
    [[ -f "$c/bin/nvcc.profile" ]] && { SRC=$(readlink -f "$c"); break; }
  done
fi
CUBLAS=${CUBLAS_VERSION:-13.0.*}
[[ -n "$SRC" && -x "$SRC/bin/nvcc" && -f "$SRC/bin/nvcc.profile" ]] || { echo "toolkit_here: no CUDA toolkit found (set CUDA_HOME)" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
rm -rf "$DEST"
cp -a "$SRC" "$DEST"
python3 -m pip download -q --no-deps -d "$WORK" "nvidia-cublas==$CUBLAS" >&2
python3 -m zipfile -e "$WORK"/nvidia_cublas-*.whl "$WORK/x"
cp -a "$WORK"/x/nvidia/cu13/include/. "$DEST/include/"
cp -a "$WORK"/x/nvidia/cu13/lib/. "$DEST/lib/"
ln -sf libcublas.so.13 "$DEST/lib/libcublas.so"
ln -sf libcublasLt.so.13 "$DEST/lib/libcublasLt.so"
mkdir -p "$DEST/lib/stubs"
{
  echo "/* link-time stand-in for the CUDA driver: the real libcuda.so.1 loads at run time */"
  for f in cuInit cuDriverGetVersion cuGetProcAddress cuGetErrorString cuDeviceGet cuDeviceGetAttribute \
           cuMemAddressFree cuMemAddressReserve cuMemCreate cuMemGetAllocationGranularity cuMemMap \
           cuMemRelease cuMemSetAccess cuMemUnmap; do
    echo "int $f(void) { return 999; }"
    echo "int ${f}_v2(void) { return 999; }"
  done
} > "$WORK/stub.c"
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$DEST/lib/stubs/libcuda.so" "$WORK/stub.c"
ln -sf libcuda.so "$DEST/lib/stubs/libcuda.so.1"  # the name the executables' link looks for
echo "$DEST"
