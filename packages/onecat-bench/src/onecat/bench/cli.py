"""onecat-bench: benchmarks that record their contract next to every number."""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "offline": ("onecat.bench.offline:main", "in-process engine: lengths x concurrency x rate sweeps"),
    "online": ("onecat.bench.online:main", "any OpenAI-compatible endpoint, streamed: TTFT/TPOT/ITL/E2E"),
    "quality": ("onecat.bench.quality:main", "PPL vs HF on real text, greedy agreement, stop/JSON behaviour"),
    "project": ("onecat.bench.project:main", "PROJECTED V100-SXM2 decode tok/s, kernel by kernel"),
    "compare": ("onecat.bench.report:main_compare", "ratios (B / A) of matching metrics of two JSONL files"),
    "report": ("onecat.bench.report:main", "Markdown report and PNG plots from JSONL files"),
    "run": ("onecat.bench.config:main", "run a bench configuration (configs/bench/*.yaml)"),
    "cpu-decode": ("onecat.bench.cpu_decode:main", "CPU batch-1 decode and load time, onecat vs HF transformers"),
    "spec": ("onecat.bench.spec:main", "speculative decoding: acceptance length and speedup vs spec off"),
    "peers": ("onecat.bench.peers:main", "decode: onecat vs llama.cpp vs HF transformers, same shapes and GGUFs"),
    "synth-gguf": ("onecat.bench.synth_gguf:main", "GGUF of a real shape with generated weights in real formats"),
}


def usage() -> str:
    lines = ["usage: onecat-bench COMMAND [options]   (COMMAND -h for its options)", "", "commands:"]
    lines += [f"  {name:12} {doc}" for name, (_, doc) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print(usage())
        if argv and argv[0] not in ("-h", "--help"):
            print(f"\nunknown command {argv[0]!r}", file=sys.stderr)
        sys.exit(0 if not argv or argv[0] in ("-h", "--help") else 2)
    module, func = COMMANDS[argv[0]][0].split(":")
    getattr(importlib.import_module(module), func)(argv[1:])


if __name__ == "__main__":
    main()
