"""CUDA driver API through ctypes: load a cubin, look up a kernel, launch it on torch's stream.

Launches go to `torch.cuda.current_stream().cuda_stream`, so they are ordered with torch work and
can be captured in CUDA graphs (load kernels before capture: the first call compiles and loads).
Each `Kernel` keeps one packed argument buffer and the pointer array into it, so a launch costs a
`struct.pack_into` and one foreign call. Not thread-safe per Kernel object.
"""

from __future__ import annotations

import ctypes
import functools
import os
import struct
import threading

import torch

from . import build

_SLOT = {"p": "Q", "i": "i4x", "I": "I4x", "q": "q", "f": "f4x"}  # 8-byte slot per argument
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6


class _LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute: id, 4 bytes of padding, a 64-byte union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int), ("rest", ctypes.c_char * 60)]


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(_LaunchAttribute)), ("num_attrs", ctypes.c_uint)]


@functools.lru_cache(maxsize=None)
def libcuda() -> ctypes.CDLL:
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    lib.cuLaunchKernel.restype = ctypes.c_int
    lib.cuLaunchKernelEx.argtypes = [ctypes.POINTER(_LaunchConfig), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.cuLaunchKernelEx.restype = ctypes.c_int
    _check(lib.cuInit(0), "cuInit", lib)
    return lib


def _check(res: int, what: str, lib: ctypes.CDLL | None = None) -> None:
    if res != 0:
        lib = lib or libcuda()
        name = ctypes.c_char_p()
        lib.cuGetErrorName(res, ctypes.byref(name))
        raise RuntimeError(f"{what} failed: {name.value.decode() if name.value else res}")


def driver_reasons() -> list[str]:
    """Why no kernel can run here ([] when a CUDA device and libcuda are usable)."""
    if not torch.cuda.is_available():
        return ["no CUDA device (torch.cuda.is_available() is False)"]
    try:
        libcuda()
    except (OSError, RuntimeError) as e:
        return [f"CUDA driver unusable: {e}"]
    return []


@functools.lru_cache(maxsize=None)
def pdl_enabled(device: int) -> bool:
    """Programmatic dependent launch for the kernels built for it (Kernel(pdl=True)): on sm_90+
    (the instruction does not exist before Hopper), unless ONECAT_PDL=0."""
    return os.environ.get("ONECAT_PDL", "1") != "0" and torch.cuda.get_device_capability(device) >= (9, 0)


_modules: dict[tuple[str, int, int], tuple[ctypes.c_void_p, build.Compiled]] = {}
_lock = threading.Lock()


def _ensure_context(device: int) -> None:
    lib = libcuda()
    ctx = ctypes.c_void_p()
    _check(lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if not ctx.value:  # torch uses the primary context: make it current on this thread
        dev = ctypes.c_int()
        _check(lib.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet")
        _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        _check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


def load_module(source: str, device: int) -> tuple[ctypes.c_void_p, build.Compiled]:
    major, minor = torch.cuda.get_device_capability(device)
    arch = major * 10 + minor
    key = (source, arch, device)
    with _lock:
        if key not in _modules:
            compiled = build.compile_source(source, arch)
            with torch.cuda.device(device):
                torch.cuda.init()
                _ensure_context(device)
                mod = ctypes.c_void_p()
                _check(libcuda().cuModuleLoadData(ctypes.byref(mod), compiled.cubin),
                       f"cuModuleLoadData({source}, sm_{arch})")
            _modules[key] = (mod, compiled)
        return _modules[key]


class Kernel:
    """One `extern "C"` kernel of a csrc/ source; `signature` has one letter per argument:
    p pointer (tensor or int address, 0 for null), i int32, I uint32, q int64, f float32.
    `pdl`: the kernel follows common.cuh's programmatic-dependent-launch rule (reads nothing a
    kernel writes before pdl_wait()); on sm_90+ it is launched with the attribute that lets it start
    while the previous kernel finishes (pdl_enabled)."""

    def __init__(self, source: str, name: str, signature: str, pdl: bool = False):
        self.source, self.name, self.signature, self.pdl = source, name, signature, pdl
        if pdl:  # cuLaunchKernelEx's config, its one attribute kept alive beside it
            self._attr = _LaunchAttribute(id=CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, value=1)
            self._config = _LaunchConfig(attrs=ctypes.pointer(self._attr), num_attrs=1)
        self._fmt = "<" + "".join(_SLOT[c] for c in signature)
        self._buf = (ctypes.c_uint64 * max(1, len(signature)))()
        base = ctypes.addressof(self._buf)
        self._params = (ctypes.c_void_p * max(1, len(signature)))(*[base + 8 * i for i in range(len(signature))])
        self._fn: dict[int, ctypes.c_void_p] = {}

    def function(self, device: int) -> ctypes.c_void_p:
        fn = self._fn.get(device)
        if fn is None:
            mod, _ = load_module(self.source, device)
            fn = ctypes.c_void_p()
            _check(libcuda().cuModuleGetFunction(ctypes.byref(fn), mod, self.name.encode()),
                   f"cuModuleGetFunction({self.name})")
            self._fn[device] = fn
        return fn

    def __call__(self, grid: tuple[int, int, int], block: tuple[int, int, int], *args,
                 smem: int = 0, device: int | None = None) -> None:
        dev = torch.cuda.current_device() if device is None else device
        fn = self.function(dev)
        struct.pack_into(self._fmt, self._buf, 0, *args)
        stream = torch.cuda.current_stream(dev).cuda_stream
        if self.pdl and pdl_enabled(dev):
            c = self._config
            c.grid[0], c.grid[1], c.grid[2] = grid
            c.block[0], c.block[1], c.block[2] = block
            c.shared, c.stream = smem, stream
            res = libcuda().cuLaunchKernelEx(ctypes.byref(c), fn, self._params, None)
        else:
            res = libcuda().cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                           smem, stream, self._params, None)
        if res != 0:
            _check(res, f"cuLaunchKernel({self.name}, grid={grid}, block={block})")
