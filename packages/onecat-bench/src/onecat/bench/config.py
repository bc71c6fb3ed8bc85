"""Bench configurations: a YAML file names a command and its options, so a sweep is one file.

    onecat-bench run configs/bench/smollm2_cpu_smoke.yaml [--set key=value ...]

    # configs/bench/example.yaml
    command: offline
    args:
      input-len: [32, 128]
      concurrency: [1, 4]
      out: benchmarks/results/example.jsonl

Keys are the command's long options without dashes; lists become repeated values, true adds a
bare flag, false/null leaves the option out.
"""

from __future__ import annotations

import argparse
import importlib

import yaml

from .cli import COMMANDS


def to_argv(args: dict) -> list[str]:
    argv = []
    for key, value in args.items():
        flag = "--" + str(key).replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv += [flag] + [str(v) for v in value]
        else:
            argv += [flag, str(value)]
    return argv


def load(path: str, overrides: list[str] = ()) -> tuple[str, list[str]]:
    with open(path) as f:
        cfg = yaml.safe_load(f) or {}
    command = cfg.get("command")
    if command not in COMMANDS or command == "run":
        raise SystemExit(f"{path}: command must be one of {', '.join(c for c in COMMANDS if c != 'run')}")
    args = dict(cfg.get("args") or {})
    for o in overrides:
        key, _, value = o.partition("=")
        args[key] = yaml.safe_load(value)
    return command, to_argv(args)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="onecat-bench run", description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override an option")
    ap.add_argument("--print", action="store_true", help="print the command line and stop")
    a = ap.parse_args(argv)
    command, args = load(a.config, a.set)
    print("onecat-bench " + command + " " + " ".join(args), flush=True)
    if a.print:
        return
    module, func = COMMANDS[command][0].split(":")
    getattr(importlib.import_module(module), func)(args)
