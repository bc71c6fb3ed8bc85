"""The SASS instructions with the most warp-stall samples in an `ncu --page source --print-source sass
--csv` dump (tools/gpu/ncu_source.sh), with each one's leading stall reasons.

    python3 tools/gpu/ncu_source_top.py ncu-source-r32.csv[.gz] [--top 30]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import sys


def _num(v: str) -> float:
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return 0.0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    opener = gzip.open if args.csv.endswith(".gz") else open
    with opener(args.csv, "rt", errors="replace") as f:
        lines = f.read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"Address"') or l.startswith("Address")), None)
    if start is None:
        print("no source table in", args.csv)
        return 1
    rows = list(csv.DictReader(lines[start:]))
    cols = list(rows[0].keys()) if rows else []
    total_col = next((c for c in cols if c.startswith("Warp Stall Sampling (All")), None)
    if total_col is None:
        print("columns:", cols)
        return 1
    reasons = [c for c in cols if c.startswith("stall_") or "Stall" in c and c != total_col and "Not-issued" not in c]
    total = sum(_num(r[total_col]) for r in rows) or 1.0
    print(f"{len(rows)} instructions, {total:.0f} samples; columns with reasons: {len(reasons)}")
    for r in sorted(rows, key=lambda r: -_num(r[total_col]))[:args.top]:
        top = sorted(((c, _num(r[c])) for c in reasons), key=lambda kv: -kv[1])[:3]
        why = ", ".join(f"{c.replace('stall_', '')} {v:.0f}" for c, v in top if v > 0)
        print(f"{_num(r[total_col]) / total:6.1%}  {r.get('Address', '?'):>6}  {r.get('Source', '')[:60]:60}  {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
