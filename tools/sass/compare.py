"""Is a kernel-source change a pure refactor? Compare the SASS of csrc/ at a git revision with the working tree's.

Every csrc/*.cu (or the sources named) is built by NVRTC, the CI toolchain, for each arch asked (sm_70 and sm_90 by
default; gemm_wg.cu as sm_90a, as the engine builds it), and each kernel's SASS (cuobjdump) is compared. Equal SASS
means the same machine code: the change needs no GPU run to keep its bits and speed. A kernel that differs is
listed with its registers and instruction counts on both sides and the opcodes whose counts moved most; one added or
removed is listed as such.

    python tools/sass/compare.py                    # HEAD against the working tree
    python tools/sass/compare.py --base 95b72b7 --sources gemm_wg.cu gemm_rd.cu --archs 90

Exit status: 0 when every kernel's SASS is equal, 1 when any differs, 2 on bad input.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from io import BytesIO
from pathlib import Path

from onecat.kernels import build

REPO = Path(__file__).resolve().parents[2]
CSRC_IN_REPO = build.CSRC.resolve().relative_to(REPO)
_ADDRESS = re.compile(r"/\*[0-9a-f]{4,}\*/")  # cuobjdump's per-instruction offsets
_ENCODING = re.compile(r"/\* 0x[0-9a-f]{16} \*/")  # and its encoding words


def _instructions(body: str) -> list[str]:
    """A kernel's SASS as its instruction lines, offsets and encodings left out (the text is the code)."""
    out = []
    for line in body.splitlines():
        line = _ENCODING.sub("", _ADDRESS.sub("", line)).strip()
        if line and not line.startswith((".", "-", "=")) and ";" in line:
            out.append(line)
    return out


def _base_csrc(rev: str, into: Path) -> Path:
    """csrc/ as revision `rev` has it, written under `into`."""
    try:
        data = subprocess.run(["git", "-C", str(REPO), "archive", rev, str(CSRC_IN_REPO)], capture_output=True,
                              check=True).stdout
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"compare: git archive {rev} failed: {e.stderr.decode().strip()}") from None
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into / CSRC_IN_REPO


def _kernels(csrc: str, source: str, arch: int) -> dict[str, list[str]] | str:
    """{kernel: instructions} of csrc/source for sm_`arch`; a string when the source is absent or fails."""
    if not (Path(csrc) / source).exists():
        return "absent"
    try:
        compiled = build.compile_source(source, arch, use_cache=False, csrc=Path(csrc))
    except RuntimeError as e:
        errors = [line.strip() for line in str(e).splitlines() if "error" in line and "NVRTC_ERROR" not in line]
        return f"does not compile: {errors[0] if errors else str(e).splitlines()[0]}"
    usage = compiled.usage
    return {name: [f"registers {usage.get(name, {}).get('registers')}", *_instructions(body)]
            for name, body in build.sass(compiled.cubin, arch).items()}


def _compare(base: dict[str, list[str]] | str, head: dict[str, list[str]] | str) -> list[str]:
    """Lines describing how head's kernels differ from base's (none: the same SASS)."""
    if isinstance(base, str) or isinstance(head, str):
        return [] if base == head else [f"base {base if isinstance(base, str) else 'builds'}, "
                                        f"head {head if isinstance(head, str) else 'builds'}"]
    lines = [f"only in head: {n}" for n in sorted(head.keys() - base.keys())]
    lines += [f"only in base: {n}" for n in sorted(base.keys() - head.keys())]
    for name in sorted(base.keys() & head.keys()):
        b, h = base[name], head[name]
        if b != h:
            lines.append(f"differs: {name}: {b[0]} -> {h[0].split()[-1]}, {len(b) - 1} -> {len(h) - 1} instructions"
                         f" ({_opcode_change(b[1:], h[1:])})")
    return lines


def _opcode_change(base: list[str], head: list[str], most: int = 6) -> str:
    """The opcodes whose counts changed most (predicates and modifiers left out), or that none did."""
    def count(instructions: list[str]) -> Counter:
        return Counter(ins.split()[1 if ins.startswith("@") else 0].split(".")[0].rstrip(";") for ins in instructions)
    delta = count(head)
    delta.subtract(count(base))
    moved = sorted(((op, d) for op, d in delta.items() if d), key=lambda od: (-abs(od[1]), od[0]))
    if not moved:
        return "the same instructions, in another order or with other operands"
    return ", ".join(f"{op} {d:+d}" for op, d in moved[:most]) + (", ..." if len(moved) > most else "")


def compare_trees(base: Path, head: Path, sources: list[str], archs: list[int], jobs: int = 2
                  ) -> dict[tuple[str, int], tuple[list[str], dict[str, list[str]] | str]]:
    """{(source, arch): (how head's build differs from base's (empty: the same SASS), head's build)}."""
    work = [(str(side), s, a) for s in sources for a in archs for side in (base, head)]
    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            built = dict(zip(work, pool.map(_kernels, *zip(*work))))
    else:
        built = {w: _kernels(*w) for w in work}
    return {(s, a): (_compare(built[(str(base), s, a)], built[(str(head), s, a)]), built[(str(head), s, a)])
            for s in sources for a in archs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD", help="git revision to compare against (default HEAD)")
    ap.add_argument("--sources", nargs="*", help="csrc/*.cu names (default: every source on either side)")
    ap.add_argument("--archs", nargs="*", type=int, default=[70, 90])
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    try:
        build.cuobjdump()
        for arch in args.archs:
            build.toolchain(arch)
    except build.ToolchainError as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        base = _base_csrc(args.base, Path(tmp))
        known = sorted(set(build.sources(base)) | set(build.sources()))
        sources = args.sources or known
        unknown = [s for s in sources if s not in known]
        if unknown:
            print(f"compare: no csrc/*.cu of that name on either side: {' '.join(unknown)}", file=sys.stderr)
            return 2
        result = compare_trees(base, build.CSRC, sources, args.archs, args.jobs)
    for (s, a), (lines, kernels) in result.items():
        count = f"{len(kernels)} kernels" if isinstance(kernels, dict) else kernels
        print(f"{s:28s} sm_{a}: {'same SASS' if not lines else 'DIFFERS'} ({count})")
        for line in lines:
            print(f"    {line}")
    differing = sum(bool(lines) for lines, _ in result.values())
    print(f"{differing} of {len(result)} builds differ from {args.base}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
