"""The `sample` op: top-k / top-p / min-p sampling over the vocabulary, seeded per request.

Three pieces, one semantics: `sample_reference` (torch; the op's definition, and its CPU route),
`sample_inputs` (the registry's input generator) and the CUDA provider `cuda_sample`
(csrc/sampling.cu, one block per row). The reference and the kernel take the same float steps in
the same rounding (see the reference's docstring), draw their randomness from the same
counter-based generator (Philox-4x32-10) and sum probability mass in integers, so the kernel is
checked against the reference token for token, not only in distribution. (exp and log are the
only steps not pinned bit for bit: the kernel's expf/logf and torch's CUDA exp/log are both CUDA's
libdevice functions; where two builds differed by an ulp, a different token would still need two
Gumbel keys or a threshold within that ulp, about 1e-6 per row.)

Hot path (`cuda_sample`): one output allocation and one launch; no host sync, so it can be
captured in a CUDA graph. Argument checks that need no sync (shapes, dtypes, devices) run when
`ops.sample` builds its Problem; value checks (ranges, NaN) run in the reference only.
"""

from __future__ import annotations

import torch

from . import cuda_ops
from .cuda_ops import _aligned, _common, _empty, _need, available
from .driver import Kernel
from .registry import Case, KernelRegistry, Problem, Provider

GREEDY_BELOW = float(torch.tensor(1e-5, dtype=torch.float32))  # temperature < this: greedy (vLLM's eps)
MASS_BITS = 31  # fixed-point mass: q = trunc(p / p_max * 2^31)
MAX_VOCAB = 1 << 20  # q sums stay < 2^53, exact as float64 (kernel: u32 halves per warp bin)
# dtypes of the per-row parameters, in argument order after `logits`.
PARAM_DTYPES = {"temperature": torch.float32, "top_k": torch.int32, "top_p": torch.float32,
                "min_p": torch.float32, "seed": torch.int64, "offset": torch.int64}

# -- Philox-4x32-10 in int64 torch arithmetic (values kept in [0, 2^32)) ---------------------------
_M32 = 0xFFFFFFFF
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)


def _mulhilo(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(hi, lo) 32-bit halves of a * b for a, b in [0, 2^32), without int64 overflow."""
    p_lo = a * (b & 0xFFFF)  # < 2^48
    p_hi = a * (b >> 16)  # < 2^48; a * b = p_hi * 2^16 + p_lo
    lo = (((p_hi & 0xFFFF) << 16) + p_lo) & _M32
    hi = (p_hi + (p_lo >> 16)) >> 16
    return hi, lo


def philox4x32_10(counter: tuple, key: tuple) -> tuple[torch.Tensor, ...]:
    """Philox-4x32-10 (Salmon et al., SC'11; Random123's round and constants) on int64 tensors
    holding u32 values; counter (c0..c3) and key (k0, k1) broadcast against each other. Both
    multiplies of a round run as one stacked tensor op (the reference's cost is its op count)."""
    c0, c1, c2, c3 = torch.broadcast_tensors(*counter, *key)[:4]
    k0, k1 = key
    mult = torch.tensor(_PHILOX_M, dtype=torch.int64, device=c0.device).view(2, *([1] * c0.dim()))
    for r in range(10):
        if r:
            k0, k1 = (k0 + _PHILOX_W[0]) & _M32, (k1 + _PHILOX_W[1]) & _M32
        hi, lo = _mulhilo(mult, torch.stack((c0, c2)))  # [0]: M0 * c0, [1]: M1 * c2
        c0, c1, c2, c3 = hi[1] ^ c1 ^ k0, lo[1], hi[0] ^ c3 ^ k1, lo[0]
    return c0, c1, c2, c3


def philox_uniforms(seed: torch.Tensor, offset: torch.Tensor, vocab: int) -> torch.Tensor:
    """u [B, vocab] float32 in (0, 1): token i of row b takes word i % 4 of Philox-4x32-10 with
    key (seed lo, seed hi) and counter (i // 4, offset lo, offset hi, 0); u = ((w >> 9) + 0.5) * 2^-23
    (exact in float32). A row's draws depend on its (seed, offset) only, never on the batch."""
    groups = torch.arange((vocab + 3) // 4, dtype=torch.int64, device=seed.device)[None, :]
    s, o = seed.long()[:, None], offset.long()[:, None]
    words = philox4x32_10((groups, o & _M32, (o >> 32) & _M32, torch.zeros_like(groups)),
                          (s & _M32, (s >> 32) & _M32))
    w = torch.stack(words, dim=-1).flatten(-2)[:, :vocab]
    return ((w >> 9).to(torch.float32) + 0.5) * 2.0 ** -23


# -- argument checks ------------------------------------------------------------------------------
def check_sample_args(logits, temperature, top_k, top_p, min_p, seed, offset) -> None:
    """Shapes, dtypes and devices (no device sync): ValueError naming the tensor otherwise."""
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2:
        raise ValueError(f"sample: logits must be a 2-D tensor [batch, vocab], got "
                         f"{tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__}")
    if logits.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"sample: logits dtype {logits.dtype} is not float16/bfloat16/float32")
    b, v = logits.shape
    if not 1 <= v <= MAX_VOCAB:
        raise ValueError(f"sample: vocab {v} outside [1, {MAX_VOCAB}] (fixed-point mass sums must stay exact)")
    for (name, want), t in zip(PARAM_DTYPES.items(), (temperature, top_k, top_p, min_p, seed, offset)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"sample: {name} must be a {want} tensor [{b}], got {type(t).__name__}")
        if t.dtype != want or tuple(t.shape) != (b,):
            raise ValueError(f"sample: {name} must be {want} [{b}] (one per row), got {t.dtype} {tuple(t.shape)}")
        if t.device != logits.device:
            raise ValueError(f"sample: {name} is on {t.device}, logits on {logits.device}")


def _check_values(logits, temperature, top_k, top_p, min_p) -> None:
    """Value ranges (syncs on a GPU: the reference's job, not the kernel's)."""
    bad = ~torch.isfinite(temperature) | (temperature < 0)
    if bad.any():
        raise ValueError(f"sample: temperature must be finite and >= 0 (rows {_rows(bad)})")
    if (top_k < 0).any():
        raise ValueError(f"sample: top_k must be >= 0 (0 = off; rows {_rows(top_k < 0)})")
    bad = ~((top_p > 0) & (top_p <= 1))
    if bad.any():
        raise ValueError(f"sample: top_p must be in (0, 1] (1 = off; rows {_rows(bad)})")
    bad = ~((min_p >= 0) & (min_p <= 1))
    if bad.any():
        raise ValueError(f"sample: min_p must be in [0, 1] (0 = off; rows {_rows(bad)})")
    bad = (torch.isnan(logits) | (logits == float("inf"))).any(-1)
    if bad.any():
        raise ValueError(f"sample: logits hold NaN or +inf (rows {_rows(bad)}); -inf masks a token")


def _rows(mask: torch.Tensor) -> list[int]:
    return mask.nonzero().flatten()[:8].tolist()


# -- the reference --------------------------------------------------------------------------------
def sampling_keep_mask(logits, temperature, top_k, top_p, min_p):
    """(keep [B, V] bool, z [B, V] float32): the tokens a non-greedy row samples from, and its
    scaled logits. Filters in vLLM's order: min-p, then top-k, then top-p on what is left (see
    `sample_reference`). Rows with temperature < GREEDY_BELOW get a mask too (unused)."""
    b, v = logits.shape
    neg_inf = torch.tensor(float("-inf"), device=logits.device)
    t = torch.where(temperature < GREEDY_BELOW, torch.ones_like(temperature), temperature)
    z = logits.float() * (torch.ones_like(t) / t)[:, None]  # r = fl(1 / T), then fl(x * r)
    e = torch.exp(z - z.max(dim=-1, keepdim=True).values)  # p / p_max, the max token's e is 1
    keep = e >= min_p[:, None]
    # top-k among the min-p survivors: ties at the k-th largest z are all kept.
    use_k = (top_k > 0) & (top_k < v)
    if use_k.any():
        zs = torch.where(keep, z, neg_inf).sort(dim=-1, descending=True).values
        kth = zs.gather(1, (top_k.long().clamp(1, v) - 1)[:, None])
        keep &= z >= torch.where(use_k[:, None], kth, neg_inf)
    # top-p: the largest threshold t with mass(e >= t) >= top_p * mass(kept); ties at t all kept.
    use_p = top_p < 1
    if use_p.any():
        q = torch.where(keep, (e * 2.0 ** MASS_BITS).to(torch.int64), 0)
        target = top_p.double() * q.sum(-1).double()
        es, order = torch.where(keep, e, -1.0).sort(dim=-1, descending=True)
        reached = q.gather(1, order).cumsum(-1).double() >= target[:, None]
        first = reached.int().argmax(-1, keepdim=True)  # the first sorted position reaching it
        keep &= (e >= es.gather(1, first)) | ~use_p[:, None]
    return keep, z


def sample_reference(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor,
                     min_p: torch.Tensor, seed: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """Sample one token id (int64 [B]) per row of logits [B, V] (float16/bfloat16/float32), with
    per-row temperature, top_k, top_p, min_p (float32/int32/float32/float32 [B]) and per-row seed
    and offset (int64 [B]; the offset is the request's step, so its stream of samples is
    reproducible and independent of which other rows share the batch).

    Semantics (the kernel takes the same float32 steps, rounded the same way):
      - temperature < 1e-5 (0 included): greedy, torch.argmax of the logits (first index on ties);
        the filters are ignored. A row whose logits are all -inf yields token 0.
      - z = float32(logits) * float32(1 / temperature); m = max z; e_i = exp(z_i - m) = p_i / p_max
        with p = softmax(z) (-inf logits have e = 0).
      - min-p (0 = off): keep e_i >= min_p, i.e. p_i >= min_p * p_max.
      - top-k (0 or >= V = off): of those, keep z_i >= the k-th largest z among them; every token
        tied with the k-th value is kept (so more than k may survive).
      - top-p (1 = off): mass is fixed point, q_i = trunc(e_i * 2^31) as an integer (sums are exact
        in any order); of the survivors S, keep e_i >= t, where t is the largest e among S with
        sum(q_j : j in S, e_j >= t) >= float64(top_p) * float64(sum(q_j : j in S)). That is the
        smallest set of most probable tokens whose mass reaches top_p of the mass left after min-p
        and top-k (vLLM's order: min-p, top-k, then top-p on the renormalized remainder); tokens tied
        at t are all kept; tokens with q = 0 (e < 2^-31) are never kept by an active top-p.
      - sample from the kept set in proportion to e (the renormalized truncated distribution) by
        Gumbel-max: argmax over kept i of z_i + g_i, g_i = -log(-log(u_i)) in float32, smallest index
        on ties; u_i from `philox_uniforms` keyed by (seed, offset, i). With 23-bit uniforms, g lies in
        [-2.8, 16.6]: tokens with p_i / p_max < ~4e-9 are never drawn.
    Values out of range (temperature < 0 or not finite, top_k < 0, top_p outside (0, 1], min_p
    outside [0, 1], NaN or +inf logits) raise ValueError here; the kernel does not check them.
    """
    check_sample_args(logits, temperature, top_k, top_p, min_p, seed, offset)
    _check_values(logits, temperature, top_k, top_p, min_p)
    greedy = torch.argmax(logits, dim=-1)
    active = (temperature >= GREEDY_BELOW) & (logits.amax(-1) > float("-inf"))
    if not bool(active.any()):
        return greedy
    keep, z = sampling_keep_mask(logits, temperature, top_k, top_p, min_p)
    g = -torch.log(-torch.log(philox_uniforms(seed, offset, logits.shape[1])))
    drawn = torch.where(keep, z + g, float("-inf")).argmax(-1)
    return torch.where(active, drawn, greedy)


# -- generated inputs (the registry's generic tests) ----------------------------------------------
def random_sampling_params(b: int, v: int, gen: torch.Generator, device="cpu") -> tuple[torch.Tensor, ...]:
    """(temperature, top_k, top_p, min_p, seed, offset) for b rows mixing greedy, plain, and each
    filter alone and combined (row i takes pattern i % 8)."""
    pick = lambda *xs: xs[int(torch.randint(len(xs), (1,), generator=gen))]  # noqa: E731
    rows = []
    for i in range(b):
        t = pick(0.3, 0.7, 1.0, 1.5)
        k = pick(1, 5, 50, 1000, v) if i % 8 in (2, 5, 6, 7) else 0
        p = pick(0.3, 0.8, 0.9, 0.95) if i % 8 in (3, 5, 7) else 1.0
        mp = pick(0.001, 0.05, 0.2) if i % 8 in (4, 6, 7) else 0.0
        rows.append((0.0 if i % 8 == 0 else t, k, p, mp))
    temp, k, p, mp = zip(*rows)
    seed = torch.randint(-2**62, 2**62, (b,), generator=gen)
    offset = torch.randint(0, 2**40, (b,), generator=gen)
    return (torch.tensor(temp, dtype=torch.float32, device=device), torch.tensor(k, dtype=torch.int32, device=device),
            torch.tensor(p, dtype=torch.float32, device=device), torch.tensor(mp, dtype=torch.float32, device=device),
            seed.to(device), offset.to(device))


def sample_inputs(dtype, device, gen) -> list[Case]:
    cases = []
    for b, v, scale in [(8, 1000, 3.0), (2, 32000, 4.0), (5, 1001, 2.0), (8, 7, 1.0)]:  # large V: test_sampling
        x = (torch.randn(b, v, generator=gen) * scale).to(dtype).to(device)
        cases.append(Case(f"B={b} V={v}", (x, *random_sampling_params(b, v, gen, device))))
    x = (torch.randn(8, 4096, generator=gen) * 2).round().to(dtype)  # many ties at every threshold
    x[1, :100] = float("-inf")
    cases.append(Case("ties, -inf B=8 V=4096", (x.to(device), *random_sampling_params(8, 4096, gen, device))))
    wide = (torch.randn(8, 2056, generator=gen) * 3).to(dtype).to(device)
    cases.append(Case("strided rows B=8 V=2048", (wide[:, 8:], *random_sampling_params(8, 2048, gen, device))))
    return cases


# -- the CUDA provider ----------------------------------------------------------------------------
def problem_facts(logits, temperature, top_k, top_p, min_p, seed, offset) -> tuple[torch.Tensor, dict]:
    check_sample_args(logits, temperature, top_k, top_p, min_p, seed, offset)
    return logits, dict(vocab=logits.shape[-1], row_contiguous=logits.stride(-1) == 1,
                        params_contiguous=all(t.is_contiguous()
                                              for t in (temperature, top_k, top_p, min_p, seed, offset)))


def supports_sample(p: Problem) -> list[str]:
    r = _common(p, dtypes=("float16", "float32"))
    v = p.param("vocab", 0)
    _need(r, v <= MAX_VOCAB, f"vocab {v} > {MAX_VOCAB}")
    _need(r, p.param("row_contiguous", True), "logits rows not contiguous (stride(-1) != 1)")
    _need(r, p.param("params_contiguous", True), "per-row parameters (temperature ... offset) not contiguous")
    return r


_SAMPLE = {k: Kernel("sampling.cu", f"sample_{k}", "ppppppppqi") for k in ("f16_v8", "f16_v1", "f32_v4", "f32_v1")}
THREADS = 512  # csrc/sampling.cu SAMPLE_THREADS


def sample_variant(logits: torch.Tensor) -> str:
    """128-bit loads where every row starts 16-byte aligned and V is a multiple of the vector."""
    v, stride = logits.shape[-1], logits.stride(0)
    vec = 8 if logits.dtype == torch.float16 else 4
    wide = v % vec == 0 and stride % vec == 0 and _aligned(logits)
    return f"{'f16' if logits.dtype == torch.float16 else 'f32'}_v{vec if wide else 1}"


def sample_cuda(logits, temperature, top_k, top_p, min_p, seed, offset):
    b, v = logits.shape
    out = _empty((b,), torch.int64, logits.device)
    if b:
        cuda_ops._launch(_SAMPLE[sample_variant(logits)], (b, 1, 1), (THREADS, 1, 1), out.data_ptr(),
                         logits.data_ptr(), temperature.data_ptr(), top_k.data_ptr(), top_p.data_ptr(),
                         min_p.data_ptr(), seed.data_ptr(), offset.data_ptr(), logits.stride(0), v,
                         device=logits.device)
    return out


def register(reg: KernelRegistry) -> None:
    reg.register(Provider("cuda_sample", "sample", sample_cuda, available=available, supports=supports_sample))
