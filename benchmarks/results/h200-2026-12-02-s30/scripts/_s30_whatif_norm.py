"""s30 what-if (wrong outputs): the llama3-8b decode step with the residual add + RMSNorm launches in front of the
batched projections removed (linear_fused_ops._norm returns its input), to bound what fusing them away can gain:
tools/ncu/target.py's timed steps, same arguments, `--skip-norm` on or off."""
import sys

sys.path.insert(0, "tools/ncu")
import target  # noqa: E402

from onecat.kernels import linear_fused_ops  # noqa: E402

if "--skip-norm" in sys.argv:
    sys.argv.remove("--skip-norm")
    linear_fused_ops._norm = lambda x, w, eps, residual: (x, x if residual is None else residual)
sys.exit(target.main(sys.argv[1:]))
