"""`onecat-serve`: compose the Hydra config under configs/, finalize the route, check admission,
load the model, serve the OpenAI API. `plan=true` prints the memory plan instead (no weights, no GPU).

    onecat-serve +profile=smollm2 serve.port=8080 kv.block_size=32
    onecat-serve +profile=qwen38_27b hardware=v100-sxm2-16gb plan=true
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

CONFIG_ENV = "ONECAT_CONFIG_DIR"


def find_config_dir() -> Path:
    """$ONECAT_CONFIG_DIR, else the nearest `configs/` holding config.yaml above this file."""
    env = os.environ.get(CONFIG_ENV)
    if env:
        path = Path(env).expanduser().resolve()
        if not (path / "config.yaml").is_file():
            raise SystemExit(f"onecat-serve: {CONFIG_ENV}={env} has no config.yaml")
        return path
    for parent in Path(__file__).resolve().parents:
        if (parent / "configs" / "config.yaml").is_file():
            return parent / "configs"
    raise SystemExit(f"onecat-serve: no configs/config.yaml found above {Path(__file__).resolve().parent}; "
                     f"set {CONFIG_ENV} to the configs/ directory of an onecat checkout")


def serve(cfg) -> None:
    """Finalize the route; plan=true: print the plan and exit; else check admission and serve."""
    from .config_store import RouteError, finalize
    from .hardware import detect

    here = detect()
    try:
        route = finalize(cfg, here)
    except RouteError as e:
        raise SystemExit(str(e)) from None
    if route.config.plan:
        print_plan(route)
        return
    start(route, here)


def print_plan(route) -> None:
    from .admission import admit
    from .planner import plan

    print(plan(route).format())
    print()
    print(admit(route, route.device).table())
    sys.stdout.flush()


def check_startable(route, here):
    """The admission report on this machine; SystemExit listing everything not available."""
    from .admission import admit

    report = admit(route, here)
    refusals = list(route.unavailable) + report.failures
    if refusals:
        cmd = f"onecat-serve +profile={route.config.profile.name}" if route.config.profile.name else "onecat-serve ..."
        lines = [f"onecat-serve: refusing to start {route.name!r} on this machine ({here.describe()}): "
                 f"{len(refusals)} thing(s) are not available:"]
        lines += [f"  - {r}" for r in refusals]
        lines.append(f"To see its memory plan and admission without starting: {cmd} plan=true [hardware=TARGET]")
        raise SystemExit("\n".join(lines))
    return report


def start(route, here) -> None:
    import uvicorn

    from .admission import layer_kernels
    from .api_server import build_app
    from .async_llm import AsyncLLM
    from .config_store import configure_kernels, to_configs
    from .model_shape import materialize_checkpoint

    report = check_startable(route, here)
    engine_config, server_config, kernels = to_configs(route.config)
    engine_config.model.path = materialize_checkpoint(route.config.model)
    configure_kernels(kernels)
    llm = AsyncLLM.from_config(engine_config)
    llm.route, llm.admission = route, report
    report.layers = layer_kernels(route, report)
    app = build_app(llm, server_config)
    print_banner(llm, engine_config, server_config, report)
    uvicorn.run(app, host=server_config.host, port=server_config.port, log_level=server_config.log_level)


def print_banner(llm, engine_config, server_config, report=None) -> None:
    url = f"http://{server_config.host}:{server_config.port}"
    print(f"onecat: serving {llm.model_name!r} at {url}/v1 (device {llm.device}, "
          f"dtype {getattr(llm, 'dtype', engine_config.model.dtype)}, max_model_len {llm.max_model_len})")
    if server_config.api_key:
        print("onecat: an API key is required (Authorization: Bearer ...)")
    if report is not None:
        print(report.table())
        print(f"onecat: the same report as JSON: GET {url}/v1/onecat/acceleration")
    else:
        print("onecat: kernel routes (admitted provider; refused ones with their reasons)")
        for row in llm.route_report():
            refused = row.get("refused") or {}
            why = "; ".join(f"{name}: {', '.join(r) if isinstance(r, list) else r}" for name, r in refused.items())
            print(f"  {row.get('problem', row.get('op'))} -> {row.get('provider')}"
                  f"{'  ' + str(row['status']) if row.get('status') else ''}{'  (refused ' + why + ')' if why else ''}")
    sys.stdout.flush()


def main() -> None:
    import hydra

    from .config_store import register_configs

    register_configs()
    hydra.main(config_path=str(find_config_dir()), config_name="config", version_base="1.3")(serve)()


if __name__ == "__main__":
    main()
