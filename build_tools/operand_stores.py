"""A TTGIR pass between Triton's TTGIR and its lowering: store each dequantized dot operand to shared memory where
it is made, not where its first dot is.

On the mma.sync path (sm120, sm121, the sm89 proxy, and sm90 below block_h 64) a dot operand made in registers is
staged through shared memory (`ttg.local_alloc` of the tensor, then `ttg.local_load` in the dot's layout), and
Triton 3.9 places that store right before the operand's first dot. The QK chain then alternates store, read, dot
per chunk, and Triton's barrier pass puts a CTA barrier between each store and the read after it: a model1
block_h 16 tile ran 15 barriers, and each dequantized chunk stayed in registers until its dot. Moved to right after
the inline-asm block that dequantizes it (templates/kv_chunks.j2), every chunk of a tile is stored before the first
read, one barrier covers them, and the registers are free sooner (docs/design.md#operand-stores-hoisted-a-ttgir-pass).

Conservative by construction: an alloc moves only inside its own block, only to right after the operation that
defines its operand, and only when that operation is an `tt.elementwise_inline_asm` (the template's dequantization,
one line of TTGIR, no region). The allocation makes a fresh buffer, so nothing else reads or writes it before it
moves; loaded operands (the bf16 rope chunk) stay where Triton put them, so no buffer lives longer than the
dequantized chunks already do.
"""
from __future__ import annotations

import re

PASS_ID = "hoist-operand-stores/1"  # in the toolchain (hence every cache key): bump it when the rule changes

_ALLOC = re.compile(r"^(?P<indent> +)%[\w.$-]+ = ttg\.local_alloc (?P<operand>%[\w.$-]+)(?:#\d+)? :")
_DEQUANTIZATION = "tt.elementwise_inline_asm "


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _definition(lines: list[str], at: int, indent: str, value: str) -> int | None:
    """The line in the block of line `at` (same indentation, before it) that defines `value`, or None when the value
    comes from outside the block."""
    defines = re.compile(rf"^{indent}{re.escape(value)}(?::\d+)? = ")
    for i in range(at - 1, -1, -1):
        line = lines[i]
        if not line.strip():
            continue
        if _indent(line) < len(indent):
            return None  # the block's opening line: the value is a block argument or defined outside
        if _indent(line) == len(indent) and defines.match(line):
            return i
    return None


def hoist_operand_stores(ttgir: str) -> tuple[str, int]:
    """The TTGIR with every dequantized operand's `ttg.local_alloc` right after its inline-asm definition, and how
    many moved."""
    lines = ttgir.split("\n")
    moved = 0
    for i, line in enumerate(lines):  # a move only reorders lines i and before, so lines[i + 1:] are still unseen
        alloc = _ALLOC.match(line)
        if alloc is None:
            continue
        j = _definition(lines, i, alloc["indent"], alloc["operand"])
        if j is None or j == i - 1 or _DEQUANTIZATION not in lines[j]:
            continue
        lines.insert(j + 1, lines.pop(i))
        moved += 1
    return "\n".join(lines), moved
