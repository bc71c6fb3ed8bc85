"""One table from a whole-tree A/B's decode rows: files DIR/<variant>-<round>.json written by
decode_rd_ab.py --json (one process per variant and round), a line per row with each variant's mean of
the rounds' medians (us, % of copy) and the rounds themselves.

    python3 tools/gpu/ab_table.py DIR
"""

from __future__ import annotations

import collections
import glob
import json
import os
import sys


def table(folder: str) -> list[str]:
    acc = collections.defaultdict(list)
    for f in sorted(glob.glob(os.path.join(folder, "*-*.json"))):
        variant = os.path.basename(f)[:-5].rsplit("-", 1)[0]
        for r in json.load(open(f))["rows"]:
            acc[(r["kv"], r["batch"], r["ctx"], r["heads"], r["d"], variant)].append((r["us"], r["pct_copy"]))
    rows = sorted({k[:5] for k in acc}, key=str)
    variants = sorted({k[5] for k in acc})
    out = ["row | " + " | ".join(variants)]
    for k in rows:
        cells = []
        for v in variants:
            got = acc.get(k + (v,))
            cells.append("-" if not got else f"{sum(u for u, _ in got) / len(got):.2f} us "
                         f"{sum(p for _, p in got) / len(got):.1f}% ({'/'.join(f'{u:.2f}' for u, _ in got)})")
        out.append(f"{k[0]} b{k[1]} {k[2]} {k[3]} d{k[4]} | " + " | ".join(cells))
    return out


if __name__ == "__main__":
    print("\n".join(table(sys.argv[1] if len(sys.argv) > 1 else ".")))
