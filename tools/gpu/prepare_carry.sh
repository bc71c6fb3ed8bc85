#!/usr/bin/env bash
# tools/gpu/prepare_carry.sh: fill the ignored .whl/ with the wheels the GPU scripts unpack there (common.sh
# gpu_env: gguf for the synthesized GGUF files, the pytest family where the machine has no pytest). The
# lent machine has no network, and ignored folders do not survive into a new checkout: run this on the
# CPU machine before the first device call, then carry ".whl" (~2 MB).
#   bash tools/gpu/prepare_carry.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: -d .whl gguf==0.19.0 pytest==9.2.0 pluggy iniconfig \
  packaging pygments 2>&1 | grep -v "^WARNING: Location" || true
ls .whl
