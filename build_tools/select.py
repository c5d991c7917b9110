"""Stage 4: ship or prune a compiled variant from its measured resources. Never silent: a pruned
variant keeps its figures and the reason in its JSON and in the report."""
from __future__ import annotations

from dataclasses import dataclass

from build_tools.inspect import CubinInspection
from build_tools.variant import Target

MAX_REGISTERS = 255


@dataclass(frozen=True)
class Decision:
    status: str  # "shipped" | "pruned"
    reason: str | None
    warnings: tuple[str, ...]


def total_shared_bytes(dynamic_shared: int, inspection: CubinInspection) -> int:
    return dynamic_shared + inspection.shared_static_bytes


def decide(target: Target, dynamic_shared: int, inspection: CubinInspection) -> Decision:
    shared = total_shared_bytes(dynamic_shared, inspection)
    reasons = []
    if inspection.elf_arch != target.cubin_arch:
        reasons.append(f"cubin is {inspection.elf_arch}, target needs {target.cubin_arch}")
    if shared > target.max_shared_bytes:
        reasons.append(f"{shared:,} B shared memory > {target.max_shared_bytes:,} B")
    if inspection.registers > MAX_REGISTERS:
        reasons.append(f"{inspection.registers} registers/thread > {MAX_REGISTERS}")
    warnings = []
    if inspection.stack_bytes or inspection.local_bytes:
        warnings.append(f"spills: {inspection.stack_bytes} B stack, {inspection.local_bytes} B local per thread; "
                        f"in the main loop {inspection.loop_spill_stores} stores / {inspection.loop_spill_loads} "
                        f"loads per tile")
    if not inspection.mma_instructions:
        warnings.append("no tensor-core (MMA) instruction in the SASS")
    if reasons:
        return Decision("pruned", "; ".join(reasons), tuple(warnings))
    return Decision("shipped", None, tuple(warnings))
