#!/usr/bin/env bash
# s41: calls 1 and 2 in one device call (machines were scarce, device time short): the same-run peers report, then,
# if time is left, the L2-prefetch A/B
S=benchmarks/results/h100-2026-12-06-s41/scripts
PEERS_LIMIT_S=300 bash $S/_s41_call1.sh; echo "== call 1 done at ${SECONDS}s"
if [ $SECONDS -lt 330 ]; then bash $S/_s41_call2.sh; echo "== call 2 done at ${SECONDS}s"; fi
