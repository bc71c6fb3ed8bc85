"""s38: tools/ncu/target.py's in-process A/B with pseudo --ab-disable entries `pf:POS:MB:MODE`: while a variant's
decode graphs are captured, every layer launches _s38_l2pf.cu's l2_prefetch (copied into csrc as l2_prefetch.cu)
for the first MB megabytes' worth of that layer's gate_up rows (the gate and up halves alike, every plane), in front
of the qkv op (POS qkv) or of attention (POS attn). MODE: l2_prefetch's mode bits (1: issue after the kernel in
front completes; 2: per-line evict_last instead of bulk). Outputs are unchanged (prefetch only). From the repo root:

    python benchmarks/results/h100-2026-12-05-s38/scripts/_s38_l2pf.py --model M.gguf --ab-disable "pf:attn:16:0;..."
"""
import pathlib
import shutil
import sys

sys.path.insert(0, "tools/ncu")
import target  # noqa: E402

from onecat.kernels import build, cuda_ops, ops  # noqa: E402
from onecat.kernels.driver import Kernel  # noqa: E402
from onecat.models import llama  # noqa: E402

shutil.copy(pathlib.Path(__file__).with_name("_s38_l2pf.cu"), pathlib.Path(build.__file__).parent / "csrc" / "l2_prefetch.cu")
KERNEL = Kernel("l2_prefetch.cu", "l2_prefetch", "pqpqpqpqqi", pdl=True)
STATE = {"pf": None, "model": None, "n": 0}
_configure, _forward = ops.registry.configure, llama.LlamaForCausalLM.forward
_attn, _qkv0, _qkv1 = ops.paged_attention, ops.rms_norm_qkv_rotary_cache, ops.linear_rms_norm_qkv_rotary_cache


def prefetch():
    pos_mb_mode = STATE["pf"]
    model = STATE["model"]
    layer = model.layers[STATE["n"] % len(model.layers)]
    w = layer.gate_up
    mb, mode = pos_mb_mode[1], pos_mb_mode[2]
    n = w.shape[0]
    frac = min(1.0, mb * 2**20 / w.nbytes)
    rows = int(n // 2 * frac)
    ranges = []
    for plane in w.planes:
        row_bytes = plane.numel() * plane.element_size() // n
        ranges += [(plane.data_ptr(), rows * row_bytes), (plane.data_ptr() + n // 2 * row_bytes, rows * row_bytes)]
    ranges = (ranges + [(0, 0)] * 4)[:4] if len(ranges) <= 4 else ranges
    for i in range(0, len(ranges), 4):
        part = (ranges[i:i + 4] + [(0, 0)] * 4)[:4]
        args = [v for r in part for v in r]
        cuda_ops._launch(KERNEL, (132, 1, 1), (128, 1, 1), *args, 65536, mode, device=w.q.device)


def attn(*a, **kw):
    if STATE["pf"] and STATE["pf"][0] == "attn":
        prefetch()
    STATE["n"] += 1
    return _attn(*a, **kw)


def qkv(fn):
    def run(*a, **kw):
        if STATE["pf"] and STATE["pf"][0] == "qkv":
            prefetch()
        return fn(*a, **kw)
    return run


def forward(self, *a, **kw):
    STATE["model"], STATE["n"] = self, 0
    return _forward(self, *a, **kw)


def configure(*args, disabled=None, **kw):
    names = list(disabled or ())
    pf = [n.split(":") for n in names if n.startswith("pf:")]
    STATE["pf"] = (pf[0][1], float(pf[0][2]), int(pf[0][3])) if pf else None
    return _configure(*args, disabled=[n for n in names if not n.startswith("pf:")], **kw)


ops.registry.configure = configure
ops.paged_attention = attn
ops.rms_norm_qkv_rotary_cache, ops.linear_rms_norm_qkv_rotary_cache = qkv(_qkv0), qkv(_qkv1)
llama.LlamaForCausalLM.forward = forward
target.SAME_ROUTE_OK = True  # pf: adds launches, changes no selection
sys.exit(target.main())
