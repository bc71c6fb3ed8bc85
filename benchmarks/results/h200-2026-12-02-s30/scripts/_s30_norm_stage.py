"""s30: the normed M = 1 GEMVs with the norm weight staged in shared memory before the PDL wait (ONECAT_S30_STAGE=1,
the change) or read from L2 after the prologue's reduction (=0, linear_fused_ops.NORM_W_STAGE_MAX = 0: the kernels
as before): tools/gpu/gemv_chain.py's chains, or with --steps the batch-1 decode steps of tools/ncu/target.py."""
import os
import sys

sys.path.insert(0, "tools/gpu")
sys.path.insert(0, "tools/ncu")
from onecat.kernels import linear_fused_ops  # noqa: E402

if os.environ.get("ONECAT_S30_STAGE", "1") == "0":
    linear_fused_ops.NORM_W_STAGE_MAX = 0
if "--steps" in sys.argv:
    sys.argv.remove("--steps")
    import target  # noqa: E402
    sys.exit(target.main(sys.argv[1:]))
import gemv_chain  # noqa: E402
sys.exit(gemv_chain.main())
