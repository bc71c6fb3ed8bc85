"""onecat-bench: benchmarks that record their contract next to every number."""

from __future__ import annotations

import sys

COMMANDS = {
    "cpu-decode": ("onecat.bench.cpu_decode", "CPU batch-1 decode and load time, onecat vs HF transformers"),
}


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print("usage: onecat-bench COMMAND [options]\n\ncommands:")
        for name, (_, doc) in COMMANDS.items():
            print(f"  {name:12} {doc}")
        sys.exit(0 if not argv or argv[0] in ("-h", "--help") else 2)
    import importlib

    importlib.import_module(COMMANDS[argv[0]][0]).main(argv[1:])
