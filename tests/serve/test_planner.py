"""The memory planner against figures computed by hand: SmolLM2 (its real GGUF's tensor sizes and
an FP32 KV cache), a Llama-3-8B shape in Q4_0 on a V100, TP sharding and KV-head replication, and
the Qwen3.8-27B release contract on 4x V100-SXM2-32GB (fits) and 4x V100-SXM2-16GB (does not, by
how much). No weights are loaded and no GPU is used."""

from __future__ import annotations

import math

import pytest
from hydra import compose, initialize_config_dir

from onecat.serve.cli import find_config_dir
from onecat.serve.config_store import finalize, register_configs
from onecat.serve.model_shape import GIB, read_gguf_header
from onecat.serve.planner import plan

CONFIG_DIR = find_config_dir()


def route_for(*overrides: str):
    register_configs()
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        return finalize(compose("config", overrides=list(overrides)))


def by_group(p) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for w in p.weights:
        out[(w.group, w.fmt)] = out.get((w.group, w.fmt), 0) + w.bytes
    return out


# -- SmolLM2-135M: 30 layers, hidden 576, FFN 1536, 9 / 3 heads of 64, vocab 49152, tied ---------------
L, H, I, HQ, HK, D, V = 30, 576, 1536, 9, 3, 64, 49152
LINEAR_PER_LAYER = H * HQ * D + 2 * H * HK * D + HQ * D * H + 3 * H * I  # q, k, v, o, gate, up, down
NORMS = (2 * L + 1) * H


def test_smollm2_weights_are_the_gguf_tensor_sizes(smollm2_path):
    p = plan(route_for("quant.resident=packed"))  # keep the file's formats resident
    q4_1 = L * LINEAR_PER_LAYER * 20 // 32  # Q4_1: 20 bytes per 32 weights (5.0 bits)
    q8_0 = V * H * 34 // 32  # token_embd Q8_0: 34 bytes per 32 (8.5 bits)
    f32 = NORMS * 4
    assert (q4_1, q8_0, f32) == (66_355_200, 30_081_024, 140_544)
    groups = by_group(p)
    assert groups[("attention", "Q4_1")] + groups[("mlp", "Q4_1")] == q4_1
    assert groups[("embedding", "Q8_0")] == q8_0 and groups[("norms", "F32")] == f32
    assert ("lm_head", "Q8_0") not in groups  # tied to the embedding
    assert p.weight_bytes == q4_1 + q8_0 + f32 == p.checkpoint_bytes
    header = read_gguf_header(smollm2_path)
    assert header.total_bytes == p.checkpoint_bytes and len(header.tensors) == 272


def test_smollm2_plan_on_cpu_fp32():
    p = plan(route_for())  # the GGUF kept in its format, 1 GiB KV cache on CPU
    assert p.weight_bytes == 96576768  # the checkpoint's tensor bytes
    dense = plan(route_for("quant.resident=dequantized"))  # dequantized to float32 at load
    assert dense.weight_bytes == (L * LINEAR_PER_LAYER + V * H + NORMS) * 4
    assert p.kv_per_token == 2 * 30 * 3 * 64 * 4 == 46_080 and p.state_per_seq == 0
    assert p.kv_budget_bytes == GIB
    assert p.max_seqs_at_max_len == GIB // (8192 * 46_080) == 2
    four = next(f for f in p.fit_table if f.seqs == 4)
    assert four.max_context == (GIB // 4) // (46_080 * 16) * 16 == 5824
    assert not p.fits and p.short_bytes == 64 * 8192 * 46_080 - GIB  # 64 x 8192 tokens: 22.5 GiB
    text = p.format()
    assert "46080 B/token" in text and "2 (K,V) x 3 KV head(s)/rank x 64 x 4 B x 30 layers" in text
    assert "short by 21.50 GiB" in text and "checkpoint tensors on disk: 96576768 bytes" in text


# -- Llama-3-8B: 32 layers, hidden 4096, FFN 14336, 32 / 8 heads of 128, vocab 128256, untied ------------
def llama_linear() -> int:
    return 32 * (4096 * 4096 * 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336)


def test_llama3_8b_q4_0_on_a_v100_16gb():
    p = plan(route_for("+profile=llama3_8b_q4", "hardware=v100-sxm2-16gb"))
    emb = 128256 * 4096
    q4 = llama_linear() * 18 // 32  # Q4_0: 18 bytes per 32 weights (4.5 bits)
    groups = by_group(p)
    assert groups[("attention", "Q4_0")] + groups[("mlp", "Q4_0")] == q4 == 3_925_868_544
    assert groups[("embedding", "Q4_0")] == emb * 18 // 32
    assert groups[("lm_head", "Q6_K")] == emb * 210 // 256  # output.weight Q6_K: 6.5625 bits
    assert groups[("norms", "F32")] == 65 * 4096 * 4
    assert p.kv_per_token == 2 * 32 * 8 * 128 * 2 == 131_072  # FP16 KV on the V100
    budget = int(0.8 * int(15.78 * GIB))
    assert p.budget_bytes == budget
    assert p.kv_budget_bytes == budget - GIB // 2 - p.weight_bytes - p.activation_bytes - p.graph_bytes
    width = 2 * 4096 + 3 * 14336  # residual + normed + gate_up + act, per token
    assert p.activation_bytes >= 2048 * width * 2
    assert p.max_seqs_at_max_len == p.kv_budget_bytes // (8192 * 131_072)
    assert not p.fits and "DOES NOT FIT: 16 sequences x 8192 tokens" in p.format()


def test_tp_shards_attention_and_mlp_and_states_what_is_replicated():
    one = plan(route_for("model=llama3_8b", "quant=fp16", "hardware=h200"))
    four = plan(route_for("model=llama3_8b", "quant=fp16", "hardware=h200", "hardware.count=4", "parallel=tp4"))
    assert four.kv_per_token * 4 == one.kv_per_token == 2 * 32 * 8 * 128 * 2
    g1, g4 = by_group(one), by_group(four)
    for group in ("attention", "mlp", "embedding", "lm_head"):
        assert g4[(group, "float16")] * 4 == g1[(group, "float16")]
    assert g4[("norms", "float16")] == g1[("norms", "float16")]  # replicated on every rank
    shardings = {(w.group, w.sharding) for w in four.weights}
    assert ("attention", "column /4") in shardings and ("attention", "row /4") in shardings
    assert ("norms", "replicated") in shardings and ("embedding", "vocab /4") in shardings


def test_kv_heads_fewer_than_tp_are_replicated():
    p = plan(route_for("+profile=qwen38_27b", "hardware=h200", "hardware.count=8", "parallel=tp8"))
    assert any("KV heads replicated (4 < TP8" in w.sharding for w in p.weights)
    attn = next(k for k in p.kv if k.what.startswith("full attention"))
    assert attn.per_token == 16 * 2 * 1 * 256 * 1  # one FP8 KV head per rank, 16 attention layers


# -- the release contract --------------------------------------------------------------------------------
GDN_STATE = 48 * (12 * 128 * 128 * 4 + 3 * (2 * 4 * 128 + 12 * 128) * 2)  # per sequence per rank
KV_TOKEN = 16 * 2 * 1 * 256 * 1 + 5 * 2 * 2 * 128 * 2  # FP8 target KV + FP16 draft KV, per rank


def test_qwen38_27b_on_4x_v100_32gb_fits_and_states_its_assumptions():
    p = plan(route_for("+profile=qwen38_27b"))
    r = p.route
    assert (r.tp, r.device.count, r.device.capability, r.max_model_len) == (4, 4, (7, 0), 262_144)
    assert (r.compute_dtype, r.kv_dtype, r.config.kv.block_size, r.config.kv.mamba_block_size) == (
        "float16", "float8_e4m3fn", 2048, 8192)
    assert p.kv_per_token == KV_TOKEN == 13_312 and p.state_per_seq == GDN_STATE == 38_486_016
    assert p.need_bytes == 4 * (262_144 * KV_TOKEN + GDN_STATE)
    assert p.fits and p.kv_budget_bytes > p.need_bytes
    gate_up, down = 2 * 17408 * 5120 // 4, 17408 * 5120 // 4  # per rank (column / row parallel)
    nvfp4 = lambda n: n * 9 // 16 + 4  # noqa: E731  4.5 bits/weight + a float32 global scale per tensor
    assert by_group(p)[("mlp", "nvfp4")] == 64 * (nvfp4(gate_up) + nvfp4(down)) == 2_406_482_432
    assert by_group(p)[("embedding", "float16")] == 248_320 * 5120 * 2 // 4  # vocab-parallel, FP16
    text = p.format()
    for needle in ("fits: 4 sequences x 262144 tokens", "GDN state (48 layers, per sequence)", "Qwen3.5-27B",
                   "assumptions:", "would refuse to start here:", "one live state per sequence",
                   "draft KV (5 layers, float16)", "KV heads"):
        assert needle in text, needle


def test_qwen38_27b_on_4x_v100_16gb_does_not_fit_and_says_by_how_much():
    p = plan(route_for("+profile=qwen38_27b", "hardware=v100-sxm2-16gb"))
    assert not p.fits and p.short_bytes == p.need_bytes - p.kv_budget_bytes > 5 * GIB
    text = p.format()
    assert f"short by {p.short_bytes / GIB:.2f} GiB" in text and "DOES NOT FIT" in text
    one = next(f for f in p.fit_table if f.seqs == 1)
    assert one.max_context == 262_144  # one sequence still gets the whole context
    assert p.max_seqs_at_max_len == 1


def test_weights_that_do_not_fit_say_so():
    p = plan(route_for("+profile=llama3_8b_q4", "quant=fp16", "hardware=v100-sxm2-16gb"))
    assert p.weight_bytes > 14 * GIB and p.kv_budget_bytes < 0
    assert f"exceed the budget by {-p.kv_budget_bytes / GIB:.2f} GiB" in p.format()


@pytest.mark.parametrize("profile", ["flash_next", "gemma3_270m", "qwen3_8b_awq"])
def test_other_profiles_plan(profile):
    p = plan(route_for(f"+profile={profile}"))
    assert p.weight_bytes > 0 and (p.kv_per_token > 0 or p.state_per_seq > 0)
    text = p.format()
    assert "largest that fit" in text
    if profile == "flash_next":
        assert "host memory, off-GPU: 47.70 GiB" in text and "moe" in {w.group for w in p.weights}
        assert math.isclose(p.route.shape.host_bytes / GIB, 47.7, rel_tol=1e-6)
        assert "MTP layer KV" in text and p.route.max_model_len == 131_072
