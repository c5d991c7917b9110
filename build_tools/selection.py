"""Stage 4: ship or prune a compiled variant from its measured resources. Never silent: a pruned
variant keeps its figures and the reason in its JSON and in the report."""
from __future__ import annotations

from dataclasses import dataclass

from build_tools.variant import Target
from sparse_mla_aot.contract import Resources

MAX_REGISTERS = 255


@dataclass(frozen=True)
class Decision:
    status: str  # "shipped" | "pruned"
    reason: str | None
    warnings: tuple[str, ...]


def decide(target: Target, resources: Resources, ptxas_notes: tuple[str, ...] = ()) -> Decision:
    """Prune for the target's limits; warn of spills, a missing MMA and what ptxas says it lost (ptxas_notes, e.g.
    wgmmas serialized for lack of registers)."""
    shared = resources.total_shared_bytes
    reasons = []
    if resources.elf_arch != target.cubin_arch:
        reasons.append(f"cubin is {resources.elf_arch}, target needs {target.cubin_arch}")
    if shared > target.max_shared_bytes:
        reasons.append(f"{shared:,} B shared memory > {target.max_shared_bytes:,} B")
    if resources.registers > MAX_REGISTERS:
        reasons.append(f"{resources.registers} registers/thread > {MAX_REGISTERS}")
    warnings = []
    if resources.stack_bytes or resources.local_bytes:
        warnings.append(f"spills: {resources.stack_bytes} B stack, {resources.local_bytes} B local per thread; "
                        f"in the main loop {resources.loop_spill_stores} stores / {resources.loop_spill_loads} "
                        f"loads per tile")
    if not resources.mma_instructions:
        warnings.append("no tensor-core (MMA) instruction in the SASS")
    warnings += ptxas_notes
    if reasons:
        return Decision("pruned", "; ".join(reasons), tuple(warnings))
    return Decision("shipped", None, tuple(warnings))
