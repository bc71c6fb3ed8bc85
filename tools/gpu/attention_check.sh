#!/usr/bin/env bash
# GPU check of the attention kernels in one call (the lent H200: torch+CUDA preinstalled, no network):
# GPU attention tests (and the generic provider tests), the admission table, resource use, then a
# benchmark whose table is printed last:
#   * paged decode bandwidth (KV bytes / time) beside device copy bandwidth measured in the same run,
#     ctx >= 8K, batch >= 4, FP16 / E4M3 / E5M2 KV;
#   * prefill useful causal TFLOP/s of the tensor-core prefill kernel and of the admitted provider
#     beside torch SDPA (same shapes), with the error against SDPA;
#   * V100 PROJECTED figures (v100.md's method), labelled as projections.
#
#   bash tools/gpu/attention_check.sh            # from the repo root; results under $OUT (or /tmp/...)
#   TESTS=0 bash tools/gpu/attention_check.sh    # without the GPU tests (the tables alone)
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
  # NVRTC 12.9 (89 MB) only matters for sm_70 routes; on sm_80+ torch's NVRTC 13 builds the kernels
  unpack nvidia_cuda_nvrtc_cu12-12.9.86 && unpack nvidia_cuda_runtime_cu12-12.9 || echo "NVRTC 12.9 not carried"
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
$PY -m onecat.kernels sources --source attention_decode.cu --source attention_prefill.cu --source attention_cache.cu 2>&1 | tee "$OUT/sources.txt"

echo "== admission on this GPU"
$PY -m onecat.kernels explain --device cuda --all-cases --check-available --op paged_attention --op reshape_and_cache 2>&1 | tee "$OUT/explain.txt"

echo "== GPU tests (attention + generic provider tests of paged_attention / reshape_and_cache)"
if [ "${TESTS:-1}" = 0 ]; then  # TESTS=0: the benchmark alone (exit code 0 then says nothing of the kernels)
  echo "skipped (TESTS=0)" | tee "$OUT/attention-tests.txt"; rc=0
else
  $PY -m pytest -q -p no:cacheprovider tests/kernels/test_attention_gpu.py tests/kernels/test_attention_fp8.py \
    "tests/kernels/test_gpu_kernels.py::test_kernel_vs_reference" -rs --maxfail=10 --junitxml "$OUT/attention-tests.xml" \
    2>&1 | tee "$OUT/attention-tests.txt"
  rc=${PIPESTATUS[0]}
fi

echo "== the tensor pipe's peak for the kernels' instruction (wmma m16n16k16 f16 -> f32): the prefill's fraction f"
$PY tools/gpu/wmma_peak.py --json "$OUT/wmma-peak.json" 2>&1 | tee "$OUT/wmma-peak.txt"

echo "== benchmark (table last)"
$PY - "$OUT/attention-bench.json" "$OUT/wmma-peak.json" <<'PYEOF' 2>&1 | tee "$OUT/attention-bench.txt"
import json, os, statistics, sys
import torch
from onecat.kernels import attention_ops, ops
from onecat.kernels.bench import copy_bandwidth, time_sets

sys.path.insert(0, "tools/gpu")
from decode_attention_row import decode_row  # the decode rows (also variants_ab.sh's)
from prefill_row import prefill_case  # the prefill rows (also prefill_volta_ab.py's)

V100_TC_TFLOPS, V100_TC_FRACTION = 125.0, 0.75  # v100.md
# the same instruction's peak here: prefill's tensor-pipe fraction f = its TFLOP/s / this
WMMA_PEAK = json.load(open(sys.argv[2]))["wmma_tflops"] if os.path.exists(sys.argv[2]) else None
torch.manual_seed(0)
dev = "cuda"
props = torch.cuda.get_device_properties(0)
copy0 = copy_bandwidth()
print(f"device copy (read + write): {copy0:.0f} GB/s")
rows = []

# Each decode row twice: the route here (what the table reports), and the kernel a V100 runs
# (attention_ops.paged_attention: attention_decode.cu, cuda_split_kv) forced, whose efficiency here is
# what the V100 projection carries (v100.md: the same kernel's measured efficiency; the register-direct
# kernel the H200 routes has no sm_70 form).
decode_shapes = [(kv, batch, ctx, 32, 8, 128, 16) for kv in ("f16", "e4m3") for batch in (4, 16)
                 for ctx in (8192, 16384, 32768)]
decode_shapes += [(kv, 8, 16384, 32, 4, 256, 16) for kv in ("f16", "e4m3", "e5m2")]
decode_shapes += [("f16", 4, 16384, 32, 8, 128, 2048)]
volta = []
for kv, batch, ctx, hq, hk, d, bs in decode_shapes:
    rows.append(decode_row(kv, batch, ctx, hq, hk, d, bs=bs))
    volta.append(decode_row(kv, batch, ctx, hq, hk, d, bs=bs, attend=attention_ops.paged_attention))
    print(rows[-1], "| V100's kernel here:", volta[-1]["us"], "us")
copy1 = copy_bandwidth()
copy = (copy0 + copy1) / 2
for r, v in zip(rows, volta):
    r["pct_copy"] = 100 * r["gbs"] / copy
    r["v100_kernel"], r["v100_kernel_us"] = "cuda_split_kv", v["us"]
    r["v100_kernel_pct_copy"] = 100 * v["gbs"] / copy
    r["v100_projected_us"] /= min(1.0, r["v100_kernel_pct_copy"] / 100)  # V100 read ceiling x that efficiency

for batch, s, hq, hk, d in [(1, 2048, 32, 8, 128), (1, 8192, 32, 8, 128), (4, 4096, 32, 8, 128),
                            (1, 4096, 16, 8, 256), (1, 4096, 32, 8, 64)]:
    bs = 16
    c = prefill_case(batch, s, hq, hk, d, bs=bs)  # FP16, no window: held to SDPA
    flops, args = c.flops, c.args
    sel = ops.registry.select(ops.problem("paged_attention", *args)).provider.name
    t_adm = time_sets(lambda i: ops.paged_attention(*args), 1, 10)
    t_fa = time_sets(lambda i: attention_ops.flash_prefill(*args), 1, 10)
    sd = c.sdpa_fn()
    t_sd = time_sets(lambda i: sd(), 1, 10)
    want = c.tokens(sd()).float()
    got = attention_ops.flash_prefill(*args).float()
    err = float((got - want).norm() / want.norm())
    fa, adm, sdpa = (statistics.median(x) * 1e-6 for x in (t_fa, t_adm, t_sd))
    rows.append(dict(kind="prefill", kv="f16", batch=batch, ctx=s, heads=f"{hq}/{hk}", d=d, block_size=bs,
                     provider="cuda_flash_prefill", us=fa * 1e6, us_min=min(t_fa), us_max=max(t_fa),
                     tflops=flops / fa / 1e12, admitted=sel, admitted_tflops=flops / adm / 1e12,
                     sdpa_us=sdpa * 1e6, sdpa_tflops=flops / sdpa / 1e12, rel_err_vs_sdpa=err,
                     v100_projected_tflops=V100_TC_TFLOPS * V100_TC_FRACTION))
    if WMMA_PEAK:  # the kernel's measured fraction of the tensor pipe, carried to Volta's
        rows[-1]["tc_fraction"] = min(V100_TC_FRACTION, flops / fa / 1e12 / WMMA_PEAK)
        rows[-1]["v100_projected_tflops"] = V100_TC_TFLOPS * rows[-1]["tc_fraction"]
    print(rows[-1])
    del c, args, sd, want, got
    torch.cuda.empty_cache()

meta = dict(device=f"{props.name} (sm_{props.major}{props.minor}, {props.multi_processor_count} SMs)",
            torch=torch.__version__, copy_gbs_before=copy0, copy_gbs_after=copy1, copy_gbs=copy,
            timing="device time per call (CUDA events enqueued behind torch.cuda._sleep), median of repeats; "
                   "decode rotates over KV sets > 200 MB",
            wmma_peak_tflops=WMMA_PEAK,
            v100_method="PROJECTED: decode = KV bytes / (879 GB/s x min(1, the fraction of copy here of the kernel "
                        "a V100 runs, cuda_split_kv, forced)); prefill = "
                        + ("125 TFLOP/s x f, f = the kernel's useful TFLOP/s here / this GPU's measured peak for the "
                           f"same wmma m16n16k16 instruction ({WMMA_PEAK:.0f} TFLOP/s, tools/gpu/wmma_peak.py), at most "
                           "0.75 (cuBLAS's fraction); sm_70 SASS: HMMA.884, no spills, 2 blocks/SM fit"
                           if WMMA_PEAK else
                           "useful FLOPs / (125 TFLOP/s x 0.75) is only the tensor-pipe ceiling at cuBLAS's fraction, "
                           "not backed by a Volta timing (sm_70 SASS: HMMA.884, no spills, 2 blocks/SM fit)"))
json.dump(dict(meta, rows=rows), open(sys.argv[1], "w"), indent=1)
print()
print(f"{meta['device']}, torch {torch.__version__}; measured ({meta['timing']}); "
      f"copy {copy0:.0f} / {copy1:.0f} GB/s before / after, %copy uses {copy:.0f}")
print("V100 columns are PROJECTED, not measured: " + meta["v100_method"].removeprefix("PROJECTED: "))
print(f"{'kind':7s} {'kv':4s} {'B':>2s} {'ctx':>5s} {'heads':>5s} {'D':>3s} {'bs':>4s} {'provider':18s} {'us':>8s}  result")
for r in rows:
    if r["kind"] == "decode":
        res = (f"{r['gbs']:5.0f} GB/s = {r['pct_copy']:5.1f}% of copy (K1 goal >= 80%); err {r['rel_err']:.1e}; "
               f"V100 PROJECTED {r['v100_projected_us']:7.1f} us (split_kv here {r['v100_kernel_pct_copy']:4.1f}%)")
    else:
        res = (f"{r['tflops']:6.1f} TFLOP/s useful causal; SDPA {r['sdpa_tflops']:6.1f} ({r['tflops'] / r['sdpa_tflops']:.2f}x); "
               f"admitted {r['admitted']} {r['admitted_tflops']:6.1f}; err vs SDPA {r['rel_err_vs_sdpa']:.1e}; "
               + (f"f {r['tc_fraction']:.2f}, V100 PROJECTED {r['v100_projected_tflops']:.0f}" if "tc_fraction" in r
                  else f"V100 PROJECTED ceiling {r['v100_projected_tflops']:.0f}"))
    print(f"{r['kind']:7s} {r['kv']:4s} {r['batch']:2d} {r['ctx']:5d} {r['heads']:>5s} {r['d']:3d} {r['block_size']:4d} "
          f"{r['provider']:18s} {r['us']:8.1f}  {res}")
PYEOF
echo "attention tests exit code: $rc$([ "${TESTS:-1}" = 0 ] && echo ' (tests skipped: TESTS=0)')"
exit "$rc"
