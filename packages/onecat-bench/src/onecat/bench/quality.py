"""Quality gates kept beside every number.

    onecat-bench quality --segments 8 --segment-len 256 --reference hf --out results.jsonl

- Perplexity over fixed real-text segments (the first pydoc_data.topics entries, in sorted key
  order, long enough for the segment length; each segment its topic's first N tokens): onecat's
  logits (`ModelRunner.score`) against a reference route's on the same token ids. The reference
  is HF transformers on the same GGUF (dequantized to float32). Gate: |PPL / PPL_ref - 1| <= 0.1%.
- Greedy agreement, teacher-forced on the same segments: the fraction of positions where both
  routes' top-1 token agree, counted where the reference's top-1/top-2 logit gap exceeds
  `gap` (near-ties may flip on rounding alone), and over every position.
- Behaviour on a fixed small chat prompt set (greedy): natural-stop rate (finish "stop"),
  capped outputs (finish "length"), and invalid JSON among the prompts that ask for JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
from dataclasses import dataclass
from typing import Callable

import torch

from .contract import MEASURED, Machine, Metric, Quality, Record, Sampling, Workload
from .workloads import topic_texts

Scorer = Callable[[list[int]], torch.Tensor]  # token ids -> logits [T, V] (float32)

PPL_TOLERANCE = 1e-3
GAP = 0.5

# Fixed behaviour prompts: (messages, asks_for_json). Greedy; short answers expected.
BEHAVIOUR_PROMPTS: list[tuple[list[dict], bool]] = [
    ([{"role": "user", "content": "What is the capital of France?"}], False),
    ([{"role": "user", "content": "Name three primary colors."}], False),
    ([{"role": "user", "content": "What is 12 plus 30? Answer with the number only."}], False),
    ([{"role": "user", "content": "Say hello in Spanish."}], False),
    ([{"role": "user", "content": "Write one sentence about the sea."}], False),
    ([{"role": "user", "content": 'Return only a JSON object with the keys "city" and "country" for Paris. '
                                  "No other text."}], True),
    ([{"role": "user", "content": 'Reply with only JSON: {"name": <a first name>, "age": <a number>}.'}], True),
    ([{"role": "user", "content": "Give a JSON list of three fruits, and nothing else."}], True),
]


def text_segments(tokenizer, num: int, length: int) -> list[list[int]]:
    """`num` segments of exactly `length` token ids from real text (deterministic)."""
    segs = []
    for _, text in topic_texts():
        ids = tokenizer.encode(text, add_special_tokens=False)
        if len(ids) >= length:
            segs.append(ids[:length])
            if len(segs) == num:
                return segs
    raise ValueError(f"only {len(segs)} topics have {length} tokens; asked for {num}")


def nll(logits: torch.Tensor, ids: list[int]) -> tuple[float, int]:
    """Summed negative log-likelihood of ids[1:] under logits[:-1], and the token count."""
    lp = torch.log_softmax(logits[:-1].double(), dim=-1)
    target = torch.tensor(ids[1:], dtype=torch.long, device=lp.device)
    return float(-lp.gather(1, target[:, None]).sum()), len(ids) - 1


@dataclass
class RouteScores:
    ppl: float
    per_segment: list[float]
    argmax: list[torch.Tensor]  # per segment [T]
    gap: list[torch.Tensor]  # top-1 minus top-2 logit per position


def score_route(scorer: Scorer, segments: list[list[int]]) -> RouteScores:
    total, count, per, am, gaps = 0.0, 0, [], [], []
    for ids in segments:
        logits = scorer(ids).float().cpu()
        s, n = nll(logits, ids)
        total, count = total + s, count + n
        per.append(math.exp(s / n))
        top2 = logits.topk(2, dim=-1)
        am.append(top2.indices[:, 0])
        gaps.append(top2.values[:, 0] - top2.values[:, 1])
    return RouteScores(math.exp(total / count), per, am, gaps)


def ppl_gate(route: Scorer, reference: Scorer, segments: list[list[int]], tolerance: float = PPL_TOLERANCE,
             gap: float = GAP, reference_name: str = "reference") -> Quality:
    a, b = score_route(route, segments), score_route(reference, segments)
    agree_all = torch.cat([x == y for x, y in zip(a.argmax, b.argmax)])
    clear = torch.cat([g > gap for g in b.gap])
    rel = a.ppl / b.ppl - 1.0
    return Quality(ppl=a.ppl, ppl_reference=b.ppl, reference=reference_name, ppl_rel_diff=rel,
                   ppl_tolerance=tolerance,
                   greedy_agreement=float(agree_all[clear].float().mean()) if clear.any() else None,
                   greedy_agreement_all=float(agree_all.float().mean()), passed=abs(rel) <= tolerance,
                   details={"per_segment_ppl": a.per_segment, "per_segment_ppl_reference": b.per_segment,
                            "clear_positions": int(clear.sum()), "positions": int(clear.numel()), "gap": gap})


# -- scorers ---------------------------------------------------------------------------------------
def onecat_scorer(llm) -> Scorer:
    return llm.engine.runner.score


def hf_scorer(model) -> Scorer:
    @torch.no_grad()
    def score(ids: list[int]) -> torch.Tensor:
        return model(torch.tensor([ids])).logits[0].float()

    return score


def load_hf(path: str):
    from transformers import AutoModelForCausalLM

    d, f = os.path.split(path)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    return model.eval()


# -- behaviour -------------------------------------------------------------------------------------
def is_valid_json(text: str) -> bool:
    t = text.strip()
    m = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", t, flags=re.S)
    if m:
        t = m.group(1)
    try:
        json.loads(t)
        return True
    except ValueError:
        return False


def behaviour_gates(outputs: list[tuple[str, str | None]], wants_json: list[bool]) -> Quality:
    """outputs: (text, finish_reason) per prompt, in BEHAVIOUR_PROMPTS order."""
    stops = sum(1 for _, r in outputs if r == "stop")
    capped = sum(1 for _, r in outputs if r == "length")
    bad = sum(1 for (t, _), j in zip(outputs, wants_json) if j and not is_valid_json(t))
    return Quality(natural_stop_rate=stops / len(outputs), capped_outputs=capped, invalid_json=bad,
                   json_prompts=sum(wants_json),
                   details={"outputs": [{"text": t[:200], "finish_reason": r} for t, r in outputs]})


def behaviour_offline(llm, max_tokens: int = 64, prompts=BEHAVIOUR_PROMPTS) -> Quality:
    from onecat.serve.sampling_params import SamplingParams

    outs = llm.chat([m for m, _ in prompts], SamplingParams(temperature=0.0, max_tokens=max_tokens, seed=0))
    return behaviour_gates([(o.outputs[0].text, o.outputs[0].finish_reason) for o in outs], [j for _, j in prompts])


def behaviour_online(base_url: str, model: str | None = None, max_tokens: int = 64, prompts=BEHAVIOUR_PROMPTS,
                     timeout: float = 120.0, api_key: str | None = None) -> Quality:
    import httpx

    outs = []
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(timeout=timeout, headers=headers) as c:
        for messages, _ in prompts:
            body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0.0, "seed": 0}
            if model:
                body["model"] = model
            try:
                r = c.post(base_url.rstrip("/") + "/v1/chat/completions", json=body)
                ch = r.json()["choices"][0]
                outs.append((ch["message"]["content"] or "", ch.get("finish_reason")))
            except Exception as e:  # recorded as a non-stop, non-JSON answer
                outs.append((f"<error {type(e).__name__}: {e}>", "error"))
    return behaviour_gates(outs, [j for _, j in prompts])


def merge(*qs: Quality) -> Quality:
    out = Quality()
    details = {}
    for q in qs:
        for k, v in vars(q).items():
            if k == "details":
                details.update(v)
            elif v is not None:
                setattr(out, k, v)
    out.details = details
    passed = [q.passed for q in qs if q.passed is not None]
    out.passed = all(passed) if passed else None
    return out


def quality_record(llm, quality: Quality, segments: list[list[int]] | None, max_tokens: int | None) -> Record:
    from .offline import model_info, runtime_info

    metrics: dict[str, Metric] = {}
    if quality.ppl is not None:
        per = quality.details.get("per_segment_ppl") or [quality.ppl]
        # median: the PPL of all segments together; min/max: the per-segment extremes
        metrics["ppl"] = Metric("ppl", quality.ppl, min(per), max(per), len(per), over="segments")
    for name in ("greedy_agreement", "natural_stop_rate"):
        v = getattr(quality, name)
        if v is not None:
            metrics[name] = Metric("fraction", v, v, v, 1, over="run")
    for name in ("capped_outputs", "invalid_json"):
        v = getattr(quality, name)
        if v is not None:
            metrics[name] = Metric("count", float(v), float(v), float(v), 1, over="run")
    return Record(engine="onecat (in-process)", kind=MEASURED, metrics=metrics, model=model_info(llm),
                  workload=Workload(kind="quality", dataset="pydoc_data.topics segments + fixed prompt set",
                                    input_len=len(segments[0]) if segments else None,
                                    num_prompts=len(segments) if segments else None, output_len=max_tokens),
                  runtime=runtime_info(llm, "n/a (scoring uses a scratch cache)"),
                  sampling=Sampling(temperature=0.0, seed=0, max_tokens=max_tokens), quality=quality,
                  machine=Machine.current())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="onecat-bench quality", description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF (default: the embedded SmolLM2)")
    ap.add_argument("--segments", type=int, default=8)
    ap.add_argument("--segment-len", type=int, default=256)
    ap.add_argument("--reference", choices=["hf", "none"], default="hf")
    ap.add_argument("--tolerance", type=float, default=PPL_TOLERANCE)
    ap.add_argument("--max-tokens", type=int, default=64, help="behaviour prompts: generation cap")
    ap.add_argument("--no-behaviour", action="store_true")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--report", default=None)
    a = ap.parse_args(argv)
    from onecat.models.loader import default_model_path
    from onecat.serve.llm import LLM

    if a.threads:
        torch.set_num_threads(a.threads)
    path = a.model or default_model_path()
    llm = LLM(path, progress=False)
    segs = text_segments(llm.tokenizer, a.segments, a.segment_len)
    parts = []
    if a.reference == "hf":
        parts.append(ppl_gate(onecat_scorer(llm), hf_scorer(load_hf(path)), segs, a.tolerance,
                              reference_name="HF transformers, same GGUF, float32"))
    else:
        s = score_route(onecat_scorer(llm), segs)
        parts.append(Quality(ppl=s.ppl, details={"per_segment_ppl": s.per_segment}))
    if not a.no_behaviour:
        parts.append(behaviour_offline(llm, a.max_tokens))
    q = merge(*parts)
    rec = quality_record(llm, q, segs, None if a.no_behaviour else a.max_tokens)
    print(quality_text(q))
    from .report import emit

    emit([rec], a.out, a.report, None)
    if q.passed is False:
        raise SystemExit(1)


def quality_text(q: Quality) -> str:
    lines = []
    if q.ppl is not None:
        lines.append(f"PPL {q.ppl:.4f}" + (f" vs {q.reference} {q.ppl_reference:.4f} (rel {q.ppl_rel_diff:+.2e}, "
                                           f"tolerance {q.ppl_tolerance:.0e}: {'PASS' if q.passed else 'FAIL'})"
                                           if q.ppl_reference is not None else ""))
    if q.greedy_agreement is not None:
        lines.append(f"greedy agreement {q.greedy_agreement:.4f} where the reference's top-2 gap > "
                     f"{q.details.get('gap')} ({q.details.get('clear_positions')}/{q.details.get('positions')} "
                     f"positions); {q.greedy_agreement_all:.4f} over all")
    if q.natural_stop_rate is not None:
        lines.append(f"natural stops {q.natural_stop_rate:.2f}, capped outputs {q.capped_outputs}, "
                     f"invalid JSON {q.invalid_json}/{q.json_prompts}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
