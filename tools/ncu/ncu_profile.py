"""Profile a decode configuration under Nsight Compute and print a per-kernel table and a
decode-step timeline.

    python tools/ncu/ncu_profile.py --config configs/bench/ncu_llama3_8b_q4_0.yaml --out /tmp/ncu/llama3
    python tools/ncu/ncu_profile.py --out /tmp/ncu/smollm2 -- --shape smollm2-135m --weights q4_0 --batch 1
    python tools/ncu/ncu_profile.py --report-only --out /tmp/ncu/llama3     # re-parse an existing report

Steps: (0) `python tools/ncu/target.py <args> --profiled 0 --steps-json OUT.steps.json`, without
ncu: the step's device time as it runs (ncu intercepts every launch of the process it runs, so
steps timed under it, even outside the profiled range, are ~10x longer and would make the gaps up);
(1) `ncu --clock-control none --profile-from-start off --nvtx ... python tools/ncu/target.py <args>
--steps-json OUT.under-ncu.steps.json -o OUT` (clocks as the GPU runs them; only the profiled decode
steps are captured: target.py brackets them with cudaProfilerStart/Stop and names NVTX ranges
after each op's admitted provider); (2) `ncu --import OUT.ncu-rep --csv --page raw > OUT.raw.csv`;
(3) tools/ncu/ncu_report.py (kernel durations against step (0)'s time: the gaps) -> OUT.kernels.json
and OUT.md, printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _ncu_report():
    """tools/ncu/ncu_report.py, loaded by path (tools/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("onecat_tools_ncu_report", os.path.join(HERE, "ncu_report.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod

SECTIONS = ["SpeedOfLight", "LaunchStats", "Occupancy", "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis"]
METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
           "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
           "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
           "launch__registers_per_thread", "launch__shared_mem_per_block_static",
           "launch__shared_mem_per_block_dynamic", "sm__warps_active.avg.pct_of_peak_sustained_active",
           "sm__maximum_warps_per_active_cycle_pct"]


def ncu_command(ncu: str, out: str, target_args: list[str], sections=SECTIONS, metrics=METRICS) -> list[str]:
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--nvtx", "--target-processes", "all",
           "--cache-control", "all", "-f", "-o", out]
    for s in sections:
        cmd += ["--section", s]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    return cmd + target_command(target_args, out + ".under-ncu.steps.json")


def target_command(target_args: list[str], steps_json: str, *extra: str) -> list[str]:
    return [sys.executable, os.path.join(HERE, "target.py"), *target_args, *extra, "--steps-json", steps_json]


def config_args(path: str) -> list[str]:
    import yaml

    with open(path) as f:
        cfg = yaml.safe_load(f) or {}
    if cfg.get("command") != "ncu":
        raise SystemExit(f"{path}: not an ncu configuration (command: ncu)")
    argv = []
    for k, v in (cfg.get("args") or {}).items():
        if v is None or v is False:
            continue
        argv += [f"--{k}"] if v is True else [f"--{k}", str(v)]
    return argv


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    target_args = []
    if "--" in argv:
        i = argv.index("--")
        argv, target_args = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=None, help="configs/bench/ncu_*.yaml (target.py options)")
    ap.add_argument("--out", required=True, help="report path prefix (OUT.ncu-rep, OUT.raw.csv, ...)")
    ap.add_argument("--ncu", default=os.environ.get("NCU", "ncu"))
    ap.add_argument("--metrics", default=None, help="comma list replacing the default metrics ('' for sections only)")
    ap.add_argument("--dry-run", action="store_true", help="print the ncu command and stop")
    ap.add_argument("--report-only", action="store_true", help="skip profiling: export and parse OUT.ncu-rep")
    a = ap.parse_args(argv)
    if a.config:
        target_args = config_args(a.config) + target_args
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    metrics = METRICS if a.metrics is None else [m for m in a.metrics.split(",") if m]
    cmd = ncu_command(a.ncu, a.out, target_args, metrics=metrics)
    plain = target_command(target_args, a.out + ".steps.json", "--profiled", "0")
    if a.dry_run:
        print("$ " + shlex.join(plain) + "\n$ " + shlex.join(cmd), flush=True)
        return 0
    if shutil.which(a.ncu) is None:
        print(f"{a.ncu}: not found (Nsight Compute ships with the CUDA toolkit; set NCU=/path/to/ncu)", file=sys.stderr)
        return 2
    if not a.report_only:
        print("$ " + shlex.join(plain), flush=True)  # the commands in the order they run
        r = subprocess.run(plain)
        if r.returncode:
            print(f"the unprofiled run exited {r.returncode}", file=sys.stderr)
            return r.returncode
        print("$ " + shlex.join(cmd), flush=True)
        r = subprocess.run(cmd)
        if r.returncode:
            print(f"ncu exited {r.returncode}", file=sys.stderr)
            return r.returncode
    rep = a.out + ".ncu-rep"
    raw = subprocess.run([a.ncu, "--import", rep, "--csv", "--page", "raw"], capture_output=True, text=True)
    if raw.returncode:
        print(raw.stderr, file=sys.stderr)
        return raw.returncode
    with open(a.out + ".raw.csv", "w") as f:
        f.write(raw.stdout)
    steps = None
    if os.path.exists(a.out + ".steps.json"):
        with open(a.out + ".steps.json") as f:
            steps = json.load(f)
    _ncu_report().main([a.out + ".raw.csv", "--json", a.out + ".kernels.json", "--md", a.out + ".md"]
                    + (["--steps", a.out + ".steps.json"] if steps else []))
    return 0


if __name__ == "__main__":
    sys.exit(main())
