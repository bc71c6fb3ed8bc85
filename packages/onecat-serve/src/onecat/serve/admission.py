"""Admission: which provider runs every op of a route on a device, decided before the model loads.

From the route's shape, formats and dtypes this builds the Problems the model will present to the
kernels registry (the same facts `onecat.kernels.ops` computes per call), per site (qkv_proj,
attention, ...) and phase (prefill, decode, verify), and asks the registry (`explain`) which
provider admits each and why the others refuse. Devices may be faked (cpu, sm70, sm90: judged by
`supports` alone). Ops the route needs that the registry does not declare (GDN, MoE, collectives)
are rows with no provider.

Strict (kernels.strict=true, or a profile's `expect`): on a GPU every op must have a GPU kernel (the
torch reference is the route of last resort), and every expected op -> provider must hold; the
failures are readable sentences that refuse a start. After load, `layer_kernels` adds which
provider each layer's sites actually used (the registry's runtime selections).
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch

from onecat.kernels import REFERENCE, AdmissionError, Problem, ops, registry as global_registry
from onecat.kernels.linear_norm_ops import IN_PREFIX
from onecat.kernels.weights import RowParts

from .config_store import Route, expected_providers
from .hardware import Device

QUIET_KEYS = {"contiguous", "aligned16", "weight_aligned32", "layout_ok", "row_contiguous"}  # always true here
QUIET_KEYS |= {IN_PREFIX + k for k in QUIET_KEYS}  # the joined ops' projection in front (linear_norm_ops)
LAYOUT_KEYS = QUIET_KEYS | {"rows", "phase", IN_PREFIX + "rows"}


def facts(p: Problem) -> str:
    """Problem.describe() without the layout flags a constructed call always satisfies, nor Nones."""
    cap = f"sm{p.capability[0]}{p.capability[1]}" if p.capability else p.device
    extra = ", ".join(f"{k}={v}" for k, v in p.params if k not in QUIET_KEYS and v is not None)
    return f"{p.op}[{cap}, {p.dtype}{', ' + extra if extra else ''}]"


@dataclass(frozen=True)
class Site:
    """One call site of the route: `op` at `site` in `phase`, with the facts the registry sees."""

    op: str
    site: str
    phase: str  # prefill | decode | verify | all
    layers: tuple[int, ...]
    params: tuple[tuple[str, Any], ...]
    dtype: str
    declared: bool = True  # False: the registry has no such op yet


@dataclass
class AdmissionRow:
    op: str
    site: str
    phases: list[str]
    layers: list[int]
    problem: str  # the registry's full description of the Problem
    provider: str | None
    refused: dict[str, list[str]]
    status: str  # admitted | fallback (torch reference on a GPU) | missing (no such op) | error (pin refused)
    note: str = ""
    facts: str = ""  # the problem without always-true layout flags

    def to_json(self) -> dict:
        return {"op": self.op, "site": self.site, "phases": self.phases, "layers": _ranges(self.layers),
                "problem": self.problem, "facts": self.facts, "provider": self.provider, "status": self.status,
                "refused": self.refused, **({"note": self.note} if self.note else {})}


@dataclass
class AdmissionReport:
    route: str
    device: str  # cpu | smXY
    device_name: str
    fake: bool
    strict: bool
    expect: dict[str, str]
    rows: list[AdmissionRow]
    failures: list[str] = field(default_factory=list)
    layers: list[dict] = field(default_factory=list)  # after load: per layer group, site -> provider(s)

    def row(self, site: str, phase: str | None = None) -> AdmissionRow:
        for r in self.rows:
            if r.site == site and (phase is None or phase in r.phases):
                return r
        raise KeyError(f"no site {site!r}{f' in phase {phase}' if phase else ''}")

    def table(self) -> str:
        head = (f"admission for {self.route} on {self.device} ({self.device_name}"
                f"{', faked: judged by supports() alone' if self.fake else ''}){', strict' if self.strict else ''}"
                + (f", expect {self.expect}" if self.expect else ""))
        w = max([len(r.site) for r in self.rows] + [8])
        lines = [head, f"  {'site':<{w}}  {'phases':<22}{'layers':<12}{'provider':<12}problem / refused (reasons)",
                 "  " + "-" * (w + 100)]
        for r in self.rows:
            prov = r.provider or "-"
            flag = {"fallback": "  [reference fallback]", "missing": "  [NOT AVAILABLE]", "error": "  [ERROR]"}.get(r.status, "")
            lines.append(f"  {r.site:<{w}}  {','.join(r.phases):<22}{_short(r.layers) or '-':<12}{prov:<12}"
                         f"{r.facts or r.problem}{flag}")
            if r.note:
                lines.append(f"  {'':<{w}}  {'':<22}{'':<12}{'':<12}{r.note}")
            for name, reasons in r.refused.items():
                lines.append(f"  {'':<{w}}  {'':<22}{'':<12}{'':<12}x {name}: {'; '.join(reasons)}")
        if self.layers:
            lines.append("kernels used per layer (runtime selections after load):")
            for g in self.layers:
                kern = ", ".join(f"{k}={v}" for k, v in g["kernels"].items())
                lines.append(f"  layers {g['layers']} ({g['type']}): {kern}")
        if self.failures:
            lines.append("strict admission failures:" if self.strict else "admission failures:")
            lines += [f"  - {f}" for f in self.failures]
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"route": self.route, "device": self.device, "device_name": self.device_name, "fake": self.fake,
                "strict": self.strict, "expect": self.expect, "admission": [r.to_json() for r in self.rows], "failures": self.failures,
                "layers": self.layers}


def fake_device(label: str) -> Device:
    """cpu, or smXY: a device for admission only (no memory figures)."""
    if label == "cpu":
        return Device(name="cpu", kind="cpu", gpu="", count=1, memory_bytes=0, capability=None)
    if label.startswith("sm") and label[2:].isdigit() and len(label) >= 4:
        return Device(name=label, kind="cuda", gpu="", count=1, memory_bytes=0,
                      capability=(int(label[2:-1]), int(label[-1])))
    raise ValueError(f"unknown device {label!r}: cpu or smXY (sm70, sm80, sm90, ...)")


# -- the sites of a route -------------------------------------------------------------------------------
def _kernel_format(fmt: str, device_kind: str = "cuda") -> str:
    """The `format` a resident weight of checkpoint format `fmt` shows the linear op on a device of
    this kind, as onecat.quant.linear_method prepares it at load (packed for the GPU GEMV, byte codes
    for the CPU reference, raw blocks otherwise); prepared names (bytecode_q4_1, ...) pass through."""
    from onecat.kernels import weights
    from onecat.quant.linear_method import prepared_format

    from .planner import FLOAT_FORMATS

    if fmt in FLOAT_FORMATS:
        return "dense"
    if fmt[:1].isupper():  # a GGUF type name
        return prepared_format(fmt, "cuda" if device_kind == "cuda" else "cpu")
    kind = fmt.lower()
    if kind in getattr(weights, "PACKED_FORMATS", ()):  # awq
        return f"packed_{kind}" if device_kind == "cuda" else f"codec_{kind}"
    return kind


def _meta(*shape: int, dtype: str = "float16") -> torch.Tensor:
    return torch.empty(*shape, dtype=getattr(torch, dtype), device="meta")


class _PackedStandIn:
    """What the linear op sees of a quantized weight: its format, logical shape and bytes."""

    def __init__(self, fmt: str, n: int, k: int) -> None:
        self.format, self.shape, self.raw = fmt, (n, k), _meta(n, max(1, k // 2), dtype="uint8")


def fuses_projections(architecture: str) -> bool:
    """Whether the architecture's adapter calls ops.rms_norm_linear (qkv_proj and gate_up_proj with
    the residual add and RMSNorm in front, gate_up_proj with its activation too) instead of the
    separate ops: its FUSED_PROJECTIONS flag (Llama-family adapters)."""
    from onecat.models.registry import resolve_adapter

    try:
        return bool(getattr(resolve_adapter(architecture), "FUSED_PROJECTIONS", False))
    except (ValueError, ImportError):  # a declared shape with no adapter here: planned as unfused
        return False


def route_sites(route: Route, compute_dtype: str | None = None, device_kind: str | None = None) -> list[Site]:
    """Every call the route's model makes, as Sites (deduplicated by site and facts).

    Each call is built from meta-device tensors of the route's shapes and dtypes and handed to
    `onecat.kernels.ops.problem`, so the facts are exactly those the ops compute at run time."""
    s, c, tp = route.shape, route.config, route.tp
    dt = compute_dtype or route.compute_dtype
    kind = device_kind or route.device.kind  # weights are prepared for the device the calls run on
    kv_dt = route.kv_dtype if route.kv_dtype != route.compute_dtype else dt
    resident = c.quant.resident == "dequantized"
    S, k = c.scheduler.max_num_seqs, c.spec.k
    T = c.scheduler.max_num_batched_tokens
    phases = [("prefill", max(T, 17)), ("decode", 1)] + ([("decode", S)] if S > 1 else [])
    if c.spec.method != "none":
        phases.append(("verify", S * (1 + k)))
    sites: dict[tuple, set[int]] = {}
    declared = set(global_registry.ops)

    def call(op: str, site: str, layers, *args, phase: str = "all") -> None:
        p = ops.problem(op, *args)
        key = (op, site, phase, p.params, p.dtype, True)
        sites.setdefault(key, set()).update(layers)

    def missing(op: str, site: str, layers, params: dict) -> None:
        key = (op, site, "all", tuple(sorted(params.items())), dt, op in declared)
        sites.setdefault(key, set()).update(layers)

    def linear(site: str, layers, n: int, kk: int, fmt: str | None, bias: bool = False) -> None:
        w = weight_of(n, kk, fmt)
        b = _meta(n, dtype=dt) if bias else None
        for phase, rows in phases:
            call("linear", site, layers, _meta(rows, kk, dtype=dt), w, b, phase=phase)

    def norm(site: str, layers, hidden: int, residual: bool, x_dtype: str = dt) -> None:
        r = _meta(2, hidden, dtype=x_dtype) if residual else None
        call("rms_norm", site, layers, _meta(2, hidden, dtype=x_dtype), _meta(hidden, dtype=dt), 1e-6, r)

    fused = fuses_projections(s.architecture) and not s.fp32_residual

    def weight_of(n: int, kk: int, fmt: str | None):
        kf = "dense" if fmt is None or resident else _kernel_format(fmt, kind)
        return _meta(n, kk, dtype=dt) if kf == "dense" else _PackedStandIn(kf, n, kk)

    def norm_linear(site: str, layers, n: int, kk: int, fmt: str | None, bias: bool = False,
                    act: str | None = None, rope=None) -> None:
        """residual add + RMSNorm + projection (+ activation), or with `rope` (rows -> the rotary and
        cache arguments) the attention input's rms_norm_qkv_rotary_cache."""
        w = weight_of(n, kk, fmt)
        b = _meta(n, dtype=dt) if bias else None
        # the first layer's qkv takes the embedding, with no residual yet (its gate_up has one)
        first = [i for i in layers if i == 0] if site == "qkv_proj" else []
        for phase, rows in phases:
            for ls, res in ((first, None), ([i for i in layers if i not in first], _meta(rows, kk, dtype=dt))):
                if ls and rope:
                    call("rms_norm_qkv_rotary_cache", site, ls, _meta(rows, kk, dtype=dt), _meta(kk, dtype=dt), 1e-6,
                         w, res, b, *rope(rows), phase=phase)
                elif ls:
                    call("rms_norm_linear", site, ls, _meta(rows, kk, dtype=dt), _meta(kk, dtype=dt), 1e-6, w,
                         res, b, act, phase=phase)

    def linear_norm(site: str, layers, n_in: int, k_in: int, n: int, kk: int, fmt: str | None, bias: bool = False,
                    act: str | None = None, rope=None) -> None:
        """A projection into the residual stream joined to the normed projection behind it (the adapter's
        linear_rms_norm_linear, or with `rope` linear_rms_norm_qkv_rotary_cache): its unfused route is the
        sites' own linear and norm_linear rows."""
        w_in, w = weight_of(n_in, k_in, fmt), weight_of(n, kk, fmt)
        b = _meta(n, dtype=dt) if bias else None
        for phase, rows in phases:
            head = (_meta(rows, k_in, dtype=dt), w_in, _meta(rows, kk, dtype=dt), _meta(kk, dtype=dt), 1e-6, w, b)
            if rope:
                call("linear_rms_norm_qkv_rotary_cache", site, layers, *head, *rope(rows), phase=phase)
            else:
                call("linear_rms_norm_linear", site, layers, *head, act, phase=phase)

    H, D, f = s.hidden_size, s.head_dim, route.formats
    res_dt = "float32" if s.fp32_residual and dt == "float16" else dt
    wfmt = f.get("weights")
    by_type: dict[str, list[int]] = {}
    for i, t in enumerate(s.layer_types):
        by_type.setdefault(t, []).append(i)
    if not fused:  # else the norms come with qkv_proj (input) and gate_up_proj (post-attention)
        norm("input_norm", [0] if s.num_layers else [], H, False)
        norm("input_norm", range(1, s.num_layers), H, True, x_dtype=res_dt)
        norm("post_attn_norm", range(s.num_layers), H, True, x_dtype=res_dt)
    attn = by_type.get("attention", []) + by_type.get("sliding_attention", [])
    if attn:
        hq, hk = s.num_heads // tp, s.kv_heads_per_rank(tp)
        q = hq * D * (2 if s.attn_output_gate else 1)
        bs = c.kv.block_size
        cache = _meta(2, bs, hk, D, dtype=kv_dt)
        cos_sin = _meta(2, s.rotary_dim or D, dtype="float32")
        fp8 = (1.0, 1.0) if kv_dt.startswith("float8") else ()
        if fused:  # the input norm, q/k/v, rotary and the cache write: one op
            def rope(rows: int) -> tuple:  # positions ... num_kv_heads
                pos = _meta(rows, dtype="int64")
                return pos, D, cos_sin, not s.rope_interleaved, cache, cache, pos, hq, hk

            norm_linear("qkv_proj", attn, q + 2 * hk * D, H, wfmt, s.attention_bias, rope=rope)
        else:
            linear("qkv_proj", attn, q + 2 * hk * D, H, wfmt, s.attention_bias)
        if s.qk_norm:
            norm("q_norm", attn, D, False)
            norm("k_norm", attn, D, False)
        if not fused:
            qkv = _meta(2, (hq + 2 * hk) * D, dtype=dt)  # q, k: strided views of the fused projection
            call("rotary_and_cache", "rope_kv_write", attn, _meta(2, dtype="int64"), qkv[:, :hq * D],
                 qkv[:, hq * D:(hq + hk) * D], qkv[:, (hq + hk) * D:], D, cos_sin, not s.rope_interleaved, cache,
                 cache, _meta(2, dtype="int64"), *fp8)
        attn_phases = [("prefill", max(T, 17)), ("decode", 1)] + ([("verify", 1 + k)] if k else [])
        for attn_kind in ("attention", "sliding_attention"):  # (not `kind`: the weights' device kind)
            layers = by_type.get(attn_kind, [])
            if not layers:
                continue
            if s.sparse_attention:
                missing(f"sparse_attention_{s.sparse_attention}", "sparse_attention", layers,
                        dict(head_dim=D, kv_dtype=kv_dt, block_size=bs))
            window = s.sliding_window if attn_kind == "sliding_attention" else None
            for phase, mq in attn_phases:
                call("paged_attention", "attention", layers, _meta(2, hq, D, dtype=dt), cache, cache,
                     SimpleNamespace(max_query_len=mq), D ** -0.5, window, None, *fp8, phase=phase)
        linear("o_proj", attn, H, hq * D, wfmt)
    gdn = by_type.get("linear_attention", [])
    if gdn:
        kd, vd = s.gdn_key_heads * s.gdn_key_dim, s.gdn_value_heads * s.gdn_value_dim
        linear("gdn_in_proj", gdn, (2 * kd + 2 * vd + 2 * s.gdn_value_heads) // tp, H, wfmt)
        for op in ("causal_conv1d", "gated_delta_rule", "gated_rms_norm"):
            missing(op, f"gdn.{op}", gdn, dict(key_heads=s.gdn_key_heads // tp, value_heads=s.gdn_value_heads // tp,
                                                key_dim=s.gdn_key_dim, value_dim=s.gdn_value_dim,
                                                state_dtype=c.kv.state_dtype))
        linear("gdn_out_proj", gdn, H, vd // tp, wfmt)
    layers = range(s.num_layers)
    act = "silu_and_mul" if s.hidden_act == "silu" else "gelu_and_mul"
    act_args = () if act == "silu_and_mul" else ("tanh",)
    if s.num_experts:
        linear("moe_router", layers, s.num_experts, H, None)
        missing("fused_moe", "moe_experts", layers, dict(experts=s.num_experts, top_k=s.experts_per_tok,
                                                       inter=s.moe_intermediate_size // tp,
                                                       format=_kernel_format(wfmt, kind)))
        if s.shared_expert_intermediate_size:
            Is = s.shared_expert_intermediate_size // tp
            linear("shared_gate_up", layers, 2 * Is, H, wfmt)
            call(act, "shared_act", layers, _meta(2, 2 * Is, dtype=dt), *act_args)
            linear("shared_down", layers, H, Is, wfmt)
    else:
        I = s.intermediate_size // tp
        if fused and act == "silu_and_mul":
            norm_linear("gate_up_proj", layers, 2 * I, H, wfmt, act=act)
            if attn:  # o_proj with gate_up behind; down with the next layer's qkv behind
                linear_norm("o_proj+gate_up_proj", attn, H, hq * D, 2 * I, H, wfmt, act=act)
                linear_norm("down_proj+qkv_proj", [i for i in attn if i > 0], H, I, q + 2 * hk * D, H, wfmt,
                            s.attention_bias, rope=rope)
        else:
            linear("gate_up_proj", layers, 2 * I, H, wfmt)
            call(act, "mlp_act", layers, _meta(2, 2 * I, dtype=dt), *act_args)
        linear("down_proj", layers, H, I, wfmt)
    if tp > 1:
        missing("all_reduce", "tp_all_reduce", layers, dict(ranks=tp, dtype=dt))
    norm("final_norm", [], H, True, x_dtype=res_dt)
    linear("lm_head", [], s.vocab_size // tp, H, f.get("lm_head"))
    if c.spec.method == "dflash":
        missing("dflash_draft", "draft", [], dict(block=k + 1, top_k=c.spec.top_k, kv_dtype=c.spec.draft_kv_dtype))
    return [Site(op, site, phase, tuple(sorted(ls)), params, dtype, dec)
            for (op, site, phase, params, dtype, dec), ls in sites.items()]


# -- admission ------------------------------------------------------------------------------------------
def _route_registry(route: Route):
    """A view of the global registry with the route's priority, pins and disabled providers."""
    reg = copy.copy(global_registry)
    k = route.config.kernels
    reg.priority = {**global_registry.priority, **{op: list(v) for op, v in dict(k.priority).items()}}
    reg.pins = dict(route.pins)
    reg.disabled = set(k.disabled)
    reg._cache, reg._lock = {}, threading.Lock()
    return reg


def admit(route: Route, device: Device, fake: bool | None = None, compute_dtype: str | None = None) -> AdmissionReport:
    """The admission table for `route` on `device`. fake (default: the device is not this machine):
    providers are judged by `supports` alone, without this machine's availability checks."""
    fake = (not device.detected) if fake is None else fake
    if compute_dtype is None and device.kind != route.device.kind and route.config.model.dtype == "auto":
        compute_dtype = "float16" if device.kind == "cuda" else "float32"
    reg = _route_registry(route)
    merged: dict[tuple, AdmissionRow] = {}
    for site in route_sites(route, compute_dtype, device.kind):
        p = Problem(op=site.op, device=device.kind, capability=device.capability, dtype=site.dtype,
                    params=site.params)
        key = (site.op, site.site, site.params, site.dtype)
        if key in merged:
            merged[key].phases.append(site.phase)
            continue
        if not site.declared:
            row = AdmissionRow(site.op, site.site, [site.phase], list(site.layers), p.describe(), None, {}, "missing",
                               f"op {site.op!r} is not declared in onecat.kernels (no reference, no kernel)")
            row.facts = facts(p)
        else:
            try:
                sel = reg.explain(p, check_available=not fake)
                status = "fallback" if device.kind == "cuda" and sel.provider.name == REFERENCE else "admitted"
                row = AdmissionRow(site.op, site.site, [site.phase], list(site.layers), p.describe(),
                                   sel.provider.name, dict(sel.refused), status, facts=facts(p))
            except AdmissionError as e:
                row = AdmissionRow(site.op, site.site, [site.phase], list(site.layers), p.describe(), None, {},
                                   "error", str(e), facts=facts(p))
        merged[key] = row
    rows = list(merged.values())
    for r in rows:
        r.phases = sorted(set(r.phases), key=["prefill", "decode", "verify", "all"].index)
    report = AdmissionReport(route=route.name, device=device.label, device_name=device.describe() if device.memory_bytes
                             else device.label, fake=fake, strict=route.strict, expect=dict(route.config.profile.expect), rows=rows)
    report.failures = failures(route, report)
    return report


def failures(route: Route, report: AdmissionReport) -> list[str]:
    """Readable reasons to refuse a start: pinned providers that refuse and unmet `expect` entries,
    always; with kernels.strict, also every GPU op without a GPU kernel and every op the registry lacks."""
    out, dev, pins = [], report.device, route.pins
    for r in report.rows:
        where = f"{r.site} ({', '.join(r.phases)})"
        if r.status == "error":
            out.append(f"kernels.pins.{r.op}: {r.note}")
        elif report.strict and r.status == "missing":
            out.append(f"{where}: no {r.op} op in onecat.kernels for {r.facts}")
        elif report.strict and r.status == "fallback" and pins.get(r.op) != REFERENCE:
            why = "; ".join(f"{n}: {', '.join(rs)}" for n, rs in r.refused.items()) or "no GPU provider is registered"
            out.append(f"{where}: no admitted GPU {r.op} for {r.facts} on {dev} (only the torch reference): {why}")
    for key, want in dict(route.config.profile.expect).items():
        op, _, phase = key.partition("@")
        wants = expected_providers(want)
        hits = [r for r in report.rows if r.op == op and (not phase or phase in r.phases)]
        for r in hits:
            if r.provider not in wants:
                whys = []
                for w in wants:
                    why = r.refused.get(w) or ([r.note] if r.note else ["not registered" if r.status != "missing"
                                                                        else "op not declared"])
                    whys.append(f"{w}: {'; '.join(why)}")
                out.append(f"profile.expect {key}={want}: {r.site} ({', '.join(r.phases)}) admits "
                           f"{r.provider or 'nothing'} on {dev} for {r.facts}; {'; '.join(whys)}")
    return out


# -- after load: which kernels each layer used -----------------------------------------------------------
def _identity(params) -> tuple:
    return tuple((k, v) for k, v in params if k not in LAYOUT_KEYS)


def layer_kernels(route: Route, report: AdmissionReport, selections=None) -> list[dict]:
    """Per group of layers with the same kernels: site -> the provider(s) the runtime selected."""
    selections = global_registry.selections() if selections is None else selections
    seen: dict[tuple, set[str]] = {}
    for sel in selections:
        seen.setdefault((sel.problem.op, sel.problem.dtype, _identity(sel.problem.params)), set()).add(sel.provider.name)
    per_layer: dict[int, dict[str, str]] = {}
    for site in route_sites(route, route.compute_dtype):
        if not site.layers:
            continue
        provs = seen.get((site.op, site.dtype, _identity(site.params)))
        label = "+".join(sorted(provs)) if provs else ("(no op)" if not site.declared else "(not called yet)")
        for i in site.layers:
            cur = per_layer.setdefault(i, {}).get(site.site)
            if cur and cur != label:
                label = "+".join(sorted(set(cur.split("+")) | set(label.split("+")) - {"(not called yet)"}))
            per_layer[i][site.site] = label
    groups: list[dict] = []
    for i in sorted(per_layer):
        kern = dict(sorted(per_layer[i].items()))
        t = route.shape.layer_types[i]
        if groups and groups[-1]["kernels"] == kern and groups[-1]["type"] == t and groups[-1]["_last"] == i - 1:
            groups[-1]["_layers"].append(i)
            groups[-1]["_last"] = i
        else:
            groups.append({"_layers": [i], "_last": i, "type": t, "kernels": kern})
    return [{"layers": _ranges(g["_layers"]), "type": g["type"], "kernels": g["kernels"]} for g in groups]


def _short(xs) -> str:
    text = _ranges(xs)
    return text if len(text) <= 11 else f"{len(xs)} layers"


def _ranges(xs) -> str:
    xs = sorted(xs)
    out, start = [], None
    for j, x in enumerate(xs):
        if start is None:
            start = x
        if j + 1 == len(xs) or xs[j + 1] != x + 1:
            out.append(f"{start}" if start == x else f"{start}-{x}")
            start = None
    return ",".join(out)


# -- the served report ------------------------------------------------------------------------------------
def _held_format(weight, dt: str) -> str:
    """The format a loaded projection shows the linear op ('bytecode_q4_1', 'packed_q4_0', ...), or
    the compute dtype for a dense one; a projection held in parts of different formats (a RowParts) reports
    its first part's (the route plans one weight format; each part runs through its own format's provider)."""
    from onecat.quant.linear_method import describe_weight

    if isinstance(weight, RowParts):
        weight = weight.parts[0]
    if weight is None:
        return dt
    name = describe_weight(weight)
    return dt if name.startswith("dense") else name


def route_from_engine(engine) -> Route:
    """A Route for an engine built without onecat-serve's CLI (its shape, device and dtype as loaded)."""
    from .config_store import KVGroupConfig, ModelGroupConfig, OnecatConfig, QuantConfig
    from .hardware import detect
    from .model_shape import ModelShape

    runner = engine.runner
    dt = str(runner.dtype).removeprefix("torch.")
    dev = detect() if runner.device.type == "cuda" else Device("cpu", "cpu", "", 1, 0, None, detected=True)
    cfg = OnecatConfig(model=ModelGroupConfig(name=engine.model_name, path=engine.config.model.path),
                       kv=KVGroupConfig(block_size=engine.config.cache.block_size), scheduler=engine.config.scheduler,
                       quant=QuantConfig(resident="dequantized" if getattr(runner.loaded, "dense", True) else "packed"))
    shape = ModelShape.from_spec(engine.spec, engine.model_name, f"loaded {runner.loaded.source}")
    wfmt = _held_format(getattr(runner.model.layers[0], "qkv", None), dt) if getattr(runner.model, "layers", None) else dt
    return Route(config=cfg, shape=shape, draft=None, device=dev, compute_dtype=dt, kv_dtype=dt,
                 formats={"weights": wfmt, "embedding": dt, "lm_head": dt, "unquantized": dt}, pins={},
                 checkpoint=runner.loaded.source, gguf=None, max_model_len=engine.max_model_len)


def acceleration_report(llm) -> dict:
    """GET /v1/onecat/acceleration: the route, its admission on this device, the kernels each layer
    used, and the runtime selections so far."""
    route = getattr(llm, "route", None) or route_from_engine(llm.engine)
    here = route.device if route.device.detected else None
    if here is None:
        from .hardware import detect

        here = detect()
    report = admit(route, here, fake=False, compute_dtype=getattr(llm, "dtype", None))
    report.layers = layer_kernels(route, report)
    return {**report.to_json(), "name": route.name, "route": route.describe(), "unavailable": route.unavailable,
            "runtime": llm.route_report()}
