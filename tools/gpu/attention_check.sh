#!/usr/bin/env bash
# GPU check of the attention kernels in one call (the lent H200: torch+CUDA preinstalled, no network):
# GPU attention tests (and the generic provider tests), the admission table, resource use, then a
# benchmark whose table is printed last:
#   * paged decode bandwidth (KV bytes / time) beside device copy bandwidth measured in the same run,
#     ctx >= 8K, batch >= 4, FP16 / E4M3 / E5M2 KV;
#   * prefill useful causal TFLOP/s of the admitted provider beside torch SDPA (same shapes).
#
#   bash tools/gpu/attention_check.sh            # from the repo root; results under $OUT (or /tmp/...)
#
# Wheels: as tools/gpu/kernels_check.sh (carried .whl/ folder unpacked into $OUT/site).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/onecat-attention-check}
PY=${PYTHON:-python3}
mkdir -p "$OUT/site"
export ONECAT_CACHE_DIR="$OUT/cache"
PKGS=$(ls -d "$PWD"/packages/*/src | paste -sd: -)
export PYTHONPATH="$PKGS:$OUT/site${PYTHONPATH:+:$PYTHONPATH}"

unpack() {  # unpack .whl/<prefix>*.whl into $OUT/site
  local w
  for w in .whl/$1*.whl; do
    [ -e "$w" ] || { echo "missing .whl/$1*.whl"; return 1; }
    $PY -m zipfile -e "$w" "$OUT/site" && echo "unpacked $w"
  done
}
if [ -d .whl ]; then
  unpack nvidia_cuda_nvrtc_cu12-12.9.86 && unpack nvidia_cuda_runtime_cu12-12.9
  if ! $PY -c "import pytest" 2>/dev/null; then
    for p in pytest- pluggy- iniconfig- packaging- pygments-; do unpack "$p"; done
  fi
else
  echo "no .whl/ folder: relying on NVRTC and pytest already installed"
fi

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total --format=csv || true
if ! $PY -c "import torch; assert torch.cuda.is_available(); print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"; then
  echo "no usable CUDA device through torch: nothing to check"; exit 2
fi

echo "== attention kernels: compile for this GPU, resource use"
ARCH=$($PY -c "import torch; a, b = torch.cuda.get_device_capability(); print(10 * a + b)")
$PY - "$ARCH" <<'PYEOF' 2>&1 | tee "$OUT/sources.txt"
import sys
from onecat.kernels import build
for src in [s for s in build.sources() if s.startswith("attention_")]:
    c = build.compile_source(src, int(sys.argv[1]))
    for name, u in sorted(c.usage.items()):
        print(f"{src:24s} {name:28s} {u}")
PYEOF

echo "== admission on this GPU"
$PY -m onecat.kernels explain --device cuda --all-cases --check-available --op paged_attention --op reshape_and_cache 2>&1 | tee "$OUT/explain.txt"

echo "== GPU tests (attention + generic provider tests of paged_attention / reshape_and_cache)"
$PY -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py tests/kernels/test_attention_fp8.py \
  "tests/kernels/test_gpu_kernels.py::test_kernel_vs_reference" -rs --maxfail=10 --junitxml "$OUT/attention-tests.xml" \
  2>&1 | tee "$OUT/attention-tests.txt"
rc=${PIPESTATUS[0]}

echo "== benchmark (table last)"
$PY - "$OUT/attention-bench.json" <<'PYEOF' 2>&1 | tee "$OUT/attention-bench.txt"
import json, math, statistics, sys
import torch
import torch.nn.functional as F
from onecat.kernels import ops
from onecat.kernels import reference as ref
from onecat.kernels.inputs import paged_metadata

torch.manual_seed(0)
dev = "cuda"


def timed(fn, reps=20, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(ts), min(ts), max(ts)


# copy bandwidth (bytes read + written), 1 GiB buffers
src = torch.randn(1 << 28, device=dev)
dst = torch.empty_like(src)
t, _, _ = timed(lambda: dst.copy_(src))
copy_bw = 2 * src.numel() * 4 / t
del src, dst
print(f"device copy: {copy_bw / 1e9:.0f} GB/s")

rows = []
KV = {"f16": torch.float16, "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
for kv, dt in KV.items():
    for batch, ctx, hq, hk, d in [(4, 8192, 32, 8, 128), (16, 8192, 32, 8, 128), (4, 32768, 32, 8, 128),
                                  (8, 16384, 32, 4, 256), (32, 8192, 32, 8, 128)]:
        bs = 16
        nb = batch * (ctx // bs) + 4
        gen = torch.Generator().manual_seed(1)
        md = paged_metadata([1] * batch, [ctx] * batch, bs, nb, gen, dev)
        q = torch.randn(batch, hq, d, device=dev).half()
        x = torch.randn(nb, bs, hk, d, device=dev)
        kc = x.half() if kv == "f16" else ref.fp8_quantize(x, 0.02, dt)
        vc = kc.clone()
        del x
        extra = () if kv == "f16" else (0.02, 0.02)
        sel = ops.registry.select(ops.problem("paged_attention", q, kc, vc, md, 0.1, None, None, *extra)).provider.name
        fn = lambda: ops.paged_attention(q, kc, vc, md, 0.1, None, None, *extra)
        med, lo, hi = timed(fn)
        nbytes = 2 * batch * ctx * hk * d * kc.element_size()
        bw = nbytes / med
        rows.append(dict(kind="decode", kv=kv, batch=batch, ctx=ctx, heads=f"{hq}/{hk}", d=d, provider=sel,
                         us=med * 1e6, us_min=lo * 1e6, us_max=hi * 1e6, gbs=bw / 1e9, pct_copy=100 * bw / copy_bw))
        print(rows[-1])
        del kc, vc

for s, hq, hk, d in [(2048, 32, 8, 128), (8192, 32, 8, 128), (4096, 16, 8, 256), (4096, 32, 8, 64)]:
    bs = 16
    nb = s // bs + 4
    gen = torch.Generator().manual_seed(2)
    md = paged_metadata([s], [s], bs, nb, gen, dev)
    q = torch.randn(s, hq, d, device=dev).half()
    k = torch.randn(s, hk, d, device=dev).half()
    v = torch.randn(s, hk, d, device=dev).half()
    kc = torch.zeros(nb, bs, hk, d, device=dev, dtype=torch.float16)
    vc = torch.zeros_like(kc)
    ops.reshape_and_cache(k, v, kc, vc, md.slot_mapping)
    flops = 4 * hq * d * s * (s + 1) / 2
    sel = ops.registry.select(ops.problem("paged_attention", q, kc, vc, md, d ** -0.5)).provider.name
    med, lo, hi = timed(lambda: ops.paged_attention(q, kc, vc, md, d ** -0.5), reps=5, warm=1)
    qt, kt, vt = q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None]
    sd = lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, enable_gqa=True)
    smed, _, _ = timed(sd, reps=10)
    got = ops.paged_attention(q, kc, vc, md, d ** -0.5)
    want = sd()[0].transpose(0, 1)
    err = float((got.float() - want.float()).norm() / want.float().norm())
    rows.append(dict(kind="prefill", kv="f16", batch=1, ctx=s, heads=f"{hq}/{hk}", d=d, provider=sel, us=med * 1e6,
                     us_min=lo * 1e6, us_max=hi * 1e6, tflops=flops / med / 1e12, sdpa_us=smed * 1e6,
                     sdpa_tflops=flops / smed / 1e12, rel_err_vs_sdpa=err))
    print(rows[-1])

json.dump(dict(device=torch.cuda.get_device_name(0), copy_gbs=copy_bw / 1e9, rows=rows), open(sys.argv[1], "w"), indent=1)
print()
print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}; measured, median of repeats; copy {copy_bw / 1e9:.0f} GB/s")
print(f"{'kind':8s} {'kv':5s} {'B':>3s} {'ctx':>6s} {'heads':>6s} {'D':>4s} {'provider':14s} {'us':>10s}  result")
for r in rows:
    if r["kind"] == "decode":
        res = f"{r['gbs']:7.0f} GB/s = {r['pct_copy']:5.1f}% of copy (goal K1 >= 80%)"
    else:
        res = (f"{r['tflops']:7.1f} TFLOP/s useful causal; SDPA {r['sdpa_tflops']:6.1f} "
               f"({r['tflops'] / r['sdpa_tflops']:.2f}x); err vs SDPA {r['rel_err_vs_sdpa']:.1e}")
    print(f"{r['kind']:8s} {r['kv']:5s} {r['batch']:3d} {r['ctx']:6d} {r['heads']:>6s} {r['d']:4d} {r['provider']:14s} "
          f"{r['us']:10.1f}  {res}")
PYEOF
echo "attention tests exit code: $rc"
exit "$rc"
