"""s35, CPU: what int8 activations (llama.cpp's q8_1 for its int8 matmuls: per 32-value block of x along K, d =
max|x| / 127, q = round(x / d)) cost a real model's logits, before an int8 MMA GEMM (G3's next question,
_s35_mma_int8_rate.py) is worth building. The embedded SmolLM2-135M-Instruct Q4_1 on the reference route (float32),
teacher-forced over ~1,000 tokens of stdlib docs: every projection's x as is (A), rounded to FP16 (B: what the FP16
GPU route feeds its GEMMs) and int8 per 32-block (C). Against A: top-1 agreement where A's top-2 gap > 0.5 (the
issues' "clear" positions), mean KL(A || X), max |logit diff|, and the text's perplexity.

    python benchmarks/results/h200-2026-12-03-s35/scripts/_s35_int8_act_cpu.py
"""
from __future__ import annotations

import json
import types

import torch
import torch.nn.functional as F

from onecat.kernels import reference
from onecat.serve.llm import LLM


def q8_blocks(x: torch.Tensor) -> torch.Tensor:
    """x with each 32-value block along the last dim quantized to int8 and back (symmetric, round half away)."""
    k = x.shape[-1]
    if k % 32:
        raise ValueError(f"K={k} not a multiple of 32")
    b = x.float().reshape(*x.shape[:-1], k // 32, 32)
    d = b.abs().amax(-1, keepdim=True) / 127
    q = torch.where(d > 0, torch.round(b / torch.where(d > 0, d, 1)), 0).clamp(-127, 127)
    return (q * d).reshape(x.shape).to(x.dtype)


def with_x(transform):
    """reference.F with linear(x, w, b) fed transform(x)."""
    ns = types.SimpleNamespace(**{n: getattr(F, n) for n in dir(F) if not n.startswith("__")})
    ns.linear = lambda x, w, b=None: F.linear(transform(x), w, b)
    return ns


def main() -> None:
    torch.manual_seed(0)
    llm = LLM(progress=False)
    tok = llm.tokenizer
    text = "\n\n".join(m.__doc__ for m in (json, types, F) if m.__doc__)
    ids = tok.encode(text)[:1024]
    runs = {}
    for name, tf in (("A float32 x", None), ("B fp16 x", lambda x: x.half().to(x.dtype)), ("C int8 x / 32", q8_blocks)):
        reference.F = F if tf is None else with_x(tf)
        with torch.no_grad():
            runs[name] = llm.engine.runner.score(ids).float()
    reference.F = F
    a = runs["A float32 x"]
    top2 = a.topk(2, -1).values
    clear = (top2[:, 0] - top2[:, 1]) > 0.5
    tgt = torch.tensor(ids[1:])
    print(f"SmolLM2-135M-Instruct Q4_1, reference route (CPU, float32), {len(ids)} tokens teacher-forced, "
          f"{int(clear.sum())} clear positions (A's top-2 gap > 0.5)")
    print("| x fed to every projection | top-1 = A at clear positions | top-1 = A, all | mean KL(A||X) | "
          "max |logit - A| | PPL |")
    print("|---|---|---|---|---|---|")
    for name, lg in runs.items():
        agree = lg.argmax(-1) == a.argmax(-1)
        kl = F.kl_div(lg.log_softmax(-1), a.log_softmax(-1), log_target=True, reduction="none").sum(-1).mean()
        ppl = torch.exp(F.cross_entropy(lg[:-1], tgt))
        print(f"| {name} | {int(agree[clear].sum())} / {int(clear.sum())} | {float(agree.float().mean()):.4f} | "
              f"{float(kl):.2e} | {float((lg - a).abs().max()):.3f} | {float(ppl):.3f} |")


if __name__ == "__main__":
    main()
