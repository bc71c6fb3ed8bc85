"""The workspace's shape: six packages under one namespace, and dependencies pointing one way,
kernels <- quant <- models <- spec <- serve <- bench (in pyproject.toml and in every import)."""

from __future__ import annotations

import ast
import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
ORDER = ["kernels", "quant", "models", "spec", "serve", "bench"]


def test_every_package_stands_alone_under_the_namespace():
    for area in ORDER:
        pkg = ROOT / "packages" / f"onecat-{area}"
        meta = tomllib.loads((pkg / "pyproject.toml").read_text())
        assert meta["project"]["name"] == f"onecat-{area}"
        assert meta["project"]["version"]
        assert (pkg / "src" / "onecat" / area / "__init__.py").is_file()
        assert not (pkg / "src" / "onecat" / "__init__.py").exists(), "onecat is a PEP 420 namespace"
    root = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert root["tool"]["uv"]["workspace"]["members"] == ["packages/*"]


def test_declared_dependencies_point_down():
    for i, area in enumerate(ORDER):
        meta = tomllib.loads((ROOT / "packages" / f"onecat-{area}" / "pyproject.toml").read_text())
        internal = [d for d in meta["project"]["dependencies"] if d.startswith("onecat-")]
        for dep in internal:
            assert ORDER.index(dep.removeprefix("onecat-")) < i, f"onecat-{area} depends on {dep}"


def _imported_areas(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for n in names:
            parts = n.split(".")
            if parts[0] == "onecat" and len(parts) > 1:
                found.add(parts[1])
    return found


def test_imports_point_down():
    bad = []
    for i, area in enumerate(ORDER):
        for f in (ROOT / "packages" / f"onecat-{area}" / "src").rglob("*.py"):
            for other in _imported_areas(f):
                if other in ORDER and ORDER.index(other) > i:
                    bad.append(f"{f.relative_to(ROOT)} imports onecat.{other}")
    assert not bad, "\n".join(bad)


def test_tests_mirror_the_packages():
    for area in ORDER:
        assert (ROOT / "tests" / area).is_dir()
