# racecheck's hazard-level records of one ws variant that refills its ring (3 shapes), up to 3000 of them, summarized
# per (kind, writing instruction, reading instruction).
source .gpu/common.sh
V=model1_ws_bh16_bt32_w4_s2
PYTHONPATH=/tmp/site_head:. timeout 200 compute-sanitizer --tool racecheck --racecheck-report hazard --print-limit 3000 \
  --show-backtrace no python3 bench/sanitize.py --run $V > "$OUT/hazards_$V.log" 2>&1
echo "rc $?" | tee -a "$SUMMARY"
python3 - "$OUT/hazards_$V.log" <<'PY' | tee "$OUT/hazards_summary.txt" | tee -a "$SUMMARY"
import collections, re, sys
text = open(sys.argv[1]).read()
pattern = re.compile(r"Potential (\w+) hazard detected at __shared__ (0x[0-9a-f]+).*?\n.*?(Write|Read) Thread \((\d+),.*?\+(0x[0-9a-f]+)"
                     r".*?\n.*?(Write|Read) Thread \((\d+),.*?\+(0x[0-9a-f]+)")
counts = collections.Counter()
for m in pattern.finditer(text):
    kind, addr, a_op, a_t, a_pc, b_op, b_t, b_pc = m.groups()
    counts[(kind, f"{a_op} warp {int(a_t) // 32} {a_pc}", f"{b_op} warp {int(b_t) // 32} {b_pc}")] += 1
print(f"{sum(counts.values())} records parsed")
for (kind, a, b), n in counts.most_common(40):
    print(f"{n:6d} {kind}: {a} / {b}")
print([l for l in text.splitlines() if "SUMMARY" in l][-3:])
PY
cd "$OUT" && gzip -f "hazards_$V.log"
