"""A PTX pass between Triton's PTX and ptxas: drop the CTA barriers (`bar.sync 0`) that order nothing.

Triton 3.9 lowers every wgmma dot of an 8-warp kernel with a CTA barrier after its `wgmma.wait_group`, whether or
not anything writes the operands' shared memory next: the large-batch v32 winner executed 11 barriers per tile
where Triton 3.6 compiles the same source with 2 (docs/design.md#redundant-cta-barriers-a-ptx-pass). A barrier only
orders memory accesses of different threads, and two reads never conflict. So a barrier is redundant when the code
from the previous kept barrier to it, and from it to the next barrier, holds no memory write: no instruction on
either side can then form a hazard that this barrier, and not a kept one, separates. Conservative by construction:
- it looks only inside straight-line code: a branch, a branch target, a call, a return or any other barrier form
  between two `bar.sync 0` keeps both neighbours;
- a write is any store but to a thread's own local or parameter space (shared, global or generic), a matrix or
  surface store, an atomic or reduction, any `cp.*` copy or its wait (asynchronous writes land until then), an
  mbarrier operation; every statement of an inline-asm block is read for them;
- everything else (loads, ldmatrix, wgmma, whose shared-memory operands are only read, fences, arithmetic) reads.
"""
from __future__ import annotations

import re

BARRIER = ("bar.sync", "0")
PASS_ID = "drop-redundant-barriers/1"  # in the toolchain (hence every cache key): bump it when the rule changes

_LABEL = re.compile(r"^\s*(\$?[\w$]+):")
_BRANCH_TARGET = re.compile(r"\b(?:bra|brx\.idx)(?:\.uni)?\s+(\$?[\w$]+)")
_WRITES = ("stmatrix", "atom", "red", "cp.", "mbarrier", "multimem", "tcgen05", "tensormap", "sust", "discard")
_PRIVATE_STORES = ("st.local", "st.param")
_CONTROL = ("bra", "brx", "call", "ret", "exit", "trap", "bar")  # "bar" also starts barrier.*


def _statements(line: str) -> list[str]:
    """The statements of one PTX line (inline asm puts several on a line, inside braces), without comments and
    predicates."""
    code = line.split("//", 1)[0]
    statements = []
    for part in re.split(r"[;{}]", code):
        words = part.split()
        if words and words[0].startswith("@"):
            words = words[1:]
        if words:
            statements.append(" ".join(words))
    return statements


def _is_write(opcode: str) -> bool:
    if opcode == "st" or opcode.startswith("st."):
        return not opcode.startswith(_PRIVATE_STORES)
    return opcode.startswith(_WRITES)


def _line_kind(line: str, branch_targets: set[str]) -> str:
    """'barrier' (a removable `bar.sync 0`), 'boundary' (a write or a control-flow boundary: neighbouring barriers
    stay) or 'read' (everything else)."""
    label = _LABEL.match(line)
    if label and label.group(1) in branch_targets:
        return "boundary"
    statements = _statements(line[label.end():] if label else line)
    if len(statements) == 1 and statements[0].split() == list(BARRIER):
        return "barrier"
    for statement in statements:
        opcode = statement.split()[0]
        if _is_write(opcode) or opcode.startswith(_CONTROL):
            return "boundary"
    return "read"


def drop_redundant_barriers(ptx: str) -> tuple[str, int]:
    """The PTX without its redundant `bar.sync 0` lines, and how many went."""
    lines = ptx.split("\n")
    branch_targets = set(_BRANCH_TARGET.findall(ptx))
    kinds = [_line_kind(line, branch_targets) for line in lines]
    barriers = [i for i, kind in enumerate(kinds) if kind == "barrier"]
    dropped: set[int] = set()
    previous = barriers[0] if barriers else 0  # the last barrier kept
    for here, following in zip(barriers[1:-1], barriers[2:]):
        if all(kinds[i] != "boundary" for i in range(previous + 1, following)):
            dropped.add(here)
        else:
            previous = here
    return "\n".join(line for i, line in enumerate(lines) if i not in dropped), len(dropped)
