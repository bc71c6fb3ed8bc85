"""Quantized weights as kernels see them.

`GGUFWeight`: rows of ggml blocks exactly as a GGUF file stores them (a memory-mapped tensor can
be handed over unchanged). Supported block types (K a multiple of the block):

  q4_0  18 B / 32: fp16 d, 16 bytes: low nibbles weights 0..15, high nibbles 16..31; w = d*(q-8)
  q4_1  20 B / 32: fp16 d, fp16 m, 16 nibble bytes as q4_0;                          w = d*q + m
  q8_0  34 B / 32: fp16 d, 32 int8;                                                  w = d*q
  q4_k 144 B / 256: fp16 d, fp16 dmin, 12 bytes of 6-bit (scale, min) pairs, 128 nibble bytes;
                    w = (d*sc[j])*q - (dmin*mn[j]), j = e // 32
  q6_k 210 B / 256: ql[128], qh[64], int8 scales[16], fp16 d;  w = (d*sc[e//16])*(q6 - 32)

`PackedWeight` (`pack(...)`, `pack_awq(...)`): the same values re-laid out ONCE at load for the
packed GEMV (csrc/gemv_packed.cu), every plane row-major over N so a warp's lanes read consecutive
16-byte chunks of one row (LDG.E.128), one 16-byte chunk = 32 four-bit weights:

  q     uint8 [N, K/2] (4-bit formats) or int8 as uint8 [N, K] (q8_0). 4-bit: each 32-bit word holds
        8 consecutive weights e=0..7 at bit offsets NIBBLE_SHIFT = (0,16,4,20,8,24,12,28), so
        (v & 0x000F000F) | 0x64006400 is the fp16 pair (1024+q0, 1024+q1), (v & 0x00F000F0) | 0x6400..
        is (1024+16q2, 1024+16q3), and v >> 8 gives weights 4..7 the same way.
  qh    uint8 [N, K/4] (q6_k only): the 2 high bits of each weight, two 8-weight groups per 32-bit
        word (group A in bits 4..11/20..27, group B rotated by 8: see `_q6_hi_word`).
  meta  per-chunk or per-group scales, uint8 [N, groups * bytes]:
        q4_0 / q8_0: fp16 d per 32;  q4_1: (fp16 d, fp16 m) per 32;
        q4_k: 16 bytes per 256: fp16 d, fp16 dmin, then the 8 (scale, min) 6-bit pairs re-laid out
              as 8 little-endian 12-bit fields (sc_j | mn_j << 6) at bit 12 j (`_k4_fields`), so a
              kernel extracts chunk j's pair with one funnel shift (GGUF interleaves them);
        q6_k: (int8 sc0, int8 sc1, fp16 d) per 32;  awq: (fp16 s, fp16 1024 + z) per group.

`.dequantize()` of a PackedWeight does the original format's float32 arithmetic, so it is
bit-identical with the GGUF / AutoAWQ decode (tests check this against onecat.quant and gguf-py).

`RowParts`: one projection's rows held as consecutive parts in different formats (a fused q/k/v whose
v a Q4_K_M file stores in q6_k, q and k in q4_k), so the projection is still one weight object.

This module does not import onecat.quant (the dependency points the other way).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

BLOCK = 32
BLOCK_OF = {"q4_0": 32, "q4_1": 32, "q8_0": 32, "q4_k": 256, "q6_k": 256}
BYTES_PER_BLOCK = {"q4_0": 18, "q4_1": 20, "q8_0": 34, "q4_k": 144, "q6_k": 210}
NIBBLE_SHIFT = (0, 16, 4, 20, 8, 24, 12, 28)
PACKED_FORMATS = ("q4_0", "q4_1", "q8_0", "q4_k", "q6_k", "awq")


def _f16(b: torch.Tensor) -> torch.Tensor:
    """[..., 2] uint8 -> [...] float32 (little-endian fp16 bits)."""
    return b.contiguous().view(torch.float16).float().squeeze(-1)


def _nib32(qs: torch.Tensor) -> torch.Tensor:
    """GGUF q4_0/q4_1 16 qs bytes [..., 16] -> [..., 32] codes (low nibbles first)."""
    return torch.cat([qs & 0xF, qs >> 4], dim=-1)


def _k4_scale_min(sc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """12 packed bytes [..., 12] -> 6-bit (scale, min) int64 [..., 8] each (ggml get_scale_min_k4)."""
    b = sc.to(torch.int64)
    d, m, md = b[..., 0:4], b[..., 4:8], b[..., 8:12]
    s = torch.cat([d & 63, (md & 15) | ((d >> 6) << 4)], dim=-1)
    mn = torch.cat([m & 63, (md >> 4) | ((m >> 6) << 4)], dim=-1)
    return s, mn


def _k4_fields(sc: torch.Tensor, mn: torch.Tensor) -> torch.Tensor:
    """6-bit (scale, min) int64 [..., 8] each -> uint8 [..., 12]: field j = sc_j | mn_j << 6 at bit 12 j."""
    f = sc | (mn << 6)
    bits = torch.zeros(f.shape[:-1], dtype=torch.int64, device=f.device)
    words = [bits.clone() for _ in range(3)]
    for j in range(8):
        off = 12 * j
        w, b = divmod(off, 32)
        words[w] |= (f[..., j] << b) & 0xFFFFFFFF
        if b + 12 > 32:
            words[w + 1] |= f[..., j] >> (32 - b)
    return torch.cat([_words_to_bytes(w) for w in words], dim=-1)


def _k4_unfields(b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 [..., 12] (`_k4_fields`) -> (scale, min) int64 [..., 8] each."""
    words = [_bytes_to_words(b[..., 4 * i:4 * i + 4]) for i in range(3)] + [torch.zeros_like(b[..., 0], dtype=torch.int64)]
    f = []
    for j in range(8):
        w, off = divmod(12 * j, 32)
        f.append(((words[w] >> off) | (words[w + 1] << (32 - off))) & 0xFFF)  # the kernel's funnel shift
    f = torch.stack(f, dim=-1)
    return f & 63, f >> 6


def _gguf_codes(raw: torch.Tensor, t: str, n: int, k: int):
    """Decode GGUF blocks into integer codes and per-block float32 parameters."""
    bl = raw.view(n, k // BLOCK_OF[t], BYTES_PER_BLOCK[t])
    if t == "q4_0":
        return dict(q=_nib32(bl[..., 2:18]), d=_f16(bl[..., 0:2]))
    if t == "q4_1":
        return dict(q=_nib32(bl[..., 4:20]), d=_f16(bl[..., 0:2]), m=_f16(bl[..., 2:4]))
    if t == "q8_0":
        return dict(q=bl[..., 2:34].contiguous().view(torch.int8), d=_f16(bl[..., 0:2]))
    if t == "q4_k":
        qs = bl[..., 16:144].reshape(n, -1, 4, 1, 32)
        q = torch.cat([qs & 0xF, qs >> 4], dim=-2).reshape(n, -1, 256)  # e -> 32*(e//64)+e%32, >>4*((e%64)//32)
        sc, mn = _k4_scale_min(bl[..., 4:16])
        return dict(q=q, d=_f16(bl[..., 0:2]), dmin=_f16(bl[..., 2:4]), sc=sc, mn=mn, head=bl[..., 0:16])
    if t == "q6_k":
        ql = bl[..., 0:128].reshape(n, -1, 2, 1, 64)
        lo = torch.cat([ql & 0xF, ql >> 4], dim=-2).reshape(n, -1, 256)
        qh = bl[..., 128:192].reshape(n, -1, 2, 1, 32)
        hi = torch.cat([(qh >> s) & 3 for s in (0, 2, 4, 6)], dim=-2).reshape(n, -1, 256)
        return dict(q=lo | (hi << 4), sc=bl[..., 192:208].contiguous().view(torch.int8), d=_f16(bl[..., 208:210]))
    raise ValueError(t)


def _dequant_codes(t: str, c: dict, n: int, k: int) -> torch.Tensor:
    """float32 [N, K], with the exact float32 operations of ggml / gguf-py."""
    if t == "q4_0":
        return (c["d"][..., None] * (c["q"].float() - 8.0)).reshape(n, k)
    if t == "q4_1":
        return (c["d"][..., None] * c["q"].float() + c["m"][..., None]).reshape(n, k)
    if t == "q8_0":
        return (c["q"].float() * c["d"][..., None]).reshape(n, k)
    if t == "q4_k":
        dl = (c["d"][..., None] * c["sc"].float())[..., None]  # [n, nb, 8, 1]
        ml = (c["dmin"][..., None] * c["mn"].float())[..., None]
        q = c["q"].reshape(n, -1, 8, 32).float()
        return (dl * q - ml).reshape(n, k)
    if t == "q6_k":
        dl = (c["d"][..., None] * c["sc"].float())[..., None]  # [n, nb, 16, 1]
        return (dl * (c["q"].float() - 32).reshape(n, -1, 16, 16)).reshape(n, k)
    raise ValueError(t)


@dataclass
class GGUFWeight:
    raw: torch.Tensor  # uint8 [N, K / block * bytes_per_block]
    ggml_type: str  # see BYTES_PER_BLOCK
    shape: tuple[int, int]  # logical (N, K)

    def __post_init__(self) -> None:
        self.ggml_type = self.ggml_type.lower()
        if self.ggml_type not in BYTES_PER_BLOCK:
            raise ValueError(f"unsupported GGUF type {self.ggml_type!r} (have {sorted(BYTES_PER_BLOCK)})")
        n, k = self.shape = tuple(int(s) for s in self.shape)
        blk = BLOCK_OF[self.ggml_type]
        if k % blk:
            raise ValueError(f"K={k} is not a multiple of the {blk}-weight GGUF block")
        want = (n, k // blk * BYTES_PER_BLOCK[self.ggml_type])
        if self.raw.dtype != torch.uint8 or tuple(self.raw.shape) != want:
            raise ValueError(f"raw must be uint8 {want}, got {self.raw.dtype} {tuple(self.raw.shape)}")

    @property
    def format(self) -> str:
        return f"gguf_{self.ggml_type}"

    @property
    def device(self) -> torch.device:
        return self.raw.device

    @property
    def nbytes(self) -> int:
        return self.raw.numel()

    def to(self, device) -> "GGUFWeight":
        return GGUFWeight(self.raw.to(device), self.ggml_type, self.shape)

    def clone(self) -> "GGUFWeight":
        return GGUFWeight(self.raw.clone(), self.ggml_type, self.shape)

    def select_rows(self, rows) -> "GGUFWeight":
        """The output rows `rows` (a slice, or int64 ids): the block bytes are row-major over N."""
        raw = self.raw[rows]
        return GGUFWeight(raw, self.ggml_type, (raw.shape[0], self.shape[1]))

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """[N, K] weights in `dtype` (computed in float32)."""
        n, k = self.shape
        return _dequant_codes(self.ggml_type, _gguf_codes(self.raw, self.ggml_type, n, k), n, k).to(dtype)

    @classmethod
    def random(cls, n: int, k: int, ggml_type: str = "q4_0", generator: torch.Generator | None = None,
               device="cpu", scale: float = 0.02) -> "GGUFWeight":
        """Random valid blocks (finite scales around `scale`), for tests and benchmarks."""
        t = ggml_type.lower()
        nb = k // BLOCK_OF[t]
        gen = generator

        def f16(lo, hi, signed=True):
            v = torch.rand(n, nb, 1, generator=gen) * (hi - lo) + lo
            if signed:
                v = torch.where(torch.rand(n, nb, 1, generator=gen) < 0.5, v, -v)
            return v.half().view(torch.uint8)

        def rb(count):
            return torch.randint(0, 256, (n, nb, count), dtype=torch.uint8, generator=gen)

        if t in ("q4_0", "q8_0"):
            parts = [f16(scale / 4, scale * 1.25), rb(BYTES_PER_BLOCK[t] - 2)]
        elif t == "q4_1":
            parts = [f16(scale / 4, scale * 1.25, False), f16(0, 8 * scale), rb(16)]
        elif t == "q4_k":  # d, dmin positive; 6-bit scales/mins anywhere in 0..63
            parts = [f16(scale / 64, scale / 16, False), f16(0, scale / 16, False), rb(140)]
        else:  # q6_k: ql, qh, int8 scales, d > 0
            parts = [rb(192), rb(16), f16(scale / 256, scale / 64, False)]
        raw = torch.cat(parts, dim=-1).reshape(n, -1)
        return cls(raw.to(device), t, (n, k))


# -- packed layout -------------------------------------------------------------------------------
def _pack_nibbles(q: torch.Tensor) -> torch.Tensor:
    """codes [N, K] (0..15, logical order) -> uint8 [N, K/2] in the NIBBLE_SHIFT word layout."""
    n, k = q.shape
    g = q.reshape(n, k // 8, 8).to(torch.int64)
    word = torch.zeros(n, k // 8, dtype=torch.int64, device=q.device)
    for e, s in enumerate(NIBBLE_SHIFT):
        word |= g[..., e] << s
    return _words_to_bytes(word).reshape(n, k // 2)


def _unpack_nibbles(b: torch.Tensor, n: int, k: int) -> torch.Tensor:
    word = _bytes_to_words(b.reshape(n, k // 8, 4))
    return torch.stack([(word >> s) & 0xF for s in NIBBLE_SHIFT], dim=-1).reshape(n, k)


def _words_to_bytes(word: torch.Tensor) -> torch.Tensor:
    return torch.stack([(word >> (8 * i)) & 0xFF for i in range(4)], dim=-1).to(torch.uint8)


def _bytes_to_words(b: torch.Tensor) -> torch.Tensor:
    b = b.to(torch.int64)
    return b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16) | (b[..., 3] << 24)


# Q6_K high bits: for an 8-weight group, weight e's 2 bits sit at _Q6_POS[e] (low bit), so that
# (h & 0x00300030) / (h & 0x03000300) line up with the nibble words above and h >> 2 serves
# weights 4..7. Group B of a word is stored rotated left by 8 (read back with a rotate right by 8).
_Q6_POS = (4, 20, 8, 24, 6, 22, 10, 26)


def _q6_hi_word(ha: torch.Tensor, hb: torch.Tensor) -> torch.Tensor:
    """two [.., 8] 2-bit groups -> int64 word."""
    w = torch.zeros(ha.shape[:-1], dtype=torch.int64, device=ha.device)
    for e, p in enumerate(_Q6_POS):
        w |= ha[..., e].to(torch.int64) << p
        w |= hb[..., e].to(torch.int64) << ((p + 8) % 32)
    return w


def _q6_hi_unword(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    a = torch.stack([(w >> p) & 3 for p in _Q6_POS], dim=-1)
    b = torch.stack([(w >> ((p + 8) % 32)) & 3 for p in _Q6_POS], dim=-1)
    return a, b


@dataclass
class PackedWeight:
    """Planes of one quantized [N, K] matrix for the packed GEMV (layout in the module doc)."""

    kind: str  # one of PACKED_FORMATS
    shape: tuple[int, int]
    q: torch.Tensor
    meta: torch.Tensor
    qh: torch.Tensor | None = None
    group_size: int = 32  # awq: the scale group along K

    @property
    def format(self) -> str:
        return f"packed_{self.kind}"

    @property
    def device(self) -> torch.device:
        return self.q.device

    @property
    def planes(self) -> list[torch.Tensor]:
        return [p for p in (self.q, self.qh, self.meta) if p is not None]

    @property
    def nbytes(self) -> int:
        """Bytes one GEMV pass must read (every plane once)."""
        return sum(p.numel() * p.element_size() for p in self.planes)

    def to(self, device) -> "PackedWeight":
        return PackedWeight(self.kind, self.shape, self.q.to(device), self.meta.to(device),
                            None if self.qh is None else self.qh.to(device), self.group_size)

    def clone(self) -> "PackedWeight":
        return PackedWeight(self.kind, self.shape, self.q.clone(), self.meta.clone(),
                            None if self.qh is None else self.qh.clone(), self.group_size)

    def select_rows(self, rows) -> "PackedWeight":
        """The output rows `rows` (a slice, or int64 ids): every plane is row-major over N."""
        q = self.q[rows]
        return PackedWeight(self.kind, (q.shape[0], self.shape[1]), q, self.meta[rows],
                            None if self.qh is None else self.qh[rows], self.group_size)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """[N, K] in `dtype`, float32 arithmetic of the original format (bit-exact with its decode)."""
        n, k = self.shape
        dev = self.q.device  # decoded where the planes are (a GPU prefill must not round-trip the host)
        q, meta = self.q, self.meta
        t = self.kind
        if t == "q8_0":
            codes = q.view(torch.int8).reshape(n, k // 32, 32)
        elif t == "q6_k":
            lo = _unpack_nibbles(q, n, k).reshape(n, k // 16, 16)
            a, b = _q6_hi_unword(_bytes_to_words(self.qh.reshape(n, k // 16, 4)))
            codes = lo | (torch.cat([a, b], dim=-1) << 4)
        else:
            codes = _unpack_nibbles(q, n, k)
        if t == "q4_0":
            c = dict(q=codes.reshape(n, k // 32, 32), d=_f16(meta.reshape(n, -1, 2)))
        elif t == "q4_1":
            m4 = meta.reshape(n, -1, 4)
            c = dict(q=codes.reshape(n, k // 32, 32), d=_f16(m4[..., 0:2]), m=_f16(m4[..., 2:4]))
        elif t == "q8_0":
            c = dict(q=codes, d=_f16(meta.reshape(n, -1, 2)))
        elif t == "q4_k":
            h = meta.reshape(n, -1, 16)
            sc, mn = _k4_unfields(h[..., 4:16])
            c = dict(q=codes.reshape(n, k // 256, 256), d=_f16(h[..., 0:2]), dmin=_f16(h[..., 2:4]), sc=sc, mn=mn)
        elif t == "q6_k":
            m4 = meta.reshape(n, k // 256, 8, 4)
            sc = m4[..., 0:2].contiguous().view(torch.int8).reshape(n, k // 256, 16)
            c = dict(q=codes.reshape(n, k // 256, 256), sc=sc, d=_f16(m4[:, :, 0, 2:4]))
        else:  # awq: (q - z) * s, integer difference then one float32 multiply
            g = self.group_size
            m4 = meta.reshape(n, k // g, 4)
            s = _f16(m4[..., 0:2])
            z = _f16(m4[..., 2:4]).to(torch.int64) - 1024
            w = (codes.reshape(n, k // g, g).to(torch.int64) - z[..., None]).float() * s[..., None]
            return w.reshape(n, k).to(dtype).to(dev)
        return _dequant_codes(t, c, n, k).to(dtype).to(dev)


def pack(weight: GGUFWeight) -> PackedWeight:
    """GGUF blocks -> PackedWeight (done once at load, with torch ops on the weight's own device)."""
    t = weight.ggml_type
    n, k = weight.shape
    dev = weight.raw.device
    c = _gguf_codes(weight.raw, t, n, k)  # on the weight's device: a GPU packs 8B of weights in seconds
    qh = None
    f16b = lambda v: v.half().contiguous().view(torch.uint8).reshape(n, -1)  # noqa: E731
    if t == "q8_0":
        q = c["q"].reshape(n, k).contiguous().view(torch.uint8)
        meta = f16b(c["d"].reshape(n, -1, 1))
    elif t == "q6_k":
        codes = c["q"].reshape(n, k)
        q = _pack_nibbles(codes & 0xF)
        hi = (codes >> 4).reshape(n, k // 16, 2, 8)
        qh = _words_to_bytes(_q6_hi_word(hi[:, :, 0], hi[:, :, 1])).reshape(n, k // 4)
        nb = k // 256
        sc = c["sc"].reshape(n, nb, 8, 2).contiguous().view(torch.uint8)
        d = c["d"].reshape(n, nb, 1, 1).half().view(torch.uint8).expand(n, nb, 8, 2)
        meta = torch.cat([sc, d], dim=-1).reshape(n, -1).contiguous()
    else:
        q = _pack_nibbles(c["q"].reshape(n, k))
        if t == "q4_0":
            meta = f16b(c["d"].reshape(n, -1, 1))
        elif t == "q4_1":
            meta = f16b(torch.stack([c["d"], c["m"]], dim=-1))
        else:  # q4_k: d, dmin and the (scale, min) pairs as 12-bit fields
            meta = torch.cat([c["head"][..., 0:4], _k4_fields(c["sc"], c["mn"])], dim=-1).reshape(n, -1).contiguous()
    return PackedWeight(t, (n, k), q.contiguous().to(dev), meta.contiguous().to(dev),
                        None if qh is None else qh.contiguous().to(dev), 32)


AWQ_PACK_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


def _awq_unpack(packed: torch.Tensor) -> torch.Tensor:
    """int32 [R, C] (AutoAWQ interleaved) -> int64 [R, 8C]."""
    p = packed.to(torch.int64) & 0xFFFFFFFF
    r, cols = p.shape
    out = torch.empty(r, cols, 8, dtype=torch.int64, device=packed.device)
    for i, col in enumerate(AWQ_PACK_ORDER):
        out[..., col] = (p >> (4 * i)) & 0xF
    return out.reshape(r, cols * 8)


def pack_awq(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor, group_size: int = 128) -> PackedWeight:
    """AutoAWQ GEMM tensors (qweight int32 [K, N/8], qzeros int32 [K/G, N/8], scales fp16 [K/G, N])
    -> PackedWeight; W[n, k] = (q - z) * s. The interleaved nibble order is undone here, once."""
    dev = qweight.device
    k, n = qweight.shape[0], qweight.shape[1] * 8
    g = group_size
    if k % g or g % 32:
        raise ValueError(f"AWQ: K={k} must be a multiple of group_size={g}, itself a multiple of 32")
    q = _awq_unpack(qweight).t().contiguous()  # [N, K]
    z = _awq_unpack(qzeros).t()  # [N, K/G]
    s = scales.to(torch.float16).t()
    meta = torch.stack([s, (z + 1024).to(torch.float16)], dim=-1).contiguous().view(torch.uint8).reshape(n, -1)
    return PackedWeight("awq", (n, k), _pack_nibbles(q).to(dev), meta.contiguous().to(dev), None, g)


def random_awq(n: int, k: int, group_size: int = 128, generator: torch.Generator | None = None, device="cpu",
               scale: float = 0.02) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random valid AutoAWQ tensors (qweight, qzeros, scales)."""
    qw = torch.randint(-2**31, 2**31, (k, n // 8), dtype=torch.int64, generator=generator).to(torch.int32)
    qz = torch.randint(-2**31, 2**31, (k // group_size, n // 8), dtype=torch.int64, generator=generator).to(torch.int32)
    s = (torch.rand(k // group_size, n, generator=generator) * scale / 8 + scale / 32).half()
    return qw.to(device), qz.to(device), s.to(device)


def random_packed(n: int, k: int, kind: str, generator: torch.Generator | None = None, device="cpu",
                  scale: float = 0.02) -> PackedWeight:
    """A random PackedWeight of `kind` (packed from random GGUF blocks / AWQ tensors, scales around `scale`)."""
    if kind == "awq":
        return pack_awq(*random_awq(n, k, 128, generator, scale=scale), 128).to(device)
    return pack(GGUFWeight.random(n, k, kind, generator, scale=scale)).to(device)


@dataclass(eq=False)  # identity equality: the parts hold tensors, whose `==` is elementwise
class RowParts:
    """One projection's rows held as consecutive parts in different formats: rows [0, n0) are parts[0]'s,
    [n0, n0 + n1) parts[1]'s, and so on, every part with the same K. A part is a dense [n, K] tensor or a
    quantized weight object (PackedWeight, GGUFWeight, onecat.quant's GGMLWeight / CodecWeight, ...).

    Why one object: a fused projection (q/k/v, gate/up) whose parts a checkpoint stores in formats that
    cannot be concatenated without requantizing still goes to the ops as one weight, so model code never
    branches on formats and a fused op sees the whole projection (ops' problem facts: format "row_parts"
    and `parts`, each part's (format, rows)). ops.linear runs each part through its own provider
    (row_parts_ops); the torch reference goes part by part too (reference.linear: the same calls, so the same bits on
    any CPU), and `dequantize` decodes the concatenation for whoever needs it whole.
    """

    parts: tuple

    def __post_init__(self) -> None:
        self.parts = tuple(self.parts)
        if len(self.parts) < 2:
            raise ValueError(f"RowParts needs at least 2 parts, got {len(self.parts)}")
        if any(isinstance(p, RowParts) for p in self.parts):
            raise ValueError("RowParts parts must not be RowParts themselves")
        shapes = [tuple(p.shape) for p in self.parts]
        if any(len(s) != 2 for s in shapes) or len({s[1] for s in shapes}) != 1:
            raise ValueError(f"RowParts parts must be [N, K] matrices of one K (columns), got shapes {shapes}")

    @property
    def format(self) -> str:
        return "row_parts"

    @property
    def part_formats(self) -> tuple[str, ...]:
        return tuple(getattr(p, "format", "dense") for p in self.parts)

    @property
    def part_rows(self) -> tuple[int, ...]:
        return tuple(int(p.shape[0]) for p in self.parts)

    @property
    def shape(self) -> tuple[int, int]:
        return sum(self.part_rows), int(self.parts[0].shape[1])

    @property
    def device(self) -> torch.device:
        return self.parts[0].device

    @property
    def nbytes(self) -> int:
        return sum(p.numel() * p.element_size() if isinstance(p, torch.Tensor) else p.nbytes for p in self.parts)

    def to(self, device) -> "RowParts":
        return RowParts(tuple(p.to(device) for p in self.parts))

    def linear_by_parts(self, linear, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """`linear(x, part, its rows of bias)` for each part, concatenated along N: the row_parts provider (linear =
        ops.linear) and the torch reference (its own linear) both, so on the CPU they make the same calls."""
        biases = bias.split(self.part_rows) if bias is not None else (None,) * len(self.parts)
        return torch.cat([linear(x, part, b) for part, b in zip(self.parts, biases)], dim=-1)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """[N, K] in `dtype`: each part's decode (a dense part converted), concatenated."""
        return torch.cat([p.to(dtype) if isinstance(p, torch.Tensor) else p.dequantize(dtype) for p in self.parts])
