"""The three decode peers, each measured the same way on the same shapes (see peers.py).

  * onecat: its engine (`onecat.serve.llm.LLM`) on the synthesized GGUF file, greedy, ignore_eos,
    prefix caching off (so every call prefills afresh), batch 1 and batch B (B prompts at once).
  * HF transformers: `LlamaForCausalLM` of the same shape, FP16 weights generated on the device
    by HF's own initializer (HF reads a Q4 GGUF only by dequantizing it on the CPU, minutes for 8B:
    FP16 is HF's route), SDPA attention, default dynamic cache, greedy `generate`.
  * llama.cpp: `llama-bench` (pp512, tg128 at depth 0 and 512, -r repeats, all layers on the GPU,
    flash attention on) and `llama-batched-bench` (npp 512, ntg 128, npl B) on the same GGUF file.

HF decode tok/s = B * (N - 1) / (t(generate N) - t(generate 1)): the prompt's prefill and the first
token cancel out; one value per repeat, each repeat with fresh random prompt ids. onecat on a GPU times
its decode phase from the engine's steps, as llama-batched-bench times its own: from the step at which
every request has its first token to the last, over the tokens generated in it (`decode_phase`); the
difference's rate is kept beside it (on a CPU it is the rate).
llama.cpp reports its own per-repeat tok/s (llama-bench) and one decode-phase rate per batch
(llama-batched-bench: B * ntg / decode time). Each runner returns `DecodeResult`s as JSON, so
peers.py can run it in a child process (a crash or an out-of-memory stays there).

    python -m onecat.bench.peer_runners hf --shape llama3-8b --json out.json
    python -m onecat.bench.peer_runners onecat --gguf f.gguf --shape llama3-8b --format Q4_0 \
        --batch 1 32 64 --json out.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

from .synth_gguf import SHAPES


@dataclass
class DecodeResult:
    engine: str
    shape: str
    weight_format: str  # what the engine ran: "GGUF Q4_0", "fp16", ...
    batch: int
    prompt_len: int  # context when decoding starts
    gen: int  # tokens generated per sequence
    tok_s: list[float]  # decode tok/s per repeat (aggregate over the batch)
    prefill_tok_s: list[float] = field(default_factory=list)
    load_s: float | None = None
    details: dict = field(default_factory=dict)  # versions, route, graph mode, commands, ...


def _note(msg: str) -> None:
    """Progress on stderr: a child cut short by its time limit still shows how far it got."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


TIMING_TRIES = 3  # measurements of a (t(generate 1), t(generate N)) pair before giving up on it


def positive_pair(time_one, time_gen, gen: int, what: str):
    """(t1, tn, value) from time_one() -> seconds of generate 1 and time_gen() -> (seconds of generate gen,
    its value), measured again (up to TIMING_TRIES times) while tn <= t1: a short decode within the host's
    timing noise (a stall in the first) would give a negative or infinite rate; if it never clears, a
    RuntimeError says so. The decode rate is then (gen - 1) tokens per (tn - t1)."""
    if gen < 2:
        raise ValueError(f"{what}: a decode rate from t(generate {gen}) - t(generate 1) needs gen >= 2")
    for _ in range(TIMING_TRIES):
        t1 = time_one()
        tn, value = time_gen()
        if tn > t1:
            return t1, tn, value
        _note(f"{what}: t(generate {gen}) {tn * 1e3:.2f} ms <= t(generate 1) {t1 * 1e3:.2f} ms (timing noise), "
              "measuring again")
    raise RuntimeError(f"{what}: t(generate {gen}) never exceeded t(generate 1) in {TIMING_TRIES} tries (last "
                       f"{tn * 1e3:.2f} <= {t1 * 1e3:.2f} ms): {gen - 1} decode steps are within this host's timing "
                       "noise; generate more tokens")


def _timed_rates(generate, batch: int, gen: int, repeats: int, sync) -> tuple[list[float], list[float], list[float]]:
    """Per-repeat decode tok/s and prefill tok/s from t(generate 1) and t(generate gen), and the
    decode tok/s by that difference (positive_pair: measured again while it is not positive). Where
    `generate` returns its decode phase as (tokens, seconds) (the engine's own steps: from the step at
    which every request has its first token to the last), the decode rate is those tokens over those
    seconds instead: the prompt prefill (in both timed runs, ~15% of a batch-1 smollm2 run), its
    run-to-run spread and, at batch > 1, the decode rows that chunked prefill runs beside other prompts'
    chunks stay out of it, as llama-bench's tg runs and llama-batched-bench's decode phase leave them out."""
    generate(0, gen)  # warm-up, full length: kernels compiled / autotuned, allocator and caches grown
    rates, prefill, by_difference = [], [], []
    _note(f"warmed up; {repeats} repeats at batch {batch}")
    for rep in range(repeats):
        def timed(n: int, rep: int = rep):
            sync()
            t = time.perf_counter()
            value = generate(rep + 1, n)
            sync()
            return time.perf_counter() - t, value

        t1, tn, phase = positive_pair(lambda: timed(1)[0], lambda: timed(gen), gen, f"batch {batch} repeat {rep}")
        by_difference.append(batch * (gen - 1) / (tn - t1))
        rates.append(phase[0] / phase[1] if phase else by_difference[-1])
        prefill.append(t1)
        _note(f"batch {batch} repeat {rep}: {rates[-1]:.1f} tok/s (by t(gen) - t(1): {by_difference[-1]:.1f})")
    return rates, prefill, by_difference


# -- HF transformers ----------------------------------------------------------------------------------
def run_hf(shape: str, device: str, prompt_len: int, gen: int, repeats: int, seed: int = 0) -> list[DecodeResult]:
    import torch
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    spec = SHAPES[shape]
    dev = torch.device("cuda" if device == "auto" and torch.cuda.is_available() else
                       ("cpu" if device == "auto" else device))
    dtype = torch.float16 if dev.type == "cuda" else torch.float32
    cfg = LlamaConfig(**spec.hf_config(), bos_token_id=None, eos_token_id=None, pad_token_id=0)
    torch.manual_seed(seed)
    t = time.perf_counter()
    with torch.device(dev):
        model = LlamaForCausalLM._from_config(cfg, dtype=dtype, attn_implementation="sdpa")
    model.eval()
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    sync()
    load_s = time.perf_counter() - t
    _note(f"HF model of shape {shape} built in {load_s:.1f} s")
    bad = [n for n, p in model.named_parameters() if not torch.isfinite(p).all()]
    if bad:
        raise RuntimeError(f"HF model of shape {shape}: non-finite generated weights in {bad[:3]}")
    gen_cfg = dict(do_sample=False, pad_token_id=0, eos_token_id=None, use_cache=True)

    def generate(rep: int, n: int) -> None:
        g = torch.Generator().manual_seed(seed * 1000 + rep)
        ids = torch.randint(0, spec.vocab, (1, prompt_len), generator=g).to(dev)
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                                 **gen_cfg)
        if out.shape[1] != prompt_len + n:
            raise RuntimeError(f"HF generate returned {out.shape[1] - prompt_len} new tokens, asked {n}")

    rates, t1s, _ = _timed_rates(generate, 1, gen, repeats, sync)
    details = {"transformers": transformers.__version__, "torch": torch.__version__, "device": str(dev),
               "dtype": str(dtype).removeprefix("torch."), "attn_implementation": "sdpa",
               "cache": "DynamicCache (default)", "graph_mode": "eager",
               "weights": "generated on the device by HF's initializer (normal, std 0.02)",
               "prefill_measure": "t(generate 1): prompt prefill + one token",
               "decode_measure": "(gen - 1) / (t(generate gen) - t(generate 1))"}
    return [DecodeResult("hf-transformers", shape, f"{details['dtype']} (generated)", 1, prompt_len, gen, rates,
                         [prompt_len / t for t in t1s], load_s, details)]


# The paged cache's element on each side (peers --kv): fp16 as each engine has it by default; 8bit: onecat's E4M3
# cache against llama.cpp's q8_0 one (its nearest; it has no FP8 cache), so both read ~1 byte an element.
KV_TYPES = {"fp16": ("auto", "f16"), "8bit": ("float8_e4m3fn", "q8_0")}


def _llama_kv_args(kv: str) -> list[str]:
    return [] if kv == "fp16" else ["-ctk", KV_TYPES[kv][1], "-ctv", KV_TYPES[kv][1]]


# -- onecat -------------------------------------------------------------------------------------------
def run_onecat(gguf: str, shape: str, fmt: str, device: str, prompt_len: int, gen: int, repeats: int,
               batches: list[int], batched_repeats: int | None = None, seed: int = 0,
               on_result=None, async_scheduling: bool | None = None, kv: str = "fp16",
               prefill_first: bool = False) -> list[DecodeResult]:
    import random

    import torch

    from onecat.serve import config as serve_config
    from onecat.serve.llm import LLM
    from onecat.serve.sampling_params import SamplingParams

    from .offline import model_info, runtime_info

    spec = SHAPES[shape]
    cfg = serve_config.EngineConfig(model=serve_config.ModelConfig(
        path=gguf, device=device, dtype="auto", max_model_len=prompt_len + gen + 16))
    cfg.cache.enable_prefix_caching = False
    cfg.cache.dtype = KV_TYPES[kv][0]
    cfg.scheduler.max_num_seqs = max(max(batches), cfg.scheduler.max_num_seqs)
    if async_scheduling is not None:  # None: the engine's default
        cfg.scheduler.async_scheduling = async_scheduling
    cfg.scheduler.prefill_first = prefill_first  # True: every prompt in before the decode rows, as llama-batched-bench
    t = time.perf_counter()
    llm = LLM(config=cfg, progress=False)
    load_s = time.perf_counter() - t
    _note(f"onecat loaded {gguf} in {load_s:.1f} s")
    cuda = llm.engine.runner.device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    info, rt = model_info(llm), runtime_info(llm, "disabled")
    results = []
    for batch in batches:
        def generate(rep: int, n: int, batch: int = batch) -> tuple[int, float] | None:
            """On a GPU: the decode phase as (tokens, seconds) (decode_phase; batch 1: from the request's first
            token to the last). On the CPU an asynchronous step computes inside its launch, before the step
            ahead is resolved: the first token's time would trail a step, so only the difference is used there."""
            rng = random.Random(seed * 1000 + rep)
            prompts = [[rng.randrange(spec.vocab) for _ in range(prompt_len)] for _ in range(batch)]
            params = SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True)
            if cuda and n > 1:
                return decode_phase(llm.engine, prompts, params)
            outs = llm.generate(prompts, params)
            got = [len(o.outputs[0].token_ids) for o in outs]
            if got != [n] * batch:
                raise RuntimeError(f"onecat generated {got} tokens, asked {n} for each of {batch}")
            return None

        n = repeats if batch == 1 else (batched_repeats or repeats)
        rates, t1s, by_difference = _timed_rates(generate, batch, gen, n, sync)
        details = {"engine_weight_format": info.weight_format, "compute_dtype": info.compute_dtype,
                   "device": rt.device, "kv_dtype": rt.kv_dtype, "graph_mode": rt.graph_mode,
                   "prefix_cache": "disabled", "route": rt.route, "torch": torch.__version__,
                   "max_num_seqs": cfg.scheduler.max_num_seqs,
                   "max_num_batched_tokens": cfg.scheduler.max_num_batched_tokens,
                   "async_scheduling": cfg.scheduler.async_scheduling,
                   "prefill_first": cfg.scheduler.prefill_first,
                   "prefill_measure": "t(generate 1): prompt prefill + one token",
                   "decode_measure": "the decode phase (decode_phase: tokens after the step at which every request "
                   "has its first token, over the seconds from it to the last)" if cuda
                   else "batch * (gen - 1) / (t(generate gen) - t(generate 1))",
                   "decode_tok_s_by_difference": [round(r, 1) for r in by_difference]}
        results.append(DecodeResult("onecat", shape, f"GGUF {fmt}", batch, prompt_len, gen, rates,
                                    [batch * prompt_len / t for t in t1s], load_s, details))
        if on_result:
            on_result(results)  # what is done survives a time limit on the rest
    return results


_PHASE_IDS = itertools.count()


def decode_phase(engine, prompts: list[list[int]], params) -> tuple[int, float]:
    """Run the prompts through the engine's steps (as LLM.generate does) and return its decode phase as
    (tokens, seconds): from the step at which every request has its first token (T0) to the last step, the
    tokens generated after T0. llama-batched-bench prefills its B prompts and then times B x ntg tokens
    decoded in lockstep; onecat's chunked prefill runs decode rows of prompts already in beside later prompts'
    chunks, so its rate by t(generate N) - t(generate 1) counts those prefill steps' extra time as decode
    time. The phase leaves them out and keeps its own tail (rows that started early finish early, so its last
    steps run fewer rows), which scheduler.prefill_first removes: every prompt is in before any decode row runs,
    so the rows decode in lockstep as llama-batched-bench's do. Every request must generate params.max_tokens
    tokens (ignore_eos)."""
    rids = [f"peers-phase-{next(_PHASE_IDS)}" for _ in prompts]
    for rid, prompt in zip(rids, prompts):
        engine.add_request(rid, prompt, params)
    got: dict[str, int] = {}
    t0 = n0 = None
    now = time.perf_counter()
    while engine.has_unfinished_requests():
        for out in engine.step():
            got[out.request_id] = len(out.outputs[0].token_ids)
        now = time.perf_counter()
        if t0 is None and len(got) == len(rids) and all(got.values()):
            t0, n0 = now, sum(got.values())
    want = [params.max_tokens] * len(rids)
    if [got.get(r, 0) for r in rids] != want:
        raise RuntimeError(f"onecat generated {[got.get(r, 0) for r in rids]} tokens, asked {want[0]} for each "
                           f"of {len(rids)}")
    tokens = sum(want) - n0
    if tokens <= 0 or now <= t0:
        raise RuntimeError(f"no decode phase: every request's tokens came in the step that gave the last its first "
                           f"({n0} of {sum(want)}); generate more tokens")
    return tokens, now - t0


# -- llama.cpp ----------------------------------------------------------------------------------------
def _run(cmd: list[str], timeout: float, raw_log: str | None = None) -> tuple[str, str]:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if raw_log:
        with open(raw_log, "a") as fh:
            fh.write(f"== {' '.join(cmd)} (exit {p.returncode})\n-- stdout\n{p.stdout}\n"
                     f"-- stderr\n{p.stderr[-6000:]}\n")
    if p.returncode != 0:
        tail = (p.stderr or p.stdout or "")[-1500:]
        raise RuntimeError(f"{os.path.basename(cmd[0])} exited {p.returncode}: {tail}")
    return p.stdout, p.stderr


def run_llama_bench(bin_dir: str, gguf: str, shape: str, fmt: str, prompt_len: int, gen: int, repeats: int,
                    depths: tuple[int, ...] = (0, 512), timeout: float = 300,
                    raw_log: str | None = None, kv: str = "fp16") -> list[DecodeResult]:
    cmd = [os.path.join(bin_dir, "llama-bench"), "-m", gguf, "-p", str(prompt_len), "-n", str(gen),
           "-d", ",".join(map(str, depths)), "-ngl", "99", "-fa", "1", "-r", str(repeats), "-o", "json",
           *_llama_kv_args(kv)]
    out, err = _run(cmd, timeout, raw_log)
    return parse_llama_bench(out, err, shape, fmt, " ".join(cmd))


def parse_llama_bench(out: str, err: str, shape: str, fmt: str, command: str = "") -> list[DecodeResult]:
    """llama-bench `-o json` stdout -> one batch-1 result per depth (its tg row, with its pp row's rate)."""
    if "[" not in out:
        raise RuntimeError(f"llama-bench printed no JSON: {(out + err)[-800:]}")
    rows = json.JSONDecoder().raw_decode(out[out.index("["):])[0]
    by_depth: dict[int, dict] = {}
    for r in rows:
        slot = by_depth.setdefault(int(r.get("n_depth", 0)), {})
        slot["pp" if r["n_gen"] == 0 else "tg"] = r
    results = []
    for d, slot in sorted(by_depth.items()):
        tg, pp = slot.get("tg"), slot.get("pp")
        if tg is None:
            continue
        details = {"command": command, "build_commit": tg.get("build_commit"),
                   "build_number": tg.get("build_number"), "gpu_info": tg.get("gpu_info"),
                   "backends": tg.get("backends"), "flash_attn": tg.get("flash_attn"),
                   "n_gpu_layers": tg.get("n_gpu_layers"), "type_k": tg.get("type_k"), "type_v": tg.get("type_v"),
                   "model_size": tg.get("model_size"), "n_depth": d,
                   "test": f"tg{tg['n_gen']}" + (f" @ d{d}" if d else ""),
                   "prefill_test": (f"pp{pp['n_prompt']}" + (f" @ d{d}" if d else "")) if pp else None}
        results.append(DecodeResult("llama.cpp", shape, f"GGUF {fmt}", 1, d, int(tg["n_gen"]),
                                    [float(x) for x in tg["samples_ts"]],
                                    [float(x) for x in pp["samples_ts"]] if pp else [], None, details))
    if not results:
        raise RuntimeError(f"llama-bench printed no tg result: {(out + err)[-800:]}")
    return results


def run_llama_batched(bin_dir: str, gguf: str, shape: str, fmt: str, prompt_len: int, gen: int,
                      batches: list[int], timeout: float = 300, raw_log: str | None = None,
                      kv: str = "fp16") -> list[DecodeResult]:
    ctx = max(batches) * (prompt_len + gen)
    cmd = [os.path.join(bin_dir, "llama-batched-bench"), "-m", gguf, "-c", str(ctx), "-b", "2048", "-ub", "512",
           "-npp", str(prompt_len), "-ntg", str(gen), "-npl", ",".join(map(str, batches)), "-ngl", "99",
           "-fa", "on", "--output-format", "jsonl", *_llama_kv_args(kv)]
    out, err = _run(cmd, timeout, raw_log)
    return parse_llama_batched(out, err, shape, fmt, " ".join(cmd), KV_TYPES[kv][1])


def parse_llama_batched(out: str, err: str, shape: str, fmt: str, command: str = "",
                        cache_type: str = "f16") -> list[DecodeResult]:
    """llama-batched-bench `--output-format jsonl` -> one aggregate-decode result per batch size (its jsonl has no
    cache type: `cache_type` is what the command asked for)."""
    results = []
    for line in (out + "\n" + err).splitlines():
        line = line.strip()
        if not line.startswith('{"n_kv_max"'):
            continue
        r = json.loads(line)
        details = {"command": command, "n_kv_max": r["n_kv_max"], "n_batch": r["n_batch"],
                   "n_ubatch": r["n_ubatch"], "flash_attn": r["flash_attn"], "is_pp_shared": r["is_pp_shared"],
                   "n_gpu_layers": r["n_gpu_layers"], "t_pp_s": r["t_pp"], "t_tg_s": r["t_tg"],
                   "type_k": cache_type, "type_v": cache_type,
                   "measure": "one run per batch size: B * ntg / decode time (llama-batched-bench S_TG)"}
        results.append(DecodeResult("llama.cpp", shape, f"GGUF {fmt}", int(r["pl"]), int(r["pp"]), int(r["tg"]),
                                    [float(r["speed_tg"])], [float(r["speed_pp"])], None, details))
    if not results:
        raise RuntimeError(f"llama-batched-bench printed no jsonl result: {(out + err)[-800:]}")
    return results


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m onecat.bench.peer_runners", description=__doc__.splitlines()[0])
    ap.add_argument("engine", choices=["hf", "onecat"])
    ap.add_argument("--shape", required=True, choices=sorted(SHAPES))
    ap.add_argument("--gguf", help="onecat: the GGUF file")
    ap.add_argument("--format", default="", help="onecat: the GGUF's file type, for the record")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, nargs="+", default=[1])
    ap.add_argument("--batched-repeats", type=int, default=None, help="onecat: repeats at batch > 1")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--scheduling", choices=["async", "sync"], default=None,
                    help="onecat: scheduler.async_scheduling (default: the engine's, asynchronous)")
    ap.add_argument("--kv", choices=sorted(KV_TYPES), default="fp16", help="onecat: the paged cache (KV_TYPES)")
    ap.add_argument("--prefill-first", action="store_true",
                    help="onecat: scheduler.prefill_first (every prompt before the decode rows, as llama-batched-bench)")
    ap.add_argument("--json", required=True, help="write the results here")
    a = ap.parse_args(argv)
    if a.threads:
        import torch

        torch.set_num_threads(a.threads)
    def save(res: list[DecodeResult]) -> None:
        with open(a.json + ".tmp", "w") as fh:
            json.dump([asdict(r) for r in res], fh)
        os.replace(a.json + ".tmp", a.json)

    if a.engine == "hf":
        save(run_hf(a.shape, a.device, a.prompt_len, a.gen, a.repeats))
    else:
        if not a.gguf:
            ap.error("onecat needs --gguf")
        scheduling = None if a.scheduling is None else a.scheduling == "async"
        save(run_onecat(a.gguf, a.shape, a.format, a.device, a.prompt_len, a.gen, a.repeats, a.batch,
                        a.batched_repeats, on_result=save, async_scheduling=scheduling, kv=a.kv,
                        prefill_first=a.prefill_first))


if __name__ == "__main__":
    main()
