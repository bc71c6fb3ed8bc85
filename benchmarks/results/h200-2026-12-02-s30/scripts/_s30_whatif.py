"""s30 what-ifs (wrong outputs): the llama3-8b decode step with a part removed, to bound what making it free could
gain: --skip-norm (the residual add + RMSNorm launches in front of the batched projections:
linear_fused_ops._norm returns its input), --skip-attention (ops.paged_attention returns q), --attention-sms=N (attention's split-KV plan for N SMs: a
real route with fewer partitions, outputs right). Otherwise
tools/ncu/target.py's timed steps with the same arguments."""
import sys

sys.path.insert(0, "tools/ncu")
import target  # noqa: E402

from onecat.kernels import linear_fused_ops, ops  # noqa: E402

if "--skip-norm" in sys.argv:
    sys.argv.remove("--skip-norm")
    linear_fused_ops._norm = lambda x, w, eps, residual: (x, x if residual is None else residual)
if "--skip-attention" in sys.argv:
    sys.argv.remove("--skip-attention")
    ops.paged_attention = lambda q, *args, **kwargs: q
for a in list(sys.argv):
    if a.startswith("--attention-sms="):  # plan the split-KV partitions for this many SMs (fewer blocks)
        sys.argv.remove(a)
        from onecat.kernels import attention_ops  # noqa: E402
        attention_ops._sm_count = lambda device, n=int(a.split("=")[1]): n
sys.exit(target.main(sys.argv[1:]))
