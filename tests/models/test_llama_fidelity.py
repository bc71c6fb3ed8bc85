"""SmolLM2 (GGUF, Llama family): onecat's reference route against HF transformers on the same
file, in float32 on the CPU."""

from __future__ import annotations

import pytest
import torch

from onecat.serve.sampling_params import SamplingParams

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "In 1905, Albert Einstein published",
    "Here is a list of fruits: apple, banana,",
    "Translate to French: 'Good morning, how are you?' ->",
    "The mitochondria is the powerhouse of the cell. Explain why in simple terms:",
    "Q: What is 12 times 12?\nA:",
    "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
]
GEN_TOKENS = 32
CLEAR_GAP = 0.05


@pytest.fixture(scope="module")
def hf_greedy(hf_smollm2):
    model, tok = hf_smollm2
    outs = []
    for p in PROMPTS:
        ids = tok(p, return_tensors="pt").input_ids
        with torch.no_grad():  # plain greedy loop: HF's generate() would stop at, or mask, EOS
            out = model(ids, use_cache=True)
            gen = [int(out.logits[0, -1].argmax())]
            for _ in range(GEN_TOKENS - 1):
                out = model(torch.tensor([[gen[-1]]]), past_key_values=out.past_key_values, use_cache=True)
                gen.append(int(out.logits[0, -1].argmax()))
            full = torch.cat([ids, torch.tensor([gen])], dim=1)
            full_logits = model(full).logits[0].float()
        outs.append((ids[0].tolist(), gen, full_logits))
    return outs


def test_prefill_logits_match_hf(llm, hf_smollm2, hf_greedy):
    for prompt_ids, _, full_logits in hf_greedy:
        ours = llm.engine.runner.score(prompt_ids)
        ref = full_logits[: len(prompt_ids)]
        err = (ours - ref).abs().max().item()
        assert err <= 1e-3 * ref.abs().max().item(), f"max |diff| {err} for prompt of {len(prompt_ids)} tokens"


def test_teacher_forced_argmax_matches_hf_where_clear(llm, hf_greedy):
    near_ties = 0
    for prompt_ids, cont, full_logits in hf_greedy:
        ours = llm.engine.runner.score(prompt_ids + cont)
        top2 = full_logits.topk(2, dim=-1).values
        gap = top2[:, 0] - top2[:, 1]
        clear = gap > CLEAR_GAP
        agree = ours.argmax(-1) == full_logits.argmax(-1)
        assert bool(agree[clear].all()), f"argmax differs at clear positions {(~agree & clear).nonzero().flatten().tolist()}"
        near_ties += int((~clear).sum())
    print(f"near-ties (HF top-2 gap <= {CLEAR_GAP}): {near_ties} positions")


def test_greedy_continuations_match_hf(llm, hf_greedy):
    outs = llm.generate([ids for ids, _, _ in hf_greedy],
                        SamplingParams(temperature=0, max_tokens=GEN_TOKENS, ignore_eos=True))
    diverged = 0
    for (prompt_ids, hf_cont, full_logits), out in zip(hf_greedy, outs):
        ours = out.outputs[0].token_ids
        assert len(ours) == GEN_TOKENS
        for j, (a, b) in enumerate(zip(ours, hf_cont)):
            if a != b:
                top2 = full_logits[len(prompt_ids) + j - 1].topk(2).values
                gap = float(top2[0] - top2[1])
                assert gap <= CLEAR_GAP, f"token {j} differs ({a} vs HF {b}) where HF's top-2 gap is {gap:.3f}"
                diverged += 1
                break  # past a near-tie the two continuations legitimately differ
    print(f"continuations that diverged at a near-tie: {diverged} of {len(PROMPTS)}")
    assert diverged <= 2
