"""Stage 3: read a compiled cubin's resources and instructions with the cuobjdump that ships with Triton
(no GPU needed)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from sparse_mla_aot.contract import Resources

MMA_OPCODE = re.compile(r"\b((?:H|Q|I|U|O)?G?MMA(?:\.[A-Z0-9_]+)*)\b")
RESOURCE_LINE = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")
# ptxas records its command line in the cubin's .note.nv.tkinfo; `code for sm_XX` in the SASS would not do: the
# bundled cuobjdump 13.1 prints a family cubin (sm_120f) as `sm_120`, like a plain one.
# The ptxas of pre-Blackwell targets (sm_89) writes no such note; there `code for sm_XX` is exact (no family arch).
PTXAS_ARCH = re.compile(r"Tool Command Line Arguments:.*-arch (sm_\w+)")
SASS_ARCH = re.compile(r"code for (sm_\d+[a-z]?)")
SASS_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+([^;]*?)\s*;")
BRANCH_TARGET = re.compile(r"\bBRA(?:\.[A-Z0-9_]+)*\s+(?:!?U?P[T0-9]+,\s*)?0x([0-9a-f]+)")  # sm_120: BRA.U UP0, 0x..
SPILL_STORE = re.compile(r"\bSTL\b")
SPILL_LOAD = re.compile(r"\bLDL\b")
GLOBAL_LOAD = re.compile(r"\bLDG(?:STS)?\b")
BARRIER = re.compile(r"\bBAR\.SYNC\b")  # not MEMBAR or WARPGROUP.DEPBAR


def cuobjdump_path() -> Path:
    import triton

    return Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


def _cuobjdump(*args: str) -> str:
    return subprocess.run([str(cuobjdump_path()), *args], check=True, capture_output=True, text=True).stdout


def loop_ranges(program: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """The loops of a program of (address, instruction): from a backward branch's target to the branch (the
    trailing branch-to-itself is not a loop)."""
    ranges = []
    for address, text in program:
        target = BRANCH_TARGET.search(text)
        if target and int(target.group(1), 16) < address:
            ranges.append((int(target.group(1), 16), address))
    return ranges


def loop_instructions(sass: str) -> list[str]:
    """The instructions inside loops (nested ranges counted once)."""
    program = [(int(a, 16), text) for a, text in SASS_INSTRUCTION.findall(sass)]
    ranges = loop_ranges(program)
    return [text for address, text in program if any(lo <= address <= hi for lo, hi in ranges)]


def loop_counts(loop: list[str]) -> dict[str, int]:
    """The static gate's per-tile figures (docs/design.md#the-static-gate) of the instructions inside loops."""
    return {
        "loop_instructions": len(loop),
        "loop_spill_stores": sum(1 for text in loop if SPILL_STORE.search(text)),
        "loop_spill_loads": sum(1 for text in loop if SPILL_LOAD.search(text)),
        "loop_global_loads": sum(1 for text in loop if GLOBAL_LOAD.search(text)),
        "loop_barriers": sum(1 for text in loop if BARRIER.search(text)),
    }


def inspect_cubin(cubin: Path, kernel_name: str, dynamic_shared_bytes: int) -> Resources:
    """One cuobjdump call: the ELF's notes (the arch), the resource table, and the SASS with its MMAs; with the
    dynamic shared memory Triton launches the kernel with (its metadata), the record's resources."""
    dump = _cuobjdump("--dump-elf", "--dump-resource-usage", "--dump-sass", str(cubin))
    section = dump.split(f"Function {kernel_name}:", 1)
    match = RESOURCE_LINE.search(section[1] if len(section) == 2 else "")
    if match is None:
        raise RuntimeError(f"cuobjdump printed no resource line for {kernel_name} in {cubin}:\n{dump[:2000]}")
    registers, stack, shared, local = (int(g) for g in match.groups())
    arch = PTXAS_ARCH.search(dump) or SASS_ARCH.search(dump)
    mma = sorted({m.group(1) for m in MMA_OPCODE.finditer(dump)})
    return Resources(
        elf_arch=arch.group(1) if arch else "unknown",
        registers=registers, stack_bytes=stack, local_bytes=local, shared_static_bytes=shared,
        dynamic_shared_bytes=dynamic_shared_bytes, total_shared_bytes=dynamic_shared_bytes + shared,
        mma_instructions=tuple(mma), **loop_counts(loop_instructions(dump)),
    )
