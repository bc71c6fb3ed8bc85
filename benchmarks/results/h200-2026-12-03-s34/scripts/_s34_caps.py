"""s34 call 4: the joined GEMVs with register caps (__launch_bounds__ min blocks per SM: the experiment instances at the
end of gemv_packed.cu in s34-caps.diff), swapped into linear_norm_ops' kernel tables by name:

* `cap:mix`: the two-format qkv behind the join (_mix..._rs_rope) at 3 blocks of 8 warps per SM (96 -> 80 registers);
* `cap:q6_norm` / `cap:q4_norm`: the q6_k / q4_k _norm GEMVs in front (r4u1k2) at 5 blocks of 4 warps per SM
  (128 / 122 -> 96 registers; q4_k's spills 4 bytes).

As an A/B: tools/ncu/target.py with these as pseudo --ab-disable entries (each variant's graphs captured with them);
as a pytest plugin (-p _s34_caps, S34_CAPS=cap:mix,...): the GPU tests run the capped kernels.
"""
import os
import sys

from onecat.kernels import linear_norm_ops, ops
from onecat.kernels.driver import Kernel

_TABLES = {"cap:mix": (linear_norm_ops._MIX_RS_ROPE, ("q4_k", "q6_k"), "_b3"),
           "cap:q6_norm": (linear_norm_ops._GEMV_NORM, ("q6_k", (4, 1, 2, "")), "_b5"),
           "cap:q4_norm": (linear_norm_ops._GEMV_NORM, ("q4_k", (4, 1, 2, "")), "_b5")}
_ORIG = {n: t[k] for n, (t, k, _) in _TABLES.items()}


def _capped(k: Kernel, tag: str) -> Kernel:
    stem, form = k.name.rsplit("_rs_rope", 1)[0], "_rs_rope"
    if k.name.endswith("_norm"):
        stem, form = k.name[:-len("_norm")], "_norm"
    return Kernel(k.source, stem + tag + form, k.signature, pdl=k.pdl)


def apply(names) -> None:
    for n, (table, key, tag) in _TABLES.items():
        table[key] = _capped(_ORIG[n], tag) if n in names else _ORIG[n]


if os.environ.get("S34_CAPS"):  # pytest plugin: every capped kernel for the whole run
    apply(os.environ["S34_CAPS"].split(","))
    print(f"s34 caps: {[(n, t[k].name) for n, (t, k, _) in _TABLES.items()]}", file=sys.stderr)


def main() -> int:
    sys.path.insert(0, "tools/ncu")
    import target
    _configure = ops.registry.configure

    def configure(*args, disabled=None, **kw):
        names = list(disabled or ())
        apply(names)
        return _configure(*args, disabled=[n for n in names if not n.startswith("cap:")], **kw)

    ops.registry.configure = configure
    target.SAME_ROUTE_OK = True  # the caps change the launched kernels, not the selections
    return target.main()


if __name__ == "__main__":
    sys.exit(main())
