"""s38: tools/ncu/target.py's in-process A/B with pseudo --ab-disable entries `attn:FORM:MINPART`: while a variant's
decode graphs are captured, the register-direct decode attention runs in FORM (w4 / w1 / deep, attention_ops'
DECODE_RD_FORMS) with its split-KV plan's minimum partition MINPART keys (attention_ops.MIN_PART, 64 on main). The
question: at batch 1, do one-warp blocks (5K registers each, where a 4-warp block holds ~20K) become resident beside
the qkv GEMV's blocks and take attention's loads off the chain? From the repo root:

    python benchmarks/results/h100-2026-12-05-s38/scripts/_s38_attn_form.py --model M.gguf --ab-disable "attn:w1:64;..."
"""
import sys

sys.path.insert(0, "tools/ncu")
import target  # noqa: E402

from onecat.kernels import attention_ops, ops  # noqa: E402

_configure, _form, _min_part = ops.registry.configure, attention_ops.decode_rd_form, attention_ops.MIN_PART


def configure(*args, disabled=None, **kw):
    names = list(disabled or ())
    v = [n.split(":") for n in names if n.startswith("attn:")]
    if v:
        form, min_part = v[0][1], int(v[0][2])
        attention_ops.decode_rd_form = lambda *a, **k: form
        attention_ops.MIN_PART = min_part
    else:
        attention_ops.decode_rd_form, attention_ops.MIN_PART = _form, _min_part
    return _configure(*args, disabled=[n for n in names if not n.startswith("attn:")], **kw)


ops.registry.configure = configure
target.SAME_ROUTE_OK = True  # attn: changes launches, not selections
sys.exit(target.main())
