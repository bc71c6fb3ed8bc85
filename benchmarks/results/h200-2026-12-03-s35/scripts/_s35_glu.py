"""pytest plugin (-p _s35_glu, this folder on PYTHONPATH): S35_GLU=rRuUkKS+SFX launches the q4_k gate_up behind the
join in that shape (as _s35_ab.py's glu: entries), so that test_linear_norm's joined-GEMV tests check it."""
import os
import re

from onecat.kernels import linear_norm_ops

_shape = linear_norm_ops.gemv_m1_shape
m = re.fullmatch(r"r(\d)u(\d)k(\d)(\w*)", os.environ["S35_GLU"])
GLU = (int(m[1]), int(m[2]), int(m[3]), m[4])


def _glu_shape(fmt, n, k, normed=False):
    return GLU if fmt == "q4_k" and normed and n > 8192 else _shape(fmt, n, k, normed)


linear_norm_ops.gemv_m1_shape = _glu_shape


def pytest_report_header(config):
    return f"s35 glu shape {GLU}"
