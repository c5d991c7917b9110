"""Backward-branch ranges over 0x400 bytes in a `cuobjdump -sass` dump, with instruction counts and top opcodes
(bench/logs/wg19/README.md: the first range holding HGMMA is the softmax warpgroup's tile loop, the next the PV
warpgroup's (pp: the second consumer group's), the first holding LDG.E.128 the producer's; the long ranges after
them are the mbarrier retry paths at the end of the code branching back). python3 loops.py FILE.sass"""
import collections
import re
import sys

lines=open(sys.argv[1]).read().splitlines()
ins=[]
for l in lines:
    m=re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?);',l)
    if m: ins.append((int(m.group(1),16),m.group(2).strip()))
addr=[a for a,_ in ins]
for i,(a,t) in enumerate(ins):
    m=re.search(r'BRA\s+(?:`\(\.L_x_\d+\)\s*)?0x([0-9a-f]+)',t) or re.search(r'BRA .*0x([0-9a-f]+)',t)
    if 'BRA' in t and m:
        tgt=int(m.group(1),16)
        if tgt<a and a-tgt>0x400:
            body=[x for b,x in ins if tgt<=b<=a]
            ops=collections.Counter(x.split()[0] if not x.startswith('@') else x.split()[1] for x in body)
            top=", ".join(f"{k} {v}" for k,v in ops.most_common(12))
            print(f"loop {tgt:#x}-{a:#x}: {len(body)} instr; {top}")
