"""tools/sass/compare.py: equal SASS for a change that moves no machine code (a comment, a renamed local), a
listed difference for one that does, and a clear line for a source that no longer compiles (CPU, NVRTC 12.9 and the
triton wheel's cuobjdump, as the sm_70 gate)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from onecat.kernels import build

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("sass_compare", ROOT / "tools" / "sass" / "compare.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


compare = _load()


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> tuple[Path, Path]:
    try:
        build.cuobjdump()
        build.toolchain(70)
    except build.ToolchainError as e:
        pytest.fail(str(e))  # CI installs both (the sm_70 gate's pins)
    root = tmp_path_factory.mktemp("csrc")
    base, head = root / "base", root / "head"
    shutil.copytree(build.CSRC, base)
    shutil.copytree(build.CSRC, head)
    act = (head / "activation.cu").read_text()
    (head / "activation.cu").write_text("// a comment moves every line below it\n\n" + act)
    cache = (head / "cache.cu").read_text()
    assert cache.count("const i64 slot = ") >= 1
    (head / "cache.cu").write_text(cache.replace("const i64 slot = ", "const i64 slot = 1 + "))
    (head / "rotary.cu").write_text((head / "rotary.cu").read_text() + "\nthis is not C++\n")
    return base, head


def test_comment_is_same_sass_and_code_change_differs(trees):
    base, head = trees
    result = compare.compare_trees(base, head, ["activation.cu", "cache.cu", "rotary.cu"], [70], jobs=1)
    lines, kernels = result[("activation.cu", 70)]
    assert lines == [] and len(kernels) == 6, lines
    lines, _ = result[("cache.cu", 70)]
    assert lines and all(line.startswith("differs: ") and "instructions (" in line for line in lines), lines
    lines, kernels = result[("rotary.cu", 70)]
    assert isinstance(kernels, str) and kernels.startswith("does not compile: ") and "error" in kernels
    assert lines == [f"base builds, head {kernels}"]


def test_instructions_leave_out_offsets_and_encodings():
    body = ("        /*0000*/                   MOV R1, c[0x0][0x28] ;       /* 0x00000a0000017a02 */\n"
            "                                                             /* 0x000fc40000000f00 */\n"
            "        .L_x_0:\n"
            "        /*0010*/                   EXIT ;                       /* 0x000000000000794d */\n")
    assert compare._instructions(body) == ["MOV R1, c[0x0][0x28] ;", "EXIT ;"]


def test_opcode_change_counts_opcodes_not_operands():
    base = ["@P0 HFMA2 R1, R2, R3, R4 ;", "HMUL2 R5, R1, R6 ;", "LOP3.LUT R7, R8, 0xf, RZ, 0xc0, !PT ;"]
    assert compare._opcode_change(base, ["HFMA2 R9, R2, R3, R4 ;", *base[1:]]).startswith("the same instructions")
    assert compare._opcode_change(base, base[:1] + base[2:] * 3) == "LOP3 +2, HMUL2 -1"
