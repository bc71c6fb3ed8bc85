"""Registry admission on fake devices (cpu, sm70, sm75, sm80, sm90): chosen provider, reasons given
for the others, priority lists, pins, disabled providers, the admission table and the CLI."""

from __future__ import annotations

import functools

import re

import pytest
import torch

from onecat.kernels import build, cuda_ops, ops
from onecat.kernels.__main__ import main
from onecat.kernels.registry import REFERENCE, AdmissionError, KernelRegistry, OpSpec, Problem, Provider, format_admission

CAPS = {"cpu": None, "sm70": (7, 0), "sm75": (7, 5), "sm80": (8, 0), "sm90": (9, 0)}


def prob(dev: str, dtype: str = "float16", op: str = "gemv", **params) -> Problem:
    cap = CAPS[dev]
    return Problem(op, "cpu" if cap is None else "cuda", cap, dtype, tuple(sorted(params.items())))


def needs(min_cap, dtypes, k_multiple=None):
    def supports(p: Problem) -> list[str]:
        r = []
        if p.capability is None:
            r.append(f"device {p.device}")
        elif p.capability < min_cap:
            r.append(f"capability {p.capability[0]}.{p.capability[1]} < {min_cap[0]}.{min_cap[1]}")
        if p.dtype not in dtypes:
            r.append(f"dtype {p.dtype}")
        if k_multiple and p.param("k", 0) % k_multiple:
            r.append(f"k={p.param('k')} not a multiple of {k_multiple}")
        return r
    return supports


@pytest.fixture
def reg() -> KernelRegistry:
    r = KernelRegistry()
    r.declare(OpSpec("gemv", lambda x: ("ref", x)))
    r.register(Provider("volta", "gemv", lambda x: ("volta", x), supports=needs((7, 0), ("float16",))))
    r.register(Provider("ampere", "gemv", lambda x: ("ampere", x), supports=needs((8, 0), ("float16", "bfloat16"))))
    r.register(Provider("hopper", "gemv", lambda x: ("hopper", x), supports=needs((9, 0), ("float16", "bfloat16"), 64)))
    r.configure(priority={"gemv": ["hopper", "ampere", "volta"]})
    return r


@pytest.mark.parametrize("dev,dtype,k,chosen,reasons", [
    ("cpu", "float16", 64, REFERENCE, {"volta": "device cpu", "ampere": "device cpu", "hopper": "device cpu"}),
    ("sm70", "float16", 64, "volta", {"hopper": "capability 7.0 < 9.0", "ampere": "capability 7.0 < 8.0",
                                      REFERENCE: "lower priority than volta"}),
    ("sm75", "float16", 64, "volta", {"hopper": "capability 7.5 < 9.0", "ampere": "capability 7.5 < 8.0"}),
    ("sm80", "float16", 64, "ampere", {"hopper": "capability 8.0 < 9.0", "volta": "lower priority than ampere"}),
    ("sm90", "float16", 64, "hopper", {"ampere": "lower priority than hopper", "volta": "lower priority than hopper"}),
    ("sm90", "float16", 100, "ampere", {"hopper": "k=100 not a multiple of 64"}),
    ("sm70", "bfloat16", 64, REFERENCE, {"volta": "dtype bfloat16", "ampere": "capability 7.0 < 8.0"}),
    ("sm90", "bfloat16", 64, "hopper", {"volta": "lower priority than hopper"}),
])
def test_admission_on_fake_devices(reg, dev, dtype, k, chosen, reasons):
    sel = reg.select(prob(dev, dtype, k=k))
    assert sel.provider.name == chosen
    assert chosen not in sel.refused and set(sel.refused) == set(reg.providers["gemv"]) - {chosen}
    for name, reason in reasons.items():
        assert any(reason in r for r in sel.refused[name]), (name, sel.refused[name])
    assert sel.provider.fn(1)[0] == ("ref" if chosen == REFERENCE else chosen)


def test_priority_list_and_reference_last(reg):
    reg.configure(priority={"gemv": [REFERENCE, "volta", "ampere", "hopper"]})
    assert reg.order("gemv") == ["volta", "ampere", "hopper", REFERENCE]
    assert reg.select(prob("sm90", k=64)).provider.name == "volta"
    reg.configure(priority={"gemv": ["ampere"]})  # unlisted providers follow, by name
    assert reg.order("gemv") == ["ampere", "hopper", "volta", REFERENCE]
    fresh = KernelRegistry()
    fresh.declare(OpSpec("op", lambda: None))
    assert fresh.order("op") == [REFERENCE]


def test_pins(reg):
    reg.configure(pins={"gemv": "ampere"})
    sel = reg.select(prob("sm90", k=64))
    assert sel.provider.name == "ampere"
    assert sel.refused["hopper"] == ["not tried: op pinned to ampere"]
    with pytest.raises(AdmissionError) as e:
        reg.select(prob("sm70"))
    assert "pinned provider 'ampere' refused" in str(e.value) and "capability 7.0 < 8.0" in str(e.value)
    with pytest.raises(AdmissionError) as e:
        reg.select(prob("cpu", "bfloat16"))
    assert "device cpu" in str(e.value)
    with pytest.raises(AdmissionError, match="not registered"):
        reg.configure(pins={"gemv": "nope"})
    with pytest.raises(KeyError):
        reg.configure(pins={"no_such_op": "x"})


def test_disabled(reg):
    reg.configure(priority={"gemv": ["hopper", "ampere", "volta"]}, disabled=["hopper", REFERENCE])
    sel = reg.select(prob("sm90", k=64))
    assert sel.provider.name == "ampere" and sel.refused["hopper"] == ["disabled by configuration"]
    assert reg.select(prob("cpu")).provider.name == REFERENCE  # the reference cannot be disabled
    reg.configure(priority={"gemv": ["hopper", "ampere", "volta"]}, disabled=["hopper", "ampere", "volta"])
    assert reg.select(prob("sm90", k=64)).provider.name == REFERENCE


def test_disabled_by_environment(reg, monkeypatch):
    monkeypatch.setenv("ONECAT_DISABLED_PROVIDERS", "hopper, ampere")
    reg.configure(priority={"gemv": ["hopper", "ampere", "volta"]})
    sel = reg.select(prob("sm90", k=64))
    assert sel.provider.name == "volta"
    assert sel.refused["hopper"] == sel.refused["ampere"] == ["disabled by $ONECAT_DISABLED_PROVIDERS"]
    monkeypatch.setenv("ONECAT_DISABLED_PROVIDERS", "gemv:hopper,other_op:ampere")  # one op's provider only
    reg.configure(priority={"gemv": ["hopper", "ampere", "volta"]})
    sel = reg.select(prob("sm90", k=64))
    assert sel.provider.name == "ampere" and sel.refused["hopper"] == ["disabled by $ONECAT_DISABLED_PROVIDERS"]
    reg.configure(priority={"gemv": ["hopper", "ampere", "volta"]}, disabled=["gemv:hopper"])
    assert reg.select(prob("sm90", k=64)).refused["hopper"] == ["disabled by configuration"]
    monkeypatch.setenv("ONECAT_DISABLED_PROVIDERS", REFERENCE)
    reg.configure(disabled=["volta", "hopper", "ampere"])
    assert reg.select(prob("sm90", k=64)).provider.name == REFERENCE  # never the reference


def test_unavailable_provider_is_not_asked(reg):
    calls = []
    reg.register(Provider("fast", "gemv", lambda x: ("fast", x), available=lambda: ["libfast not installed"],
                          supports=lambda p: calls.append(p) or []))
    reg.configure(priority={"gemv": ["fast", "hopper", "ampere", "volta"]})
    sel = reg.select(prob("sm90", k=64))
    assert sel.provider.name == "hopper" and sel.refused["fast"] == ["libfast not installed"] and not calls
    assert reg.explain(prob("sm90", k=64), check_available=False).provider.name == "fast"


def test_recording_lists_what_a_block_selected_cached_or_not(reg):
    """A CUDA-graph capture judges the selections it used, not every selection of the process."""
    earlier = reg.select(prob("sm70", k=64))
    with reg.recording() as outer:
        a = reg.select(prob("sm80", k=64))
        with reg.recording() as inner:
            b = reg.select(prob("sm80", k=64))  # a cache hit is recorded too
    assert outer == [a, b] and inner == [b] and a is b and earlier not in outer
    reg.select(prob("sm90", k=64))
    assert outer == [a, b]  # closed blocks record nothing more


def test_keyed_selection_is_the_problems_and_follows_configuration(reg):
    """select_keyed (ops._dispatch's fast path) returns select()'s Selection for the problem it was
    first built for, records hits, and is cleared with the cache by configure() / register()."""
    built = []

    def make():
        built.append(1)
        return prob("sm80", k=64)

    first = reg.select_keyed(("gemv", "sm80", 64), make)
    with reg.recording() as used:
        again = reg.select_keyed(("gemv", "sm80", 64), make)
    assert first is again is reg.select(prob("sm80", k=64)) and used == [again] and len(built) == 1
    reg.configure(pins={"gemv": "volta"})
    assert reg.select_keyed(("gemv", "sm80", 64), make).provider.name == "volta" and len(built) == 2
    reg.register(Provider("volta", "gemv", lambda x: x, supports=lambda p: ["replaced"]))
    with pytest.raises(AdmissionError, match="pinned provider 'volta' refused: replaced"):
        reg.select_keyed(("gemv", "sm80", 64), make)


def test_dispatch_key_selects_what_the_problem_selects():
    """ops._dispatch keys its cache by the call's facts: every call shape (rows, dtype, alignment) gets
    the Selection made for its own Problem, never another shape's."""
    from onecat.kernels.weights import random_packed
    w = random_packed(64, 256, "q4_0", torch.Generator().manual_seed(0))
    unaligned = torch.zeros(3 * 256 + 1, dtype=torch.float16)[1:].view(3, 256)  # data_ptr % 16 != 0
    for x in (torch.zeros(3, 256, dtype=torch.float16), torch.zeros(40, 256, dtype=torch.float16),
              torch.zeros(3, 256), unaligned, torch.zeros(3, 256, dtype=torch.float16)):
        with ops.registry.recording() as used:
            ops.linear(x, w)
        assert [s.problem for s in used] == [ops.problem("linear", x, w)]


def test_cache_and_declaration_errors(reg):
    p = prob("sm80", k=64)
    assert reg.select(p) is reg.select(p) and reg.selections() == [reg.select(p)]
    reg.register(Provider("ampere", "gemv", lambda x: x, supports=lambda p: ["replaced"]))
    assert reg.select(p).provider.name == "volta"  # registering clears the cache
    with pytest.raises(ValueError):
        reg.declare(OpSpec("gemv", lambda x: x))
    with pytest.raises(KeyError):
        reg.register(Provider("x", "unknown", lambda: None))
    with pytest.raises(KeyError):
        reg.select(prob("sm70", op="unknown"))


def test_format_admission(reg):
    text = format_admission([reg.select(prob(d, k=64)) for d in ("cpu", "sm70", "sm90")])
    lines = text.splitlines()
    assert "gemv[sm70, float16, k=64]" in lines
    i = lines.index("gemv[sm70, float16, k=64]")
    assert lines[i + 1].split() == ["volta", "ADMITTED"]
    assert any(line.split()[:2] == ["ampere", "refused"] and "capability 7.0 < 8.0" in line for line in lines[i:i + 5])
    assert "gemv[cpu, float16, k=64]" in lines


# -- the real registry's CUDA providers, judged for fake devices --------------------------------
@functools.lru_cache(maxsize=None)
def _facts(op: str, dtype: str, case: int) -> dict:
    c = ops.registry.ops[op].make_inputs(getattr(torch, dtype), "cpu", torch.Generator().manual_seed(0))[case]
    return dict(ops.problem(op, *c.args, **c.kwargs).params)


def real(op: str, dev: str, dtype="float16", case: int = 0, **override):
    params = _facts(op, dtype, case) | override
    cap = CAPS[dev]
    p = Problem(op, "cpu" if cap is None else "cuda", cap, dtype, tuple(sorted(params.items())))
    return ops.registry.explain(p, check_available=False)


@pytest.mark.parametrize("dev,chosen", [("cpu", REFERENCE), ("sm70", "cuda"), ("sm75", "cuda"),
                                         ("sm80", "cuda"), ("sm90", "cuda")])
def test_real_cuda_providers(dev, chosen):
    for op in ["rms_norm", "rotary_embedding", "silu_and_mul", "gelu_and_mul", "linear", "reshape_and_cache", "argmax"]:
        assert real(op, dev).provider.name == chosen, op
    want = REFERENCE if chosen != "cuda" else "cuda_decode_rd" if dev in ("sm80", "sm90") else "cuda_split_kv"
    assert real("paged_attention", dev, phase="decode").provider.name == want  # sm_80+: register-direct decode
    assert real("paged_attention", dev, phase="verify").provider.name == (
        "cuda_split_kv" if chosen == "cuda" else REFERENCE)


def test_real_linear_routes():
    assert real("linear", "sm70", rows=1, n=4096, k=4096).provider.name == "cuda"
    sel = real("linear", "sm70", rows=8, n=4096, k=4096)
    assert sel.provider.name == "cuda_hmma" and sel.refused["cuda"] == ["lower priority than cuda_hmma"]
    sel = real("linear", "sm70", rows=8, n=4100, k=4096)
    assert sel.provider.name == "cuda" and "N=4100 not a multiple of 32" in sel.refused["cuda_hmma"]
    sel = real("linear", "sm70", rows="17-64")
    assert sel.provider.name == REFERENCE and any("M <= 16" in r for r in sel.refused["cuda"])
    sel = real("linear", "sm70", k=1001)
    assert sel.provider.name == REFERENCE and "K=1001 not a multiple of 8" in sel.refused["cuda"]
    sel = real("linear", "sm70", case=-1)  # a GGUF Q8_0 weight at M=11
    assert sel.provider.name == "cuda" and any("dense-only" in r for r in sel.refused["cuda_hmma"])


def test_real_refusal_reasons():
    p = Problem("rms_norm", "cuda", (6, 1), "float16", (("hidden", 4096),))
    assert "capability 6.1 < 7.0" in ops.registry.explain(p, check_available=False).refused["cuda"]
    sel = real("rms_norm", "sm70", "bfloat16")
    assert sel.provider.name == REFERENCE and any("Volta has no BF16" in r for r in sel.refused["cuda"])
    sel = real("gelu_and_mul", "sm70", approximate="fast")
    assert sel.provider.name == REFERENCE and "approximate='fast'" in sel.refused["cuda"]
    if not torch.cuda.is_available():  # on this machine, availability itself refuses
        x = torch.zeros(2, 8, dtype=torch.float16)
        sel = ops.registry.select(ops.problem("silu_and_mul", x))
        assert sel.provider.name == REFERENCE and any("no CUDA device" in r for r in sel.refused["cuda"])


def test_missing_nvrtc_reason(monkeypatch):
    monkeypatch.setattr(build, "toolchains", lambda: ())
    build.toolchain.cache_clear()
    cuda_ops.available.cache_clear()
    try:
        assert any("pip install nvidia-cuda-nvrtc-cu12==12.9.86" in r for r in cuda_ops.available())
        assert any("NVRTC 12.9 not installed" in r for r in build.toolchain_reasons(70))
    finally:
        build.toolchain.cache_clear()
        cuda_ops.available.cache_clear()


def test_cli_explain(capsys):
    assert main(["explain", "--device", "sm70", "--dtype", "float16", "--op", "linear", "--param", "rows=8",
                 "--param", "n=4096", "--param", "k=4096"]) == 0
    out = capsys.readouterr().out
    assert "linear[sm70, float16" in out and re.search(r"cuda_hmma +ADMITTED", out) and "lower priority than cuda_hmma" in out
    assert main(["explain", "--device", "sm75"]) == 0
    out = capsys.readouterr().out
    assert all(f"{op}[sm75" in out for op in ops.registry.ops)
    try:
        assert main(["explain", "--device", "cpu", "--op", "rms_norm", "--pin", "rms_norm=cuda"]) == 1
        assert "AdmissionError" in capsys.readouterr().out
    finally:  # the CLI configured the process-wide registry: undo the pin
        ops.registry.pins.pop("rms_norm", None)
        ops.registry.clear_cache()


def test_cli_sources_prints_resource_use_per_kernel(capsys):
    assert main(["sources", "--source", "rotary.cu", "--arch", "70"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("rotary.cu sm_70") and "rotary_cache_neox_v8" in out and "spills 0/0" in out
    with pytest.raises(SystemExit, match="unknown source 'nope.cu'"):
        main(["sources", "--source", "nope.cu"])
