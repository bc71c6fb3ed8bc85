"""`python -m onecat.kernels explain ...`: print the admission table for real or fake devices.

    python -m onecat.kernels explain --device sm70 --dtype float16 [--op linear] [--param rows=1]
    python -m onecat.kernels explain --device cuda        # the GPU of this machine
    python -m onecat.kernels sources --arch 70            # compile every kernel, print resource use
    python -m onecat.kernels sources --source gemv_packed.cu   # one source, for this GPU's arch

Problems are built from each op's first generated input case (or all with --all-cases); --param
overrides a fact the op already has (key=value). A fake device (cpu, smXY) is judged without this machine's
availability checks unless --check-available is given.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import sys
import time

import torch

from . import build, ops
from .registry import AdmissionError, format_admission, registry


def _device(spec: str) -> tuple[str, tuple[int, int] | None, bool]:
    """(device, capability, fake) for 'cpu', 'cuda' (this GPU) or 'smXY'."""
    if spec == "cpu":
        return "cpu", None, True
    if spec == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: no CUDA device here (use --device sm70 etc.)")
        return "cuda", torch.cuda.get_device_capability(), False
    if spec.startswith("sm") and spec[2:].isdigit() and len(spec) >= 4:
        return "cuda", (int(spec[2:-1]), int(spec[-1])), True
    raise SystemExit(f"unknown device {spec!r}: cpu, cuda or smXY (sm70, sm75, sm80, sm90, ...)")


def _value(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def explain(args) -> int:
    device, cap, fake = _device(args.device)
    dtype = getattr(torch, args.dtype)
    gen = torch.Generator().manual_seed(0)
    overrides = dict(kv.split("=", 1) for kv in args.param)
    selections, errors = [], []
    for op in args.op or list(registry.ops):
        spec = registry.ops[op]
        cases = spec.make_inputs(dtype, "cpu", gen)
        for case in cases if args.all_cases else cases[:1]:
            p = ops.problem(op, *case.args, **case.kwargs)
            params = dict(p.params)
            params.update({k: _value(v) for k, v in overrides.items() if k in params})
            p = dataclasses.replace(p, device=device, capability=cap, dtype=args.dtype,
                                    params=tuple(sorted(params.items())))
            try:
                selections.append(registry.explain(p, check_available=args.check_available or not fake))
            except AdmissionError as e:
                errors.append(str(e))
    print(format_admission(selections))
    for e in errors:
        print("AdmissionError:", e)
    return 1 if errors else 0


def sources(args) -> int:
    arch = args.arch
    if arch is None:
        a, b = torch.cuda.get_device_capability() if torch.cuda.is_available() else (7, 0)
        arch = 10 * a + b
    known = build.sources()
    for src in args.source or known:
        if src not in known:
            raise SystemExit(f"unknown source {src!r} (known: {', '.join(known)})")
        t = time.perf_counter()
        c = build.compile_source(src, arch)
        print(f"{src} sm_{arch} ({'cached' if c.cached else f'compiled in {time.perf_counter() - t:.1f} s'}, "
              f"{build.toolchain(arch).describe()})")
        for name, u in sorted(c.usage.items()):
            print(f"  {name:<32} regs {u.get('registers', 0):>3}  smem {u.get('smem', 0):>6}  "
                  f"stack {u.get('stack', 0)}  spills {u.get('spill_stores', 0)}/{u.get('spill_loads', 0)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m onecat.kernels", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("explain", help="print which provider each op admits, and why the others refuse")
    ex.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ex.add_argument("--dtype", default="float16")
    ex.add_argument("--op", action="append", choices=sorted(registry.ops))
    ex.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    ex.add_argument("--all-cases", action="store_true", help="one problem per generated input case")
    ex.add_argument("--check-available", action="store_true", help="apply this machine's availability checks")
    ex.add_argument("--pin", action="append", default=[], metavar="OP=PROVIDER")
    ex.add_argument("--disable", action="append", default=[], metavar="PROVIDER")
    src = sub.add_parser("sources", help="compile every csrc/*.cu for an arch and print resource use")
    src.add_argument("--arch", type=int, default=None, help="default: this GPU's (70 without one)")
    src.add_argument("--source", action="append", metavar="FILE.cu", help="only these sources (default: all)")
    args = ap.parse_args(argv)
    if args.cmd == "explain":
        if args.pin or args.disable:
            registry.configure(pins=dict(p.split("=", 1) for p in args.pin), disabled=args.disable)
        return explain(args)
    return sources(args)


if __name__ == "__main__":
    sys.exit(main())
