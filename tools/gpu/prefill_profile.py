"""Where a prompt's prefill spends its time on the GPU: one `generate` of a `prompt-len` prompt and one
output token (the peers bench's t(generate 1)), warmed up once, then timed and traced by
torch.profiler: wall time, and the device kernels by total time (count, total, mean).

    python tools/gpu/prefill_profile.py --model X.gguf [--prompt-len 512] [--top 25] [--cprofile 40]
"""

from __future__ import annotations

import argparse
import random
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="a GGUF file (default: the embedded SmolLM2)")
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--cprofile", type=int, default=0, help="also print this many functions of a cProfile run")
    a = ap.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    from onecat.serve import config as serve_config
    from onecat.serve.llm import LLM
    from onecat.serve.sampling_params import SamplingParams

    cfg = serve_config.EngineConfig(model=serve_config.ModelConfig(path=a.model, max_model_len=a.prompt_len + 16))
    cfg.cache.enable_prefix_caching = False
    llm = LLM(config=cfg, progress=False)
    vocab = llm.engine.runner.spec.vocab_size
    params = SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True)

    def prompt(seed: int) -> list[int]:
        rng = random.Random(seed)
        return [rng.randrange(vocab) for _ in range(a.prompt_len)]

    llm.generate(prompt(0), params)  # warm-up: kernels compiled and loaded
    for seed in (1, 2):
        torch.cuda.synchronize()
        t = time.perf_counter()
        llm.generate(prompt(seed), params)
        torch.cuda.synchronize()
        print(f"generate(prompt {a.prompt_len}, 1 token): {(time.perf_counter() - t) * 1e3:.2f} ms")
    if a.cprofile:  # the host side: the run's functions by cumulative time
        import cProfile
        import pstats
        pr = cProfile.Profile()
        pr.enable()
        llm.generate(prompt(4), params)
        torch.cuda.synchronize()
        pr.disable()
        pstats.Stats(pr).sort_stats("cumulative").print_stats(a.cprofile)
    # device activities only: s8 call 9's CPU + CUDA trace of one prefill did not finish in ~40 s
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        llm.generate(prompt(3), params)
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.self_device_time_total > 0 and str(e.device_type).endswith("CUDA")]
    total = sum(e.self_device_time_total for e in events)
    print(f"device kernels: {total / 1e3:.2f} ms in {sum(e.count for e in events)} launches (profiled run)")
    print(f"{'kernel':70} {'n':>5} {'total us':>10} {'mean us':>9}")
    for e in sorted(events, key=lambda e: -e.self_device_time_total)[:a.top]:
        print(f"{e.key[:70]:70} {e.count:5d} {e.self_device_time_total:10.1f} {e.self_device_time_total / e.count:9.1f}")


if __name__ == "__main__":
    main()
