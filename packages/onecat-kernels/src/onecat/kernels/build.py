"""NVRTC build: CUDA C++ in csrc/ -> cubin for one exact arch, cached on disk.

NVRTC is reached through ctypes on the shared library a pip wheel ships (no toolkit, no host
compiler, no extra bindings). sm_70 needs NVRTC 12.x (CUDA 13 dropped Volta); newer GPUs may use
any NVRTC that lists their arch. Cache key: source and local headers, options, arch, NVRTC version
and the CUDA headers used. `resource_usage` parses ptxas' `-v` report (registers, spills, smem); `sass` reads a
cubin's SASS with the sm_70-capable cuobjdump of the triton wheel (the sm_70 gate, tools/sass/compare.py).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

CSRC = Path(__file__).parent / "csrc"
NVRTC12_PIN = "nvidia-cuda-nvrtc-cu12==12.9.86 nvidia-cuda-runtime-cu12==12.9.79"
DEFAULT_OPTIONS = ("-std=c++17", "-default-device", "-lineinfo", "--ptxas-options=-v")
# Sources using an arch's architecture-specific features (sm_90a: wgmma), built for "sm_<arch>a" there:
# such a cubin loads on that exact arch only, as the kernel table expects.
ARCH_FEATURES = {"gemm_wg.cu": frozenset({90})}


class ToolchainError(RuntimeError):
    """No NVRTC that can target the requested arch (the message says what to install)."""


@dataclass(frozen=True)
class Toolchain:
    lib: str  # path of libnvrtc
    version: tuple[int, int]
    archs: tuple[int, ...]  # supported sm_XY as XY
    includes: tuple[str, ...]  # directories holding cuda_fp16.h / mma.h

    def describe(self) -> str:
        return f"NVRTC {self.version[0]}.{self.version[1]} ({self.lib})"


@dataclass
class Compiled:
    """One compiled source: cubin bytes and the compile log (ptxas -v report included)."""

    name: str
    arch: int
    cubin: bytes
    log: str
    key: str
    cached: bool = False
    usage: dict[str, dict[str, int]] = field(default_factory=dict)


# -- NVRTC via ctypes ----------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _nvrtc(lib: str) -> ctypes.CDLL:
    dll = ctypes.CDLL(lib)
    dll.nvrtcGetErrorString.restype = ctypes.c_char_p
    return dll


def _check(dll: ctypes.CDLL, res: int, what: str, log: str = "") -> None:
    if res != 0:
        msg = dll.nvrtcGetErrorString(res).decode()
        raise RuntimeError(f"{what} failed: {msg}" + (f"\n{log}" if log else ""))


def _probe(lib: str) -> tuple[tuple[int, int], tuple[int, ...]]:
    dll = _nvrtc(lib)
    major, minor, n = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    _check(dll, dll.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    _check(dll, dll.nvrtcGetNumSupportedArchs(ctypes.byref(n)), "nvrtcGetNumSupportedArchs")
    archs = (ctypes.c_int * n.value)()
    _check(dll, dll.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
    return (major.value, minor.value), tuple(archs)


def _candidates() -> list[tuple[str, tuple[str, ...]]]:
    """(libnvrtc path, include dirs) in order of preference: $ONECAT_NVRTC, cu12 wheel, cu13, toolkit."""
    out = []
    env = os.environ.get("ONECAT_NVRTC")
    if env:
        inc = os.environ.get("ONECAT_CUDA_INCLUDE", "")
        out.append((env, tuple(p for p in inc.split(os.pathsep) if p)))
    for d in dict.fromkeys(p for p in sys.path if p and os.path.isdir(os.path.join(p, "nvidia"))):
        nv = os.path.join(d, "nvidia")
        out.append((os.path.join(nv, "cuda_nvrtc/lib/libnvrtc.so.12"),
                    (os.path.join(nv, "cuda_runtime/include"), os.path.join(nv, "cuda_nvrtc/include"))))
        out.append((os.path.join(nv, "cu13/lib/libnvrtc.so.13"), (os.path.join(nv, "cu13/include"),)))
    out.append(("/usr/local/cuda/lib64/libnvrtc.so", ("/usr/local/cuda/include",)))
    return out


@functools.lru_cache(maxsize=None)
def toolchains() -> tuple[Toolchain, ...]:
    found = []
    for lib, incs in _candidates():
        if not os.path.exists(lib):
            continue
        incs = tuple(i for i in incs if os.path.isdir(i))
        if not any(os.path.exists(os.path.join(i, "cuda_fp16.h")) for i in incs):
            continue  # NVRTC without CUDA headers cannot build our kernels
        try:
            version, archs = _probe(lib)
        except OSError:
            continue
        found.append(Toolchain(lib, version, archs, incs))
    return tuple(found)


@functools.lru_cache(maxsize=None)
def toolchain(arch: int) -> Toolchain:
    """The first NVRTC (with headers) that can build cubin for sm_<arch>, else ToolchainError."""
    tcs = toolchains()
    for tc in tcs:
        if arch in tc.archs:
            return tc
    if not tcs:
        raise ToolchainError(f"NVRTC 12.9 not installed (or CUDA headers missing): pip install {NVRTC12_PIN}")
    have = ", ".join(f"{t.version[0]}.{t.version[1]}" for t in tcs)
    raise ToolchainError(f"no installed NVRTC ({have}) targets sm_{arch}: pip install {NVRTC12_PIN}")


def toolchain_reasons(arch: int) -> list[str]:
    try:
        toolchain(arch)
        return []
    except ToolchainError as e:
        return [str(e)]


# -- cache key -----------------------------------------------------------------------------------
_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def _local_sources(path: Path, seen: dict[Path, bytes] | None = None) -> dict[Path, bytes]:
    """The file and every local header it includes (recursively), for the cache key."""
    seen = {} if seen is None else seen
    if path in seen or not path.exists():
        return seen
    data = path.read_bytes()
    seen[path] = data
    for inc in _INCLUDE.findall(data.decode()):
        _local_sources((path.parent / inc).resolve(), seen)
    return seen


@functools.lru_cache(maxsize=None)
def _headers_digest(includes: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for d in includes:
        for name in ("cuda_fp16.h", "cuda_fp16.hpp", "mma.h"):
            p = os.path.join(d, name)
            if os.path.exists(p):
                h.update(Path(p).read_bytes())
    return h.hexdigest()


def cache_dir() -> Path:
    d = os.environ.get("ONECAT_CACHE_DIR")
    return Path(d) if d else Path.home() / ".cache" / "onecat" / "kernels"


def cache_key(path: Path, arch: int, options: tuple[str, ...], tc: Toolchain) -> str:
    h = hashlib.sha256()
    for p, data in sorted(_local_sources(path.resolve()).items()):
        h.update(p.name.encode() + b"\0" + data + b"\0")
    h.update(json.dumps([arch, list(options), list(tc.version), _headers_digest(tc.includes)]).encode())
    return h.hexdigest()


# -- compile -------------------------------------------------------------------------------------
def _nvrtc_compile(tc: Toolchain, source: bytes, name: str, options: list[str]) -> tuple[bytes, str]:
    dll = _nvrtc(tc.lib)
    prog = ctypes.c_void_p()
    _check(dll, dll.nvrtcCreateProgram(ctypes.byref(prog), source, name.encode(), 0, None, None),
           "nvrtcCreateProgram")
    try:
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        res = dll.nvrtcCompileProgram(prog, len(options), opts)
        size = ctypes.c_size_t()
        dll.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        dll.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace")
        _check(dll, res, f"NVRTC compile of {name} ({' '.join(options)})", log)
        _check(dll, dll.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
        cubin = ctypes.create_string_buffer(size.value)
        _check(dll, dll.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        return cubin.raw, log
    finally:
        dll.nvrtcDestroyProgram(ctypes.byref(prog))


def compile_source(name: str, arch: int, options: tuple[str, ...] = (), use_cache: bool = True,
                   tc: Toolchain | None = None, csrc: Path = CSRC) -> Compiled:
    """Compile csrc/<name> (a .cu file) to a cubin for sm_<arch>, via the disk cache. `csrc`: the folder its
    headers come from (another tree's copy, e.g. tools/sass/compare.py's)."""
    path = (csrc / name) if not os.path.isabs(name) else Path(name)
    tc = tc or toolchain(arch)
    target = f"sm_{arch}a" if arch in ARCH_FEATURES.get(path.name, ()) else f"sm_{arch}"
    opts = (f"--gpu-architecture={target}", *DEFAULT_OPTIONS, *options,
            f"-I{csrc}", *(f"-I{i}" for i in tc.includes))
    key = cache_key(path, arch, opts[:len(DEFAULT_OPTIONS) + 1 + len(options)], tc)
    entry = cache_dir() / key[:2] / key
    if use_cache and entry.with_suffix(".cubin").exists():
        cubin = entry.with_suffix(".cubin").read_bytes()
        log = entry.with_suffix(".log").read_text() if entry.with_suffix(".log").exists() else ""
        return Compiled(path.name, arch, cubin, log, key, True, resource_usage(log))
    cubin, log = _nvrtc_compile(tc, path.read_bytes(), path.name, list(opts))
    if use_cache:
        entry.parent.mkdir(parents=True, exist_ok=True)
        for suffix, data in ((".log", log.encode()), (".cubin", cubin)):
            tmp = entry.with_suffix(f"{suffix}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, entry.with_suffix(suffix))
    return Compiled(path.name, arch, cubin, log, key, False, resource_usage(log))


_FUNC = re.compile(r"(?:Compiling entry function|Function properties for) '?(\w+)'?")
_NUMS = {
    "registers": re.compile(r"Used (\d+) registers"),
    "smem": re.compile(r"(\d+) bytes smem"),
    "stack": re.compile(r"(\d+) bytes stack frame"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
}


def resource_usage(log: str) -> dict[str, dict[str, int]]:
    """{kernel: {registers, smem, stack, spill_stores, spill_loads}} from a ptxas -v log."""
    usage: dict[str, dict[str, int]] = {}
    current = None
    for line in log.splitlines():
        m = _FUNC.search(line)
        if m:
            current = usage.setdefault(m.group(1), {})
            continue
        if current is None:
            continue
        for key, pat in _NUMS.items():
            m = pat.search(line)
            if m:
                current[key] = int(m.group(1))
    return usage


def sources(csrc: Path = CSRC) -> list[str]:
    return sorted(p.name for p in csrc.glob("*.cu"))


# -- SASS ----------------------------------------------------------------------------------------
SASS_PIN = "triton==3.6.0"  # its wheel carries an sm_70-capable cuobjdump (the CUDA 13 tools refuse sm_70)


def cuobjdump() -> Path:
    """The cuobjdump that reads sm_70 cubins; ToolchainError (saying what to install) when missing."""
    spec = importlib.util.find_spec("triton")
    path = (Path(list(spec.submodule_search_locations)[0]) / "backends" / "nvidia" / "bin" / "cuobjdump"
            if spec is not None and spec.submodule_search_locations else None)
    if path is None or not path.exists():
        raise ToolchainError(f"no sm_70-capable cuobjdump ({path or 'triton is not installed'}): "
                             f"pip install {SASS_PIN}")
    return path


def sass(cubin: bytes, arch: int) -> dict[str, str]:
    """{kernel (mangled) name: its SASS text} of a cubin built for sm_`arch`."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([str(cuobjdump()), "--dump-sass", f.name], capture_output=True, text=True,
                              check=True).stdout
    if f"code for sm_{arch}" not in text:
        raise ToolchainError(f"cuobjdump found no sm_{arch} code in the cubin")
    funcs: dict[str, str] = {}
    for chunk in re.split(r"\n\s*Function : ", text)[1:]:
        name, _, body = chunk.partition("\n")
        funcs[name.strip()] = body
    return funcs
