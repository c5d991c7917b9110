"""Backward-branch ranges over 0x400 bytes in a `cuobjdump -sass` dump, with instruction counts and top opcodes
(bench/logs/wg19/README.md: the first range holding HGMMA is the softmax warpgroup's tile loop, the next the PV
warpgroup's (pp: the second consumer group's), the first holding LDG.E.128 the producer's; the long ranges after
them are the mbarrier retry paths at the end of the code branching back). Loops as the build report finds them
(build_tools.cubin_inspect.loop_ranges). python3 bench/logs/wg19/loops.py FILE.sass"""
import collections
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[3]), str(Path(__file__).resolve().parents[3] / "src")]
from build_tools import cubin_inspect  # noqa: E402

MIN_BYTES = 0x400  # shorter ranges are the mbarrier try-wait loops

program = [(int(a, 16), text) for a, text in cubin_inspect.SASS_INSTRUCTION.findall(Path(sys.argv[1]).read_text())]
for start, end in cubin_inspect.loop_ranges(program):
    if end - start <= MIN_BYTES:
        continue
    body = [text for address, text in program if start <= address <= end]
    opcodes = collections.Counter(text.split()[1] if text.startswith("@") else text.split()[0] for text in body)
    top = ", ".join(f"{name} {count}" for name, count in opcodes.most_common(12))
    print(f"loop {start:#x}-{end:#x}: {len(body)} instr; {top}")
