#!/usr/bin/env bash
# Trim llama.cpp, as vendored in the llama-cpp-python PyPI sdist, to what the CUDA build of
# llama-bench and llama-batched-bench needs, into an ignored folder that travels to the GPU
# machine (which has no network) with `run --carry .peers`.
#
#   tools/peers/prepare_llama_cpp.sh [SDIST.tar.gz] [DEST]      (default DEST: .peers/llama.cpp)
#
# Without SDIST it downloads llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION (default 0.3.36) with pip.
# Kept: the top CMake files, cmake/, include/, src/, common/, vendor/, ggml/ with the CPU and CUDA
# backends only, and tools/{llama-bench,batched-bench} under a two-line tools/CMakeLists.txt.
# Dropped: models/ (75 MB of vocab files), docs/, tests/, examples/, every other ggml backend,
# every other tool (server, web UI, mtmd, ...). The source's commit is written to ONECAT_SOURCE.
set -euo pipefail
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SDIST=${1:-}
DEST=${2:-$ROOT/.peers/llama.cpp}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

if [[ -z "$SDIST" ]]; then
    PY=${PYTHON:-$ROOT/.venv/bin/python}
    "$PY" -m pip download --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$WORK/dl" >&2
    SDIST=$(ls "$WORK"/dl/llama_cpp_python-*.tar.gz)
fi
[[ -f "$SDIST" ]] || { echo "prepare_llama_cpp: $SDIST: no such sdist" >&2; exit 2; }
tar -xzf "$SDIST" -C "$WORK"
PKG=$(ls -d "$WORK"/llama_cpp_python-*/)
SRC=$PKG/vendor/llama.cpp
[[ -f "$SRC/CMakeLists.txt" ]] || { echo "prepare_llama_cpp: $SDIST has no vendor/llama.cpp" >&2; exit 2; }

# The vendored commit: the submodule HEAD when the sdist carries it, else the changelog's line.
COMMIT=$(cat "$PKG/.git/modules/vendor/llama.cpp/HEAD" 2>/dev/null || true)
if [[ ! "$COMMIT" =~ ^[0-9a-f]{40}$ ]]; then
    COMMIT=$(grep -m1 -o 'ggml-org/llama.cpp@[0-9a-f]*' "$PKG/CHANGELOG.md" | cut -d@ -f2 || echo unknown)
fi

rm -rf "$DEST"
mkdir -p "$DEST/ggml/src" "$DEST/tools"
cp -a "$SRC"/{CMakeLists.txt,LICENSE,cmake,include,src,common,vendor} "$DEST/"
cp -a "$SRC"/ggml/{CMakeLists.txt,cmake,include} "$DEST/ggml/"
find "$SRC/ggml/src" -maxdepth 1 -type f -exec cp -a {} "$DEST/ggml/src/" \;
cp -a "$SRC"/ggml/src/{ggml-cpu,ggml-cuda} "$DEST/ggml/src/"
cp -a "$SRC"/tools/{llama-bench,batched-bench} "$DEST/tools/"
cat > "$DEST/tools/CMakeLists.txt" <<'CMAKE'
# onecat peers: only the two benchmark tools (tools/peers/prepare_llama_cpp.sh trimmed the rest)
find_package(Threads REQUIRED)
llama_add_compile_flags()
add_subdirectory(batched-bench)
add_subdirectory(llama-bench)
CMAKE
SHA=$(sha256sum "$SDIST" | cut -d' ' -f1)
cat > "$DEST/ONECAT_SOURCE" <<INFO
sdist=$(basename "$SDIST")
sdist_sha256=$SHA
llama_cpp_commit=$COMMIT
trimmed_by=tools/peers/prepare_llama_cpp.sh
INFO
echo "prepare_llama_cpp: $DEST ($(du -sh "$DEST" | cut -f1)), llama.cpp $COMMIT"
