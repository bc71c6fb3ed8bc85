"""Project a route's decode speed on a V100-SXM2, kernel by kernel (always labelled "projected").

    onecat-bench project --shape llama3-8b --weights Q4_0 --context 512 \
        --h200 benchmarks/results/h200-2026-11-29/bench.json

Method (shared/v100.md): each kernel of one decode step takes
    max(bytes / (879 GB/s x e), tensor FLOPs / (125 TFLOP/s x f), floor)
counting only the bytes the kernel must move (weights once per step, activations, the KV it
reads). e is the kernel's memory efficiency: the same kernel's measured fraction of copy
bandwidth on the H200 (the matching row of a `python -m onecat.kernels.bench --json` file, nearest
shape when there is no exact one), or a stated default when no row matches. A row that moves
less than 2 MB measures latency, not bandwidth: its kernel gets the default e and a floor of that
row's H200 time scaled by the clock ratio. One step = the sum of its kernels (CUDA-graph replay assumed: no host gaps); tok/s =
batch / step time. Every assumption is printed with the result.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from dataclasses import asdict, dataclass, field

from onecat.models.standard_shapes import standard_shape

from .contract import PROJECTED, Metric, ModelInfo, Record, Runtime, Sampling, Workload

V100_READ_GBPS = 879.0  # measured read bandwidth, V100-SXM2 (v100-skinny; shared/v100.md)
V100_TENSOR_TFLOPS = 125.0  # FP16 tensor peak, dense
V100_BOOST_MHZ, H200_BOOST_MHZ = 1530.0, 1980.0
DEFAULT_EFF = 0.75  # memory efficiency when no H200 row matches
DEFAULT_TENSOR_FRAC = 0.75  # what cuBLAS reaches on V100 (97.4 of 125 TFLOP/s)
DEFAULT_FLOOR_US = 3.0  # a tiny kernel inside a CUDA graph on V100
LATENCY_BYTES = 2e6  # an H200 row moving less than this measures latency (0.5 us of transfer at 4 TB/s)


@dataclass(frozen=True)
class Shape:
    name: str
    arch: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool = False
    embd_format: str | None = None  # the format of a tied embedding / lm_head
    qk_norm: bool = False


    @classmethod
    def of(cls, spec, **extra) -> "Shape":
        """The projection's view of a ModelSpec (onecat.models.standard_shapes)."""
        return cls(spec.name, spec.architecture, spec.num_layers, spec.hidden_size, spec.intermediate_size,
                   spec.num_heads, spec.num_kv_heads, spec.head_dim, spec.vocab_size, spec.tie_word_embeddings, **extra)


SHAPES = {  # shared/models.md
    "smollm2-135m": Shape.of(standard_shape("smollm2-135m"), embd_format="Q8_0"),
    "llama3-8b": Shape.of(standard_shape("llama3-8b")),
    "qwen3-8b": Shape.of(standard_shape("qwen3-8b"), qk_norm=True),
}

# bits per weight, scales included
FORMATS = {
    "FP16": 16.0, "BF16": 16.0, "FP8": 8.0, "Q8_0": 8.5, "Q6_K": 6.5625, "Q5_0": 5.5, "Q5_1": 6.0, "Q4_1": 5.0,
    "Q4_0": 4.5, "Q4_K": 4.5, "Q4_K_M": 4.85, "AWQ-G128": 4.0 + 20 / 128, "NVFP4": 4.5,
}
FORMAT_NOTES = {
    "Q4_0": "32 x 4-bit + fp16 scale per block = 4.5 bits/weight",
    "Q4_1": "32 x 4-bit + fp16 scale and min = 5.0 bits/weight",
    "Q8_0": "32 x int8 + fp16 scale = 8.5 bits/weight",
    "Q4_K_M": "mixed Q4_K (4.5) with some tensors in Q6_K (6.56): ~4.85 bits/weight on average",
    "AWQ-G128": "int4 + fp16 scale and 4-bit zero per 128 = 4.16 bits/weight",
    "NVFP4": "E2M1 + FP8 scale per 16 = 4.5 bits/weight (global scale ignored)",
    "FP16": "16 bits/weight",
}
H200_LINEAR_KERNEL = {"FP16": "linear dense", "BF16": "linear dense", "Q4_0": "linear q4_0", "Q8_0": "linear q8_0"}


@dataclass
class Kernel:
    name: str  # the H200 bench's kernel name where one exists
    shape: dict  # e.g. {"M": 1, "N": 4096, "K": 4096}
    count: int  # launches per decode step
    bytes: float  # per launch
    flops: float = 0.0  # tensor-core FLOPs per launch
    what: str = ""


@dataclass
class KernelProjection:
    kernel: str
    what: str
    shape: str
    count: int
    bytes: float
    flops: float
    eff: float
    eff_source: str
    floor_us: float
    us_each: float
    us_total: float
    bound: str


@dataclass
class Projection:
    shape: Shape
    weights: str
    lm_head: str
    batch: int
    context: int
    kv_bytes: int
    kernels: list[KernelProjection]
    step_us: float
    tok_s: float
    weight_bytes: float
    ideal_tok_s: float
    assumptions: list[str] = field(default_factory=list)

    @property
    def measured_eff_share(self) -> float:
        """The fraction of the step's bytes whose efficiency came from a measured H200 row."""
        total = sum(r.bytes * r.count for r in self.kernels) or 1.0
        return sum(r.bytes * r.count for r in self.kernels if r.eff_source.startswith("H200")) / total


def shape_str(d: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in d.items())


def decode_kernels(s: Shape, weights: str, lm_head: str, batch: int, context: int, kv_bytes: int = 2,
                   act_bytes: int = 2) -> list[Kernel]:
    """The kernels of one batch-`batch` decode step at `context` tokens (llama-style block)."""
    bpw, lm_bpw = FORMATS[weights] / 8, FORMATS[lm_head] / 8
    B, H, a = batch, s.hidden, act_bytes
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    L = s.layers
    lin = H200_LINEAR_KERNEL.get(weights, f"linear {weights.lower()}")

    def linear(n: int, k: int, what: str, fmt_b: float = bpw, name: str = lin) -> Kernel:
        return Kernel(name, {"M": B, "N": n, "K": k}, L, n * k * fmt_b + B * (n + k) * a, 2.0 * B * n * k, what)

    ks = [
        Kernel("embedding", {"T": B, "H": H}, 1, B * H * (lm_bpw if s.tied else bpw) + B * H * a, 0, "token embedding rows"),
        Kernel("rms_norm +res", {"T": B, "H": H}, 2 * L, B * H * a * 4 + H * a, 0, "input / post-attention norm (+residual)"),
        linear(q + 2 * kv, H, "qkv projection"),
        Kernel("rotary_and_cache", {"T": B, "Hq": s.heads, "Hk": s.kv_heads, "D": s.head_dim}, L,
               B * (2 * q * a + 2 * kv * (a + kv_bytes)), 0, "rotary on q and k, k and v into the paged cache"),
        Kernel("paged_attention", {"B": B, "ctx": context, "Hq": s.heads, "Hk": s.kv_heads, "D": s.head_dim}, L,
               B * (2 * context * kv * kv_bytes + 2 * q * a), B * 4.0 * context * q, "decode attention over the cache"),
        linear(H, q, "o projection"),
        linear(2 * s.ffn, H, "gate+up projection"),
        Kernel("silu_and_mul", {"T": B, "d": s.ffn}, L, B * 3 * s.ffn * a, 0, "SiLU(gate) * up"),
        linear(H, s.ffn, "down projection"),
        Kernel("rms_norm", {"T": B, "H": H}, 1, B * H * a * 2 + H * a, 0, "final norm"),
        Kernel(H200_LINEAR_KERNEL.get(lm_head, f"linear {lm_head.lower()}"), {"M": B, "N": s.vocab, "K": H}, 1,
               s.vocab * H * lm_bpw + B * (s.vocab + H) * a, 2.0 * B * s.vocab * H, "lm_head"),
        Kernel("argmax", {"B": B, "V": s.vocab}, 1, B * s.vocab * a, 0, "greedy sampling"),
    ]
    if s.qk_norm:
        ks.insert(4, Kernel("rms_norm", {"T": B * (s.heads + s.kv_heads), "H": s.head_dim}, L,
                            B * (q + kv) * a * 2 + s.head_dim * a, 0, "q/k head norms"))
    return ks


# -- H200 measured efficiencies ---------------------------------------------------------------------
def _parse_shape(s: str) -> dict:
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", s)}


class H200Table:
    """Rows of a kernels bench JSON: {"device", "copy_gbps", "rows": [{kernel, shape, median_us, frac_copy}]}."""

    def __init__(self, path: str):
        with open(path) as f:
            d = json.load(f)
        self.path, self.device, self.copy_gbps = path, d.get("device", "?"), d.get("copy_gbps")
        self.rows = [dict(r, dims=_parse_shape(r["shape"])) for r in d["rows"]]

    def match(self, k: Kernel) -> tuple[dict | None, str]:
        rows = [r for r in self.rows if r["kernel"] == k.name]
        if not rows:
            return None, "no H200 row for this kernel"
        # the batch dimension must match (M for GEMV, T/B otherwise)
        for dim in ("M", "T", "B"):
            if dim in k.shape:
                rows = [r for r in rows if r["dims"].get(dim) == k.shape[dim]]
                break
        if not rows:
            return None, "no H200 row at this batch size"
        exact = [r for r in rows if r["dims"] == k.shape]
        if exact:
            return exact[0], "exact shape"
        same_k = [r for r in rows if "K" in k.shape and r["dims"].get("K") == k.shape["K"]] or rows

        def dist(r: dict) -> float:
            return sum(abs(math.log(max(r["dims"].get(d, v), 1) / max(v, 1))) for d, v in k.shape.items())

        best = min(same_k, key=dist)
        return best, "nearest shape"

    @staticmethod
    def close(row: dict, k: Kernel, factor: float = 4.0) -> bool:
        """Every dimension within `factor` of the kernel's (a nearest row further off says little)."""
        return all(abs(math.log(max(row["dims"].get(d, v), 1) / max(v, 1))) <= math.log(factor)
                   for d, v in k.shape.items())


def _efficiency(k: Kernel, h200: H200Table | None, default_eff: float, floor_us: float, latency_bytes: float,
                clock: float) -> tuple[float, str, float]:
    """(memory efficiency, where it came from, floor in us) for one kernel."""
    src = f"default {default_eff:.2f}"
    if h200 is None:
        return default_eff, src, floor_us
    row, how = h200.match(k)
    if row is None:
        return default_eff, f"{src} ({how})", floor_us
    name = f"'{row['kernel']} {row['shape']}'"
    row_bytes = row["gbps"] * row["median_us"] * 1e3
    if row_bytes < latency_bytes:  # the row measures latency, not bandwidth
        if k.bytes >= latency_bytes:
            return default_eff, f"{src} (H200 row {name} measures latency only)", floor_us
        floor = max(floor_us, row["median_us"] * clock)
        return default_eff, f"{src}; H200 row {name} ({how}) is latency-bound ({row['median_us']:.1f} us): " \
                            f"floor {floor:.1f} us", floor
    if how == "nearest shape" and not h200.close(row, k):
        return default_eff, f"{src} (nearest H200 row {name} is > 4x off in shape)", floor_us
    src = f"H200 {name} ({how}): {row['frac_copy']:.3f} of copy" + (", capped at 1.0" if row["frac_copy"] > 1 else "")
    return min(row["frac_copy"], 1.0), src, floor_us


def project(shape: Shape, weights: str, batch: int = 1, context: int = 512, lm_head: str | None = None,
            kv_bytes: int = 2, h200: H200Table | None = None, default_eff: float = DEFAULT_EFF,
            tensor_frac: float = DEFAULT_TENSOR_FRAC, floor_us: float = DEFAULT_FLOOR_US,
            bw_gbps: float = V100_READ_GBPS, tflops: float = V100_TENSOR_TFLOPS,
            latency_bytes: float = LATENCY_BYTES) -> Projection:
    if weights not in FORMATS:
        raise ValueError(f"unknown weight format {weights!r} (known: {', '.join(FORMATS)})")
    lm_head = lm_head or (shape.embd_format if shape.tied and shape.embd_format else weights)
    clock = H200_BOOST_MHZ / V100_BOOST_MHZ
    rows = []
    for k in decode_kernels(shape, weights, lm_head, batch, context, kv_bytes):
        eff, src, floor = _efficiency(k, h200, default_eff, floor_us, latency_bytes, clock)
        t_mem = k.bytes / (bw_gbps * 1e9 * eff) * 1e6
        t_flop = k.flops / (tflops * 1e12 * tensor_frac) * 1e6
        each = max(t_mem, t_flop, floor)
        bound = "memory" if each == t_mem else ("tensor" if each == t_flop else "floor")
        rows.append(KernelProjection(k.name, k.what, shape_str(k.shape), k.count, k.bytes, k.flops, eff, src, floor,
                                     each, each * k.count, bound))
    step = sum(r.us_total for r in rows)
    weight_bytes = sum(r.bytes * r.count for r in rows if r.kernel.startswith("linear"))
    all_bytes = sum(r.bytes * r.count for r in rows)
    ideal = batch / (all_bytes / (bw_gbps * 1e9))
    p = Projection(shape, weights, lm_head, batch, context, kv_bytes, rows, step, batch / (step * 1e-6),
                   weight_bytes, ideal)
    p.assumptions = [
        "PROJECTED, not measured: no V100 was used.",
        f"target: V100-SXM2, {bw_gbps:g} GB/s measured read bandwidth, {tflops:g} TFLOP/s FP16 tensor peak "
        f"x tensor-pipe fraction f = {tensor_frac:g}",
        "kernel time = max(bytes / (bandwidth x e), tensor FLOPs / (peak x f), floor); step = sum of kernels "
        "(CUDA-graph replay assumed: no host gaps, no launch overhead beyond the floor)",
        f"model shape {shape.name}: {shape.layers} layers, hidden {shape.hidden}, ffn {shape.ffn}, heads "
        f"{shape.heads}/{shape.kv_heads}, head dim {shape.head_dim}, vocab {shape.vocab}"
        + (", tied embedding" if shape.tied else ""),
        f"weights {weights}: {FORMAT_NOTES.get(weights, f'{FORMATS[weights]} bits/weight')}; lm_head {lm_head} "
        f"({FORMATS[lm_head]} bits/weight); weights are read once per step whatever the batch",
        f"batch {batch}, context {context} tokens, KV cache {8 * kv_bytes}-bit, activations fp16; "
        "qkv and gate+up run fused as one GEMV each",
        f"memory efficiency e: {'per kernel from ' + h200.path + ' (' + h200.device + ')' if h200 else 'no H200 file given'}; "
        f"default e = {default_eff:g} where no row matches",
        "an H200 efficiency is a fraction of that machine's copy bandwidth (read + write), applied to V100's "
        "read bandwidth: it assumes the kernel keeps the same fraction of the memory system busy on Volta",
        f"launch/latency floor per kernel: {floor_us:g} us (default); H200 rows moving < {latency_bytes / 1e6:g} MB "
        f"measure latency: their kernels are floored at the H200 time x {clock:.2f} "
        f"(boost clocks {H200_BOOST_MHZ:g} / {V100_BOOST_MHZ:g} MHz)",
        f"ideal (all bytes at {bw_gbps:g} GB/s, no floors): {ideal:.1f} tok/s",
    ]
    return p


def projection_table(p: Projection) -> str:
    lines = [f"PROJECTED V100-SXM2 decode: {p.shape.name} {p.weights} (lm_head {p.lm_head}), batch {p.batch}, "
             f"context {p.context}",
             f"{'kernel':20} {'what':32} {'shape':34} {'n':>4} {'MB each':>9} {'e':>6} {'us each':>9} "
             f"{'us/step':>9} {'share':>6} bound",
             "-" * 150]
    for r in p.kernels:
        lines.append(f"{r.kernel:20} {r.what[:32]:32} {r.shape[:34]:34} {r.count:4d} {r.bytes / 1e6:9.3f} "
                     f"{r.eff:6.3f} {r.us_each:9.2f} {r.us_total:9.1f} {r.us_total / p.step_us:6.1%} {r.bound}")
    lines.append("-" * 150)
    lines.append(f"PROJECTED step {p.step_us:.1f} us -> {p.tok_s:.1f} tok/s (batch {p.batch}); weights "
                 f"{p.weight_bytes / 1e9:.3f} GB/step -> {p.weight_bytes * p.tok_s / p.batch / 1e9:.0f} GB/s of weights "
                 f"({p.weight_bytes * p.tok_s / p.batch / 1e9 / V100_READ_GBPS:.0%} of {V100_READ_GBPS:g})")
    lines.append(f"efficiency measured on the H200 for {p.measured_eff_share:.0%} of the bytes; the rest at the default")
    lines.append("efficiency sources:")
    for r in p.kernels:
        lines.append(f"  {r.kernel:20} {r.shape[:34]:34} {r.eff_source}")
    lines.append("assumptions:")
    lines += [f"  - {a}" for a in p.assumptions]
    return "\n".join(lines)


def projection_record(p: Projection) -> Record:
    s = p.shape
    return Record(
        engine="onecat route (projected)", kind=PROJECTED,
        metrics={"decode_tok_s": Metric("tok/s", p.tok_s, p.tok_s, p.tok_s, 1, over="model"),
                 "decode_step_us": Metric("us", p.step_us, p.step_us, p.step_us, 1, over="model")},
        model=ModelInfo(name=s.name, source="shape table (shared/models.md)", arch=s.arch, layers=s.layers,
                        hidden=s.hidden, ffn=s.ffn, heads=s.heads, kv_heads=s.kv_heads, head_dim=s.head_dim,
                        vocab=s.vocab, weight_format=f"{p.weights} (lm_head {p.lm_head})", compute_dtype="float16"),
        workload=Workload(kind="project", input_len=p.context, output_len=None, batch=p.batch, dataset="n/a"),
        runtime=Runtime(device="V100-SXM2 (projected target)", kv_dtype=f"{8 * p.kv_bytes}-bit",
                        graph_mode="cuda-graphs (assumed)", prefix_cache="n/a"),
        sampling=Sampling(temperature=0.0), assumptions=p.assumptions,
        extra={"kernels": [asdict(r) for r in p.kernels], "ideal_tok_s": p.ideal_tok_s,
               "measured_eff_share": p.measured_eff_share,
               "weight_bytes_per_step": p.weight_bytes},
        notes="PROJECTED, not measured")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="onecat-bench project", description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="llama3-8b")
    ap.add_argument("--weights", choices=sorted(FORMATS), default="Q4_0")
    ap.add_argument("--lm-head", choices=sorted(FORMATS), default=None, help="default: the weights' format "
                    "(a tied embedding's own format)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--kv-bits", type=int, choices=[8, 16], default=16)
    ap.add_argument("--h200", default=None, help="kernels bench JSON with measured efficiencies "
                    "(e.g. benchmarks/results/h200-2026-11-29/bench.json)")
    ap.add_argument("--default-eff", type=float, default=DEFAULT_EFF)
    ap.add_argument("--tensor-frac", type=float, default=DEFAULT_TENSOR_FRAC)
    ap.add_argument("--floor-us", type=float, default=DEFAULT_FLOOR_US)
    ap.add_argument("--out", default=None)
    ap.add_argument("--report", default=None)
    a = ap.parse_args(argv)
    p = project(SHAPES[a.shape], a.weights, a.batch, a.context, a.lm_head, a.kv_bits // 8,
                H200Table(a.h200) if a.h200 else None, a.default_eff, a.tensor_frac, a.floor_us)
    print(projection_table(p))
    from .report import emit

    emit([projection_record(p)], a.out, a.report, None)


if __name__ == "__main__":
    main()
