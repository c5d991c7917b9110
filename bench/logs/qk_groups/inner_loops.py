"""Per-tile loops of a dumped SASS file (the innermost loops that hold an MMA): instruction count, the count without
    what a forward conditional branch inside the loop skips (the hot path: a lazy rescale not taken), top opcodes.
    python bench/logs/qk_groups/inner_loops.py FILE.sass ... (sass_counts.py writes /tmp/<variant>_<target>[_old].sass)"""
import sys, re, collections
sys.path[:0]=["src","."]
from build_tools import cubin_inspect
for f in sys.argv[1:]:
    sass=open(f).read()
    prog=[(int(a,16),t.strip()) for a,t in cubin_inspect.SASS_INSTRUCTION.findall(sass)]
    ranges=cubin_inspect.loop_ranges(prog)
    # innermost loops holding an MMA: ranges containing no other range with an MMA
    out=[]
    for lo,hi in ranges:
        ins=[t for a,t in prog if lo<=a<=hi]
        if not any("MMA" in t for t in ins): continue
        if any(l2>=lo and h2<=hi and (l2,h2)!=(lo,hi) and any("MMA" in t for a,t in prog if l2<=a<=h2) for l2,h2 in ranges): continue
        skipped=set()
        for a,t in prog:
            m=cubin_inspect.BRANCH_TARGET.search(t)
            if lo<=a<=hi and m and t.startswith("@") and "BRA" in t and a<int(m.group(1),16)<=hi:
                skipped|={b for b,_ in prog if a<b<int(m.group(1),16)}
        hot=len([a for a,t in prog if lo<=a<=hi and a not in skipped])
        c=collections.Counter(re.sub(r"^@!?U?P\w+\s+","",x).split()[0].split(".")[0] for x in ins)
        out.append((len(ins), hot, dict(c.most_common(8))))
    print(f.split("/")[-1], out)
