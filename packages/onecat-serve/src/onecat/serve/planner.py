"""The memory planner: what one rank of a route holds, from the model's shape, its formats and the
hardware target, without loading weights and without a GPU.

    onecat-serve +profile=qwen38_27b hardware=v100-sxm2-16gb plan=true

Per rank: weight bytes by format (bits per weight incl. scales, from onecat.quant's format table:
Q4_0 4.5, Q4_K 4.5, Q6_K 6.5625, Q8_0 8.5, NVFP4 4.5 + a float32 global scale per tensor, AWQ g128
4.156, FP16 16); for a GGUF checkpoint at hand, its real tensor sizes. KV bytes per token by layer
type and GDN state per sequence; activation/workspace and CUDA-graph estimates (formulas printed
with the plan); then the largest context x sequences that fit, or by how much the route does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .config_store import DTYPE_BYTES, KV_DTYPES, QuantConfig, Route
from .model_shape import GIB, GGUFHeader, ModelShape

MIB = 2**20
FLOAT_FORMATS = {"float16": 16.0, "bfloat16": 16.0, "float32": 32.0, "F16": 16.0, "BF16": 16.0, "F32": 32.0}
DECODE_PARTITION = 512  # tokens per split-KV decode partition (workspace estimate)
GRAPH_OVERHEAD = 2 * MIB  # per captured CUDA graph, beyond the shared memory pool (assumed)


# -- formats ----------------------------------------------------------------------------------------
def canonical_format(name: str) -> str:
    if name in ("float16", "float32", "bfloat16"):
        return name
    from onecat.quant import get_format

    return get_format(name).name


def bits_per_weight(fmt: str) -> float:
    if fmt in FLOAT_FORMATS:
        return FLOAT_FORMATS[fmt]
    from onecat.quant import get_format

    return get_format(fmt).bits_per_weight


def tensor_extra_bytes(fmt: str) -> int:
    """Per-tensor bytes beyond bits/weight: NVFP4's float32 global scale (weight_scale_2)."""
    return 4 if fmt == "nvfp4" else 0


def block_size(fmt: str) -> int:
    if fmt in FLOAT_FORMATS:
        return 1
    from onecat.quant import get_format

    b = get_format(fmt).block_size
    return b if b and b <= 256 else 1


def resolve_formats(q: QuantConfig, compute: str, gguf: GGUFHeader | None) -> tuple[dict[str, str], list[str], list[str]]:
    problems, notes, out = [], [], {}
    real: dict[str, str] = {}
    if gguf is not None:
        linear = [t.ggml_type for n, t in gguf.tensors.items() if n.startswith("blk.") and len(t.shape) == 2]
        real["weights"] = max(set(linear), key=linear.count) if linear else "F32"
        real["embedding"] = gguf.tensors["token_embd.weight"].ggml_type if "token_embd.weight" in gguf.tensors else "F32"
        real["lm_head"] = gguf.tensors["output.weight"].ggml_type if "output.weight" in gguf.tensors else real["embedding"]
        real["unquantized"] = "F32"
    for key in ("weights", "more_bits", "embedding", "lm_head", "unquantized"):
        want = getattr(q, key)
        if key in real:
            if want not in (None, "auto") and _same(want, real[key]) is False:
                notes.append(f"quant.{key}={want} is the estimate for when the file is not at hand; the checkpoint "
                             f"holds {real[key]} (its real tensor sizes are used)")
            out[key] = real[key]
            continue
        if want is None:
            continue
        if want == "auto":
            if key == "unquantized":
                out[key] = "F32" if q.name.startswith("gguf") or q.name.startswith("q") else compute
            elif key in ("embedding", "lm_head") and "weights" in out and out["weights"] in FLOAT_FORMATS:
                out[key] = out["weights"]
            elif key in ("embedding", "lm_head"):
                out[key] = compute
            else:
                out[key] = compute
                notes.append(f"quant.{key}=auto with no GGUF checkpoint to read it from: planned as {compute} "
                             f"(name a format, e.g. quant=q4_0, quant=nvfp4, quant=fp16)")
            continue
        try:
            out[key] = canonical_format(want)
        except ValueError as e:
            problems.append(f"quant.{key}: {e}")
    if gguf is not None and q.more_bits:
        out.pop("more_bits", None)  # a real file says which tensors have more bits
    return out, problems, notes


def _same(a: str, b: str) -> bool | None:
    try:
        return canonical_format(a) == canonical_format(b)
    except ValueError:
        return None


def use_more_bits(i: int, n: int) -> bool:
    """llama.cpp's rule for the *_M mixes: the first and last eighth of the layers, and every third between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


# -- weights ----------------------------------------------------------------------------------------
@dataclass
class WeightRow:
    group: str  # embedding | lm_head | attention | mlp | moe | linear_attention | norms | mtp | draft
    fmt: str
    sharding: str
    tensors: int = 0
    numel: int = 0  # per rank
    bytes: int = 0  # per rank


def _row_bytes(numel: int, fmt: str) -> int:
    return int(numel * bits_per_weight(fmt) / 8) + tensor_extra_bytes(fmt)


def _layer_linears(shape: ModelShape, i: int, tp: int):
    """(group, name, rows N, cols K, parallel) of layer i's tensors; parallel: col | row | rep | kv."""
    H, D, t = shape.hidden_size, shape.head_dim, shape.layer_types[i]
    out = []
    if t in ("attention", "sliding_attention"):
        q = shape.num_heads * D * (2 if shape.attn_output_gate else 1)
        out += [("attention", "q_proj", q, H, "col"), ("attention", "k_proj", shape.num_kv_heads * D, H, "kv"),
                ("attention", "v_proj", shape.num_kv_heads * D, H, "kv"),
                ("attention", "o_proj", H, shape.num_heads * D, "row")]
        if shape.qk_norm:
            out += [("norms", "q_norm", D, 1, "rep"), ("norms", "k_norm", D, 1, "rep")]
    else:
        kd, vd = shape.gdn_key_heads * shape.gdn_key_dim, shape.gdn_value_heads * shape.gdn_value_dim
        out += [("linear_attention", "in_proj_qkvz", 2 * kd + 2 * vd, H, "col"),
                ("linear_attention", "in_proj_ba", 2 * shape.gdn_value_heads, H, "col"),
                ("linear_attention", "out_proj", H, vd, "row"),
                ("linear_attention:unq", "conv1d", shape.gdn_conv_channels, shape.conv_kernel, "col"),
                ("linear_attention:unq", "A_log+dt_bias", 2 * shape.gdn_value_heads, 1, "col"),
                ("norms", "gdn_norm", shape.gdn_value_dim, 1, "rep")]
    if shape.num_experts:
        E, Im = shape.num_experts, shape.moe_intermediate_size
        out += [("moe:unq", "router", E, H, "rep"),
                ("moe", "experts.gate_up", E * 2 * Im, H, "col"), ("moe", "experts.down", E * H, Im, "row")]
        if shape.shared_expert_intermediate_size:
            Is = shape.shared_expert_intermediate_size
            out += [("moe", "shared.gate_up", 2 * Is, H, "col"), ("moe", "shared.down", H, Is, "row"),
                    ("moe:unq", "shared_gate", 1, H, "rep")]
    else:
        I = shape.intermediate_size
        out += [("mlp", "gate_up", 2 * I, H, "col"), ("mlp", "down", H, I, "row")]
    out += [("norms", "layer_norms", H * shape.norms_per_layer, 1, "rep")]
    return out


def _rank_numel(rows: int, cols: int, par: str, tp: int, shape: ModelShape) -> tuple[int, str]:
    if tp == 1 or par == "rep":
        return rows * cols, "replicated" if par == "rep" else "whole"
    if par == "kv":
        if shape.num_kv_heads >= tp:
            return rows * cols // tp, f"column /{tp}"
        return shape.head_dim * cols, f"KV heads replicated ({shape.num_kv_heads} < TP{tp}: 1 per rank)"
    if par == "col":
        return rows * cols // tp, f"column /{tp}"
    return rows * cols // tp, f"row /{tp}"


def weight_rows(route: Route) -> list[WeightRow]:
    """Weight bytes per rank, grouped by (group, format, sharding)."""
    shape, tp, f = route.shape, route.tp, route.formats
    resident = route.config.quant.resident == "dequantized"
    rows: dict[tuple[str, str, str], WeightRow] = {}

    def add(group: str, fmt: str, sharding: str, numel: int, nbytes: int | None = None) -> None:
        if resident:
            fmt = route.compute_dtype
            nbytes = None
        r = rows.setdefault((group, fmt, sharding), WeightRow(group, fmt, sharding))
        r.tensors += 1
        r.numel += numel
        r.bytes += nbytes if nbytes is not None else _row_bytes(numel, fmt)

    if route.gguf is not None:  # the file's real tensor sizes
        for t in route.gguf.tensors.values():
            group, par = _gguf_group(t.name)
            rows_, cols = (t.shape[0], t.numel // t.shape[0]) if t.shape else (1, 1)
            if par == "kv" and shape.num_kv_heads < tp:
                numel, sharding = shape.head_dim * cols, f"KV heads replicated ({shape.num_kv_heads} < TP{tp})"
            else:
                numel, sharding = _rank_numel(rows_, cols, "col" if par == "vocab" else par, tp, shape)
                sharding = sharding.replace("column", "vocab") if par == "vocab" else sharding
            add(group, t.ggml_type, sharding, numel, t.n_bytes * numel // max(1, t.numel))
        return sorted(rows.values(), key=_order)

    V, H = shape.vocab_size, shape.hidden_size
    vocab = f"vocab /{tp}" if tp > 1 else "whole"
    add("embedding", f["embedding"], vocab, V * H // tp)
    if not shape.tie_word_embeddings:
        add("lm_head", f["lm_head"], vocab, V * H // tp)
    add("norms", f["unquantized"], "replicated", H)
    layers = list(range(shape.num_layers))
    for i in layers:
        for group, name, n, k, par in _layer_linears(shape, i, tp):
            numel, sharding = _rank_numel(n, k, par, tp, shape)
            if group.endswith(":unq") or group == "norms":
                add(group.split(":")[0], f["unquantized"], sharding, numel)
            elif f.get("more_bits") and name in ("v_proj", "down") and use_more_bits(i, shape.num_layers):
                add(group, f["more_bits"], sharding, numel)
            else:
                add(group, f["weights"], sharding, numel)
    mtp = shape.mtp_layers if route.config.spec.method == "mtp" else 0  # loaded only when it drafts
    for _ in range(mtp):  # one decoder layer (attention kind) + fc + norms, FP16 (assumed)
        attn = next((j for j, t in enumerate(shape.layer_types) if t == "attention"), 0)
        for group, name, n, k, par in _layer_linears(shape, attn, tp):
            numel, sharding = _rank_numel(n, k, par, tp, shape)
            add("mtp", route.compute_dtype, sharding, numel)
        add("mtp", route.compute_dtype, f"column /{tp}" if tp > 1 else "whole", 2 * H * H // tp)
    out = sorted(rows.values(), key=_order)
    if shape.weight_bytes:  # a declared total replaces the computed one (stated in the plan)
        total = sum(r.bytes for r in out)
        for r in out:
            r.bytes = int(r.bytes * shape.weight_bytes / tp / total) if total else 0
    return out


def draft_rows(route: Route) -> list[WeightRow]:
    d = route.draft
    if d is None:
        return []
    fmt, tp = route.config.spec.draft_weights, route.tp
    if d.weight_bytes:
        return [WeightRow("draft", fmt, f"/{tp} (assumed sharded like the target)" if tp > 1 else "whole", 1,
                          int(d.weight_bytes / bits_per_weight(fmt) * 8 / tp), d.weight_bytes // tp)]
    numel = 0
    for i in range(d.num_layers):
        for _, _, n, k, par in _layer_linears(d, i, tp):
            numel += _rank_numel(n, k, par, tp, d)[0]
    return [WeightRow("draft", fmt, f"/{tp}" if tp > 1 else "whole", d.num_layers, numel, _row_bytes(numel, fmt))]


def _gguf_group(name: str) -> tuple[str, str]:
    if name == "token_embd.weight":
        return "embedding", "vocab"
    if name == "output.weight":
        return "lm_head", "vocab"
    if "norm" in name:
        return "norms", "rep"
    if any(k in name for k in ("attn_q.", "attn_output.")):
        return "attention", "col" if "attn_q." in name else "row"
    if any(k in name for k in ("attn_k.", "attn_v.")):
        return "attention", "kv"
    if "ffn_down" in name:
        return "mlp", "row"
    if "ffn_" in name:
        return "mlp", "col"
    return "other", "rep"


_GROUP_ORDER = ["embedding", "lm_head", "attention", "linear_attention", "mlp", "moe", "norms", "mtp", "other", "draft"]


def _order(r: WeightRow):
    return (_GROUP_ORDER.index(r.group) if r.group in _GROUP_ORDER else 99, r.fmt, r.sharding)


def group_problems(shape: ModelShape, formats: dict[str, str], tp: int) -> list[str]:
    """Block formats need the reduction dim of every row-parallel shard to be a whole number of blocks."""
    fmt = formats.get("weights")
    if not fmt or fmt in FLOAT_FORMATS:
        return []
    b = block_size(fmt)
    out = []
    for name, k in (("o_proj", shape.num_heads * shape.head_dim), ("down", shape.intermediate_size),
                    ("experts.down", shape.moe_intermediate_size),
                    ("out_proj", shape.gdn_value_heads * shape.gdn_value_dim), ("hidden", shape.hidden_size * tp)):
        if k and (k // tp) % b:
            out.append(f"quant.weights={fmt}: {name} has K={k // tp} per rank at TP{tp}, not a multiple of its "
                       f"{b}-weight block")
    return out


# -- KV cache and state -----------------------------------------------------------------------------
@dataclass
class KVLine:
    what: str
    formula: str
    per_token: int = 0  # bytes per token per rank
    per_seq: int = 0  # bytes per sequence per rank, independent of length


def kv_lines(route: Route) -> list[KVLine]:
    s, tp, c = route.shape, route.tp, route.config
    kvb = DTYPE_BYTES[route.kv_dtype]
    hk = s.kv_heads_per_rank(tp)
    lines = []
    full, sliding = s.count("attention"), s.count("sliding_attention")
    per_layer = 2 * hk * s.head_dim * kvb
    for n, kind in ((full, "full attention"), (sliding, "sliding-window attention")):
        if n:
            note = ""
            if kind.startswith("sliding"):
                note = (f"; counted at full context: the paged cache keeps every token (a window-aware "
                        f"allocator would cap it at {s.sliding_window} tokens)")
            lines.append(KVLine(f"{kind} KV ({n} layers, {route.kv_dtype})",
                                f"2 (K,V) x {hk} KV head(s)/rank x {s.head_dim} x {kvb} B x {n} layers{note}",
                                per_token=n * per_layer))
    if s.has_linear_attention:
        n = s.count("linear_attention")
        vh, ch = s.gdn_value_heads // tp, s.gdn_conv_channels // tp
        sb, cb = DTYPE_BYTES[c.kv.state_dtype], DTYPE_BYTES[route.compute_dtype]
        rec = vh * s.gdn_key_dim * s.gdn_value_dim * sb
        conv = (s.conv_kernel - 1) * ch * cb
        lines.append(KVLine(f"GDN state ({n} layers, per sequence)",
                            f"({vh} value heads/rank x {s.gdn_key_dim} x {s.gdn_value_dim} x {sb} B recurrent "
                            f"+ {s.conv_kernel - 1} x {ch} conv channels/rank x {cb} B) x {n} layers; one live state "
                            f"per sequence (no prefix-cache snapshots counted)",
                            per_seq=n * (rec + conv)))
    if c.spec.method == "mtp" and s.mtp_layers:
        lines.append(KVLine(f"MTP layer KV ({s.mtp_layers} layer(s), {route.kv_dtype})",
                            f"2 x {hk} x {s.head_dim} x {kvb} B x {s.mtp_layers}", per_token=s.mtp_layers * per_layer))
    if route.draft is not None:
        d = route.draft
        db = DTYPE_BYTES[KV_DTYPES.get(c.spec.draft_kv_dtype, c.spec.draft_kv_dtype)]
        dh = d.kv_heads_per_rank(tp)
        lines.append(KVLine(f"draft KV ({d.num_layers} layers, {c.spec.draft_kv_dtype})",
                            f"2 x {dh} KV head(s)/rank x {d.head_dim} x {db} B x {d.num_layers} layers "
                            f"(the drafter's KV of the target's projected hidden states, full context)",
                            per_token=d.num_layers * 2 * dh * d.head_dim * db))
    return lines


# -- activations and CUDA graphs ----------------------------------------------------------------------
def peak_width(route: Route) -> tuple[int, str]:
    """Elements per token live at the widest point of a layer (per rank), and which layer it is."""
    s, tp = route.shape, route.tp
    cands = {}
    if s.attention_layers:
        q = s.num_heads * s.head_dim * (2 if s.attn_output_gate else 1) // tp
        kv = 2 * s.kv_heads_per_rank(tp) * s.head_dim
        cands["attention (qkv + attn out)"] = q + kv + s.num_heads * s.head_dim // tp
    if s.has_linear_attention:
        kd, vd = s.gdn_key_heads * s.gdn_key_dim, s.gdn_value_heads * s.gdn_value_dim
        cands["GDN (in_proj + conv + core out)"] = (2 * kd + 2 * vd + 2 * s.gdn_value_heads + s.gdn_conv_channels
                                                    + vd) // tp
    if s.num_experts:
        Im = s.moe_intermediate_size // tp
        cands["MoE (top-k x (gate_up + act) + router)"] = s.experts_per_tok * 3 * Im + s.num_experts
    else:
        cands["MLP (gate_up + act)"] = 3 * s.intermediate_size // tp
    name = max(cands, key=cands.get)
    return 2 * s.hidden_size + cands[name], name


def activation_bytes(route: Route, tokens: int) -> int:
    width, _ = peak_width(route)
    b = DTYPE_BYTES[route.compute_dtype]
    extra = tokens * route.shape.hidden_size * 4 if route.shape.fp32_residual and b < 4 else 0
    return tokens * width * b + extra


def capture_sizes(max_seqs: int) -> list[int]:
    sizes = [b for b in (1, 2, 4) if b <= max_seqs] + list(range(8, max_seqs + 1, 8))
    return sizes if max_seqs in sizes else sizes + [max_seqs]


# -- the plan ---------------------------------------------------------------------------------------
@dataclass
class FitRow:
    seqs: int
    max_context: int  # tokens, a whole number of blocks, capped at max_model_len (0: not even one block)


@dataclass
class MemoryPlan:
    route: Route
    weights: list[WeightRow]
    kv: list[KVLine]
    weight_bytes: int
    checkpoint_bytes: int | None  # a GGUF file's own size, when read
    activation_bytes: int
    activation_formula: str
    graph_bytes: int
    graph_formula: str
    reserved_bytes: int
    budget_bytes: int  # what the engine may use per rank
    kv_budget_bytes: int
    kv_per_token: int
    state_per_seq: int
    need_bytes: int  # KV + state for max_num_seqs x max_model_len
    fits: bool
    short_bytes: int  # > 0: by how much it does not fit
    fit_table: list[FitRow]
    max_seqs_at_max_len: int
    host_bytes: int
    notes: list[str] = field(default_factory=list)

    def per_seq(self, ctx: int) -> int:
        bs = self.route.config.kv.block_size
        return -(-ctx // bs) * bs * self.kv_per_token + self.state_per_seq

    def format(self) -> str:
        return format_plan(self)


def plan(route: Route) -> MemoryPlan:
    c, dev, tp = route.config, route.device, route.tp
    weights = weight_rows(route) + draft_rows(route)
    wbytes = sum(r.bytes for r in weights)
    kv = kv_lines(route)
    kv_tok = sum(x.per_token for x in kv)
    state = sum(x.per_seq for x in kv)
    S, T, k = c.scheduler.max_num_seqs, c.scheduler.max_num_batched_tokens, c.spec.k
    b = DTYPE_BYTES[route.compute_dtype]
    width, widest = peak_width(route)
    s = route.shape
    prefill = activation_bytes(route, T)
    rows = S * (1 + k)
    logits = rows * s.vocab_size * 4
    parts = -(-route.max_model_len // DECODE_PARTITION)
    hq = s.num_heads // tp
    decode_ws = S * (1 + k) * hq * parts * (s.head_dim + 2) * 4 if s.attention_layers else 0
    act = prefill + logits + decode_ws
    act_formula = (f"prefill {T} tokens x {width} elements/token ({widest} + 2 x hidden) x {b} B"
                   + (" + the FP32 residual" if s.fp32_residual and b < 4 else "")
                   + f" = {_g(prefill)}; logits {rows} rows x {s.vocab_size} vocab x 4 B (FP32, gathered) = {_g(logits)}; "
                   f"split-KV decode partials {S * (1 + k)} rows x {hq} heads/rank x ceil({route.max_model_len}/"
                   f"{DECODE_PARTITION}) partitions x ({s.head_dim}+2) x 4 B = {_g(decode_ws)}")
    if dev.kind == "cuda":
        sizes = capture_sizes(S)
        graphs = activation_bytes(route, max(sizes) * (1 + k)) + len(sizes) * GRAPH_OVERHEAD
        graph_formula = (f"{len(sizes)} decode graphs (batch {sizes[0]}..{sizes[-1]}"
                         f"{f' x {1 + k} tokens' if k else ''}) share one pool sized by the largest "
                         f"({max(sizes) * (1 + k)} tokens x {width} x {b} B) + {GRAPH_OVERHEAD // MIB} MiB each (assumed)")
        reserved = dev.reserved_bytes
        budget = int(c.kv.gpu_memory_utilization * dev.memory_bytes)
        kv_budget = budget - reserved - wbytes - act - graphs
    else:
        graphs, graph_formula, reserved = 0, "none on CPU", 0
        budget = int(c.kv.gpu_memory_utilization * dev.memory_bytes)
        kv_budget = int(c.kv.kv_cache_memory_gib * GIB)  # what the engine gives the cache on CPU
        if c.kv.num_blocks:
            kv_budget = c.kv.num_blocks * c.kv.block_size * kv_tok
    pl = MemoryPlan(route=route, weights=weights, kv=kv, weight_bytes=wbytes,
                    checkpoint_bytes=route.gguf.total_bytes if route.gguf is not None else None,
                    activation_bytes=act, activation_formula=act_formula, graph_bytes=graphs,
                    graph_formula=graph_formula, reserved_bytes=reserved, budget_bytes=budget,
                    kv_budget_bytes=kv_budget, kv_per_token=kv_tok, state_per_seq=state, need_bytes=0, fits=False,
                    short_bytes=0, fit_table=[], max_seqs_at_max_len=0, host_bytes=s.host_bytes)
    pl.need_bytes = S * pl.per_seq(route.max_model_len)
    if dev.kind == "cpu":
        total = wbytes + act + kv_budget
        if total > budget:
            pl.notes.append(f"weights + workspace + the {_g(kv_budget)} KV cache = {_g(total)} exceed "
                            f"{c.kv.gpu_memory_utilization:.2f} x {_g(dev.memory_bytes)} of host memory by "
                            f"{_g(total - budget)}")
    pl.short_bytes = max(0, pl.need_bytes - kv_budget)
    pl.fits = kv_budget > 0 and pl.short_bytes == 0
    bs = c.kv.block_size
    seq_options = sorted({n for n in (1, 2, 4, 8, 16, 32, 64, 128, 256) if n < S} | {S})
    for n in seq_options:
        room = kv_budget // n - state if kv_budget > 0 else 0
        ctx = max(0, room // (kv_tok * bs) * bs) if kv_tok else (route.max_model_len if room >= 0 else 0)
        pl.fit_table.append(FitRow(n, min(ctx, route.max_model_len)))
    pl.max_seqs_at_max_len = max(0, kv_budget // pl.per_seq(route.max_model_len)) if kv_budget > 0 else 0
    return pl


def _g(n: float) -> str:
    if abs(n) >= GIB / 10:
        return f"{n / GIB:.2f} GiB"
    if abs(n) >= MIB / 10:
        return f"{n / MIB:.1f} MiB"
    return f"{n / 1024:.1f} KiB" if abs(n) >= 1024 else f"{int(n)} B"


def format_plan(p: MemoryPlan) -> str:
    r, c, dev = p.route, p.route.config, p.route.device
    L = [f"onecat plan: {r.describe()}", ""]
    ranks = f"per rank (TP{r.tp}: {r.tp} ranks)" if r.tp > 1 else "per device"
    L.append(f"weights {ranks}: {c.quant.name}, resident {c.quant.resident}"
             + (f" (dequantized to {r.compute_dtype} at load)" if c.quant.resident == "dequantized" else ""))
    L.append(f"  {'group':<18}{'format':<10}{'bits/w':>7}  {'sharding':<44}{'tensors':>8}{'size':>12}")
    for w in p.weights:
        bits = 8 * w.bytes / w.numel if w.numel else 0
        L.append(f"  {w.group:<18}{w.fmt:<10}{bits:>7.3f}  {w.sharding:<44}{w.tensors:>8}{_g(w.bytes):>12}")
    L.append(f"  {'total':<18}{'':<10}{'':>7}  {'':<44}{'':>8}{_g(p.weight_bytes):>12}")
    if p.checkpoint_bytes is not None:
        L.append(f"  (checkpoint tensors on disk: {p.checkpoint_bytes} bytes = {_g(p.checkpoint_bytes)})")
    if r.shape.weight_bytes:
        L.append(f"  (scaled to the declared model size {_g(r.shape.weight_bytes)})")
    if p.host_bytes:
        L.append(f"  host memory, off-GPU: {_g(p.host_bytes)} (not counted against the GPU budget)")
    L.append("")
    L.append(f"KV cache and state {ranks}:")
    for k in p.kv:
        amount = f"{k.per_token} B/token" if k.per_token else f"{_g(k.per_seq)}/sequence"
        L.append(f"  {k.what}: {amount}")
        L.append(f"      = {k.formula}")
    L.append(f"  total: {p.kv_per_token} B/token + {_g(p.state_per_seq)}/sequence; block {c.kv.block_size} tokens"
             + (f", GDN state block {c.kv.mamba_block_size}" if r.shape.has_linear_attention and c.kv.mamba_block_size else ""))
    L.append("")
    L.append(f"activation / workspace: {_g(p.activation_bytes)}")
    L.append(f"  = {p.activation_formula}")
    L.append(f"CUDA graphs: {_g(p.graph_bytes)} ({p.graph_formula})")
    L.append("")
    if dev.kind == "cuda":
        L.append(f"budget {ranks}: {c.kv.gpu_memory_utilization:.2f} x {_g(dev.memory_bytes)} = {_g(p.budget_bytes)}"
                 f" - reserved {_g(p.reserved_bytes)} (CUDA context, cuBLAS/NCCL) - weights {_g(p.weight_bytes)}"
                 f" - workspace {_g(p.activation_bytes)} - graphs {_g(p.graph_bytes)}"
                 f" = KV budget {_g(p.kv_budget_bytes)}")
    else:
        L.append(f"KV budget on CPU: kv.kv_cache_memory_gib = {_g(p.kv_budget_bytes)} (the engine's rule); "
                 f"host memory {_g(dev.memory_bytes)}")
    S, ctx = c.scheduler.max_num_seqs, r.max_model_len
    if p.kv_budget_bytes <= 0:
        L.append(f"DOES NOT FIT: weights + workspace + graphs exceed the budget by {_g(-p.kv_budget_bytes)}; "
                 f"{S} x {ctx} tokens would need {_g(p.need_bytes)} more")
    elif p.fits:
        L.append(f"fits: {S} sequences x {ctx} tokens need {_g(p.need_bytes)} of KV/state; "
                 f"{_g(p.kv_budget_bytes - p.need_bytes)} to spare")
    else:
        L.append(f"DOES NOT FIT: {S} sequences x {ctx} tokens need {_g(p.need_bytes)} of KV/state, the budget is "
                 f"{_g(p.kv_budget_bytes)}: short by {_g(p.short_bytes)}")
    L.append("largest that fit: " + ", ".join(f"{f.seqs} seq x {f.max_context}" for f in p.fit_table)
             + f"; at {ctx} tokens: {p.max_seqs_at_max_len} sequence(s)")
    for n in p.notes:
        L.append(f"note: {n}")
    if r.unavailable:
        L.append("")
        L.append("would refuse to start here:")
        L += [f"  - {u}" for u in r.unavailable]
    if r.assumptions:
        L.append("")
        L.append("assumptions:")
        L += [f"  - {a}" for a in r.assumptions]
    return "\n".join(L)
