"""tools/ncu/target.py's in-process decode-step A/B for module switches: a pseudo --ab-disable entry
`set:MODULE.NAME=VALUE` (MODULE under onecat.kernels, VALUE a Python literal) sets that attribute while the variant's
decode graphs are captured, and puts it back after; other entries disable providers as target.py's do. For A/Bs of a
launch choice that changes no provider selection (attention_ops.MIN_PART, a candidate's module flag, ...); add the
route captured again as a control (s47 ran linear_fused_ops.WARP_NORM=True / False at 912951f). From the repo root:

    python tools/gpu/switch_ab.py --shape llama3-8b --weights q4_0 --batch 1 --context 512 --timed 25 --profiled 0 \
        --ab-disable "set:attention_ops.MIN_PART=128;set:attention_ops.MIN_PART=64"
"""
import ast
import importlib
import sys

sys.path.insert(0, "tools/ncu")
import target  # noqa: E402

from onecat.kernels import ops  # noqa: E402

_configure = ops.registry.configure
_saved: dict[tuple[object, str], object] = {}


def _switch(entry: str) -> tuple[object, str, object]:
    """`set:MODULE.NAME=VALUE` -> (module, name, value)."""
    path, _, literal = entry[len("set:"):].partition("=")
    mod_name, _, name = path.rpartition(".")
    mod = importlib.import_module(f"onecat.kernels.{mod_name}")
    if not hasattr(mod, name):
        raise SystemExit(f"{entry}: onecat.kernels.{mod_name} has no {name}")
    return mod, name, ast.literal_eval(literal)


def configure(*args, disabled=None, **kw):
    names = list(disabled or ())
    for (mod, name), old in _saved.items():  # back to the route's values first
        setattr(mod, name, old)
    _saved.clear()
    for entry in (n for n in names if n.startswith("set:")):
        mod, name, value = _switch(entry)
        _saved[(mod, name)] = getattr(mod, name)
        setattr(mod, name, value)
    return _configure(*args, disabled=[n for n in names if not n.startswith("set:")], **kw)


ops.registry.configure = configure
target.SAME_ROUTE_OK = True  # switches change launches, not selections
sys.exit(target.main())
