"""Admission reports built from a route without running the model: faked devices (cpu, sm70,
sm90), the table and its reasons, strict mode and `expect` refusing with readable messages,
command-line overrides (`kv=...`, `kernels.<op>=`, pins, disabled) changing what is admitted, and
`GET /v1/onecat/acceleration` on a running server (the session's one SmolLM2 engine)."""

from __future__ import annotations

import httpx
import pytest
from hydra import compose, initialize_config_dir

from onecat.serve.admission import admit, fake_device, layer_kernels
from onecat.serve.api_server import build_app
from onecat.serve.async_llm import AsyncLLM
from onecat.serve.cli import check_startable, find_config_dir
from onecat.serve.config import ServerConfig
from onecat.serve.config_store import finalize, register_configs

CONFIG_DIR = find_config_dir()
KEY = "accel-key"


def route_for(*overrides: str):
    register_configs()
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        return finalize(compose("config", overrides=list(overrides)))


def rows(report, site: str) -> list:
    return [r for r in report.rows if r.site == site]


def test_cpu_admits_the_torch_reference_everywhere_and_says_why_not_cuda():
    rep = admit(route_for(), fake_device("cpu"))
    assert rep.device == "cpu" and rep.fake and not rep.failures
    assert {r.status for r in rep.rows} == {"admitted"}
    joined = {"o_proj+gate_up_proj", "down_proj+qkv_proj"}  # two ops in sequence: each of its own sites' provider
    assert {r.provider for r in rep.rows if r.site not in joined} == {"torch"}
    assert {(r.site, r.op, r.provider) for r in rep.rows if r.site in joined} == {
        ("o_proj+gate_up_proj", "linear_rms_norm_linear", "unfused"),
        ("down_proj+qkv_proj", "linear_rms_norm_qkv_rotary_cache", "unfused")}
    assert all(r.layers == list(range(1, 30)) for r in rows(rep, "down_proj+qkv_proj"))
    sites = {r.site for r in rep.rows}
    assert {"final_norm", "qkv_proj", "attention", "o_proj", "gate_up_proj", "down_proj", "lm_head"} <= sites
    assert not {"input_norm", "rope_kv_write"} & sites  # Llama: norms, rotary and cache write ride on qkv / gate_up
    norm = rows(rep, "final_norm")[0]
    assert "device is cpu, not a CUDA GPU" in norm.refused["cuda"]
    assert "hidden=576" in norm.problem and norm.layers == []
    assert {r.op for r in rows(rep, "o_proj") + rows(rep, "down_proj")} == {"linear"}
    assert {r.op for r in rows(rep, "qkv_proj")} == {"rms_norm_qkv_rotary_cache"}
    assert {r.op for r in rows(rep, "gate_up_proj")} == {"rms_norm_linear"}
    first = [r for r in rows(rep, "qkv_proj") if r.layers == [0]]  # the embedding: no residual to add yet
    assert first and all("residual_dtype=" not in r.facts for r in first)
    assert all("residual_dtype=float32" in r.facts for r in rows(rep, "gate_up_proj"))
    assert all("act=silu_and_mul" in r.facts for r in rows(rep, "gate_up_proj"))
    assert all(r.layers == list(range(30)) for r in rows(rep, "down_proj"))
    table = rep.table()
    assert "admission for smollm2 on cpu" in table and "x cuda: device is cpu, not a CUDA GPU" in table


def test_sm70_and_sm90_route_fp16_ops_to_gpu_kernels_and_flag_reference_fallbacks():
    route = route_for()
    for dev in ("sm70", "sm90"):
        rep = admit(route, fake_device(dev))
        norm = rows(rep, "final_norm")[0]
        assert norm.provider != "torch" and norm.status == "admitted" and f"[{dev}, float16" in norm.problem
        for site in ("qkv_proj", "gate_up_proj"):  # the normed-input GEMV at one row, else unfused
            one = next(r for r in rows(rep, site) if "rows=1," in r.problem)
            many = next(r for r in rows(rep, site) if "rows=65+" in r.problem)  # the prefill's tokens
            assert one.provider == "cuda_gemv_norm" and one.phases == ["decode"], (site, one)
            assert many.provider == "unfused" and "M=65+" in " ".join(many.refused["cuda_gemv_norm"])
        prefill = [r for r in rows(rep, "o_proj") if "prefill" in r.phases][0]
        decode = [r for r in rows(rep, "o_proj") if r.phases == ["decode"] and "rows=1," in r.problem][0]
        assert decode.provider != "torch"  # the GEMV covers one row
        if prefill.provider == "torch":  # a GEMV-only route: prefill falls back, and the report says so
            assert prefill.status == "fallback" and "[reference fallback]" in rep.table()
            assert any("covers M <= 16" in " ".join(r) for r in prefill.refused.values())
        assert not rep.failures  # not strict: fallbacks are reported, not refused


def test_strict_refuses_reference_fallbacks_with_readable_reasons():
    route = route_for("kernels=strict", "quant.resident=dequantized")  # dense weights: M > 16 has no GPU GEMM
    rep = admit(route, fake_device("sm70"))
    assert rep.strict
    fallbacks = [r for r in rep.rows if r.status == "fallback"]
    assert fallbacks and len(rep.failures) >= len(fallbacks)
    msg = rep.failures[0]
    assert "no admitted GPU" in msg and "on sm70" in msg and "(only the torch reference)" in msg
    with pytest.raises(SystemExit) as e:
        check_startable(route, fake_device("sm70"))
    text = str(e.value)
    assert text.startswith("onecat-serve: refusing to start 'smollm2'") and "no admitted GPU" in text
    assert "plan=true" in text
    assert not admit(route, fake_device("cpu")).failures  # on the CPU the reference is the route


def test_expect_refuses_when_another_provider_is_admitted():
    route = route_for("+profile.expect={rms_norm: torch, linear@decode: torch}")
    assert not route.strict  # expect alone checks only what it names
    rep = admit(route, fake_device("sm70"))
    assert rep.failures and all(f.startswith("profile.expect ") for f in rep.failures)
    norm = next(f for f in rep.failures if f.startswith("profile.expect rms_norm=torch: final_norm"))
    assert "admits cuda on sm70 for rms_norm[sm70, float16, hidden=576" in norm
    assert any(f.startswith("profile.expect linear@decode=torch: o_proj (decode)") for f in rep.failures)
    assert not admit(route, fake_device("cpu")).failures  # met on the CPU


def test_expect_accepts_alternatives_and_the_q4_profile_starts():
    """An expect value "a | b" holds when either is admitted; a name no provider has is a config error.
    llama3_8b_q4 expects the packed kernels at decode: the GEMV at one row, a GEMM for its 16-row batch
    (register-direct on sm90, the shared-memory tiles on sm70)."""
    route = route_for("+profile=llama3_8b_q4")
    for dev, batch in (("sm70", "cuda_pack_gemm"), ("sm90", "cuda_pack_gemm_rd")):
        rep = admit(route, fake_device(dev))
        assert not rep.failures, rep.failures
        o = {r.provider for r in rows(rep, "o_proj") if r.phases == ["decode"]}
        assert o == {"cuda_pack", batch}, (dev, o)
    rep = admit(route_for("+profile=llama3_8b_q4", "profile.expect={linear@decode: cuda_pack | torch}"),
                fake_device("sm90"))
    bad = [f for f in rep.failures if "rows=16" in f]
    assert bad and "cuda_pack: lower priority than cuda_pack_gemm_rd; torch: lower priority" in bad[0]
    with pytest.raises(Exception, match=r"profile.expect.linear@decode=cuda_packk: no such provider"):
        route_for("+profile=llama3_8b_q4", "profile.expect={linear@decode: cuda_pack | cuda_packk}")


def test_kv_override_changes_what_is_admitted():
    default = admit(route_for(), fake_device("sm70"))
    fp8 = admit(route_for("kv=fp8_e4m3"), fake_device("sm70"))
    def decode_qkv(rep):
        return next(r for r in rows(rep, "qkv_proj") if "rows=1," in r.problem and r.layers != [0])

    a, b = decode_qkv(default), decode_qkv(fp8)
    assert "kv_dtype=float16" in a.problem and "kv_dtype=float8_e4m3fn" in b.problem
    assert a.provider == b.provider == "cuda_gemv_norm"  # the fused epilogue writes FP8 caches too
    att = {r.problem for r in rows(fp8, "attention")}
    assert all("kv_dtype=float8_e4m3fn" in p for p in att)
    route = route_for("kv=fp8_e4m3")
    assert route.kv_dtype == "float8_e4m3fn" and route.unavailable == []  # the engine allocates FP8 caches
    other = route_for("kv.dtype=bfloat16", "model.dtype=float16")  # neither the compute dtype nor FP8
    assert any("kv.dtype=bfloat16" in u for u in other.unavailable), other.unavailable


def test_ngram_speculation_adds_verify_problems():
    route = route_for("spec=ngram", "scheduler.max_num_seqs=2")
    assert route.unavailable == []  # the engine drafts with n-grams
    rep = admit(route, fake_device("sm70"))
    verify = [r for r in rep.rows if "verify" in r.phases]
    assert {r.site for r in verify} >= {"attention", "qkv_proj", "lm_head"}
    qkv = next(r for r in verify if r.site == "qkv_proj")
    assert "rows=12" in qkv.facts  # 2 sequences x (5 drafts + 1)
    assert any("phase=verify" in r.facts for r in verify if r.site == "attention")


@pytest.mark.parametrize("override", ["kernels.rms_norm=torch", "+kernels.pins.rms_norm=torch",
                                      "kernels.disabled=[cuda]"])
def test_kernel_overrides_change_what_is_admitted(override):
    rep = admit(route_for(override, "quant.resident=dequantized"), fake_device("sm70"))
    norm = rows(rep, "final_norm")[0]
    assert norm.provider == "torch"
    reasons = " ".join(" ".join(r) for r in norm.refused.values())
    if "disabled" in override:
        assert norm.refused["cuda"] == ["disabled by configuration"]
    else:
        assert "not tried: op pinned to torch" in reasons
    head = next(r for r in rows(rep, "o_proj") if r.phases == ["decode"])  # dense weights, M = 1: the GEMV
    if "disabled" in override:  # disabling a provider name disables it for every op
        assert head.provider == "torch" and head.refused["cuda"] == ["disabled by configuration"]
    else:
        assert head.provider == "cuda"  # other ops are untouched


def test_priority_override_reorders_gpu_providers():
    def decode8(*extra):  # 8 sequences: the decode GEMM has M = 8, where the tensor-core GEMV pays
        rep = admit(route_for("scheduler.max_num_seqs=8", "quant.resident=dequantized", *extra), fake_device("sm70"))
        return next(r for r in rows(rep, "o_proj") if "rows=8," in r.problem)

    default, swapped = decode8(), decode8("+kernels.priority.linear=[cuda,cuda_hmma]")
    assert default.provider == "cuda_hmma" and swapped.provider == "cuda"
    assert swapped.refused["cuda_hmma"] == ["lower priority than cuda"]


def test_the_same_overrides_reach_the_engines_registry():
    from onecat.kernels import registry
    from onecat.serve.config_store import configure_kernels, to_configs

    register_configs()
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["kernels.rms_norm=torch", "kernels.disabled=[cuda_hmma]"])
    saved = dict(registry.pins), set(registry.disabled)
    try:
        configure_kernels(to_configs(cfg)[2])  # what `onecat-serve` does before loading the model
        assert registry.pins["rms_norm"] == "torch" and registry.disabled == {"cuda_hmma"}
    finally:
        registry.pins.clear()
        registry.pins.update(saved[0])
        registry.disabled = saved[1]
        registry.clear_cache()


def test_a_pin_that_is_refused_is_an_error_that_refuses_the_start():
    route = route_for("kernels.rms_norm=cuda")  # pinned, but the CPU has no CUDA
    rep = admit(route, fake_device("cpu"))
    norm = rows(rep, "final_norm")[0]
    assert norm.status == "error" and norm.provider is None and "pinned provider 'cuda' refused" in norm.note
    with pytest.raises(SystemExit, match="kernels.pins.rms_norm"):
        check_startable(route, fake_device("cpu"))


def test_unknown_ops_and_providers_are_config_errors():
    from onecat.serve.config_store import RouteError

    with pytest.raises(RouteError) as e:
        route_for("+kernels.pins.rms_norm=no_such_provider", "+kernels.priority.no_such_op=[torch]")
    assert len(e.value.problems) == 2
    assert "no such provider" in str(e.value) and "unknown op" in str(e.value)


def test_ops_the_registry_lacks_are_rows_without_a_provider():
    rep = admit(route_for("+profile=qwen38_27b"), fake_device("sm90"))
    missing = {r.op for r in rep.rows if r.status == "missing"}
    assert {"gated_delta_rule", "causal_conv1d", "all_reduce", "dflash_draft"} <= missing
    gdn = rows(rep, "gdn.gated_delta_rule")[0]
    assert gdn.provider is None and len(gdn.layers) == 48 and "value_heads=12" in gdn.facts
    assert any("no gated_delta_rule op in onecat.kernels" in f for f in rep.failures)  # the profile is strict
    linear = [r for r in rep.rows if r.op == "linear" and "format=nvfp4" in r.problem]
    assert linear and all(r.status == "fallback" for r in linear)  # no NVFP4 GEMM yet: stated, per site


# -- the served report -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(llm, serve_app):
    """The session's SmolLM2 engine (no second load) behind a keyed server, with the CLI's route."""
    alm = AsyncLLM(llm.engine)
    alm.route = route_for("+profile=smollm2")
    with serve_app(build_app(alm, ServerConfig(api_key=KEY))) as s:
        yield s, alm


def test_acceleration_endpoint_serves_the_report(served):
    server, alm = served
    assert httpx.get(server.url + "/v1/onecat/acceleration").status_code == 401  # behind the key
    auth = {"Authorization": f"Bearer {KEY}"}
    r = httpx.post(server.url + "/v1/completions", headers=auth,
                   json={"prompt": "The capital of France is", "max_tokens": 2, "temperature": 0}, timeout=120)
    assert r.status_code == 200
    body = httpx.get(server.url + "/v1/onecat/acceleration", headers=auth, timeout=60).json()
    assert body["route"].startswith("smollm2: model smollm2 (llama)") and body["device"] == "cpu"
    assert not body["fake"] and body["unavailable"] == [] and body["failures"] == []
    sites = {row["site"] for row in body["admission"]}
    assert {"qkv_proj", "attention", "lm_head"} <= sites
    attn = next(row for row in body["admission"] if row["site"] == "attention")
    assert attn["provider"] == "torch" and attn["layers"] == "0-29" and "cuda" in " ".join(attn["refused"])
    # after load: the kernels each layer used, matched from the runtime selections
    # (layer 0's qkv takes the embedding; the others take the down projection in front with it, as one op)
    assert [g["layers"] for g in body["layers"]] == ["0", "1-29"]
    kernels = body["layers"][0]["kernels"]
    assert kernels["qkv_proj"] == "torch" and kernels["attention"] == "torch"
    assert "down_proj+qkv_proj" not in kernels and body["layers"][1]["kernels"]["down_proj+qkv_proj"] == "unfused"
    for group in body["layers"]:  # every constructed problem met its runtime twin
        assert "(not called yet)" not in group["kernels"].values(), group
    assert body["runtime"] and all(row["provider"] for row in body["runtime"])


def test_layer_kernels_name_what_the_engine_ran(served, llm):
    _, alm = served
    rep = admit(alm.route, fake_device("cpu"))
    groups = layer_kernels(alm.route, rep)
    assert groups[0]["type"] == "attention" and set(groups[0]["kernels"].values()) == {"torch", "unfused"}
    assert {s for s, p in groups[0]["kernels"].items() if p == "unfused"} == {"o_proj+gate_up_proj"}
