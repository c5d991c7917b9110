"""Stage 3: read a compiled cubin's resources and instructions with the cuobjdump that ships with Triton
(no GPU needed)."""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sparse_mla_aot.contract import Resources

MMA_OPCODE = re.compile(r"\b((?:H|Q|I|U|O)?G?MMA(?:\.[A-Z0-9_]+)*)\b")
RESOURCE_LINE = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")
# ptxas records its command line in the cubin's .note.nv.tkinfo; `code for sm_XX` in the SASS would not do: the
# bundled cuobjdump 13.1 prints a family cubin (sm_120f) as `sm_120`, like a plain one.
PTXAS_ARCH = re.compile(r"Tool Command Line Arguments:.*-arch (sm_\w+)")


@dataclass(frozen=True)
class CubinInspection:
    elf_arch: str  # the arch ptxas assembled the ELF for, e.g. "sm_120f", "sm_90a"
    registers: int
    stack_bytes: int
    shared_static_bytes: int
    local_bytes: int
    mma_instructions: tuple[str, ...]

    def resources(self, dynamic_shared_bytes: int) -> Resources:
        """The record's resources: these figures plus the dynamic shared memory Triton launches with."""
        return Resources(elf_arch=self.elf_arch, registers=self.registers, stack_bytes=self.stack_bytes,
                         local_bytes=self.local_bytes, shared_static_bytes=self.shared_static_bytes,
                         dynamic_shared_bytes=dynamic_shared_bytes,
                         total_shared_bytes=dynamic_shared_bytes + self.shared_static_bytes,
                         mma_instructions=self.mma_instructions)


def cuobjdump_path() -> Path:
    import triton

    return Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


def _cuobjdump(*args: str) -> str:
    return subprocess.run([str(cuobjdump_path()), *args], check=True, capture_output=True, text=True).stdout


def inspect_cubin(cubin: Path, kernel_name: str) -> CubinInspection:
    """One cuobjdump call: the ELF's notes (the arch), the resource table, and the SASS with its MMAs."""
    dump = _cuobjdump("--dump-elf", "--dump-resource-usage", "--dump-sass", str(cubin))
    section = dump.split(f"Function {kernel_name}:", 1)
    match = RESOURCE_LINE.search(section[1] if len(section) == 2 else "")
    if match is None:
        raise RuntimeError(f"cuobjdump printed no resource line for {kernel_name} in {cubin}:\n{dump[:2000]}")
    registers, stack, shared, local = (int(g) for g in match.groups())
    arch = PTXAS_ARCH.search(dump)
    mma = sorted({m.group(1) for m in MMA_OPCODE.finditer(dump)})
    return CubinInspection(
        elf_arch=arch.group(1) if arch else "unknown",
        registers=registers, stack_bytes=stack, shared_static_bytes=shared, local_bytes=local,
        mma_instructions=tuple(mma),
    )
