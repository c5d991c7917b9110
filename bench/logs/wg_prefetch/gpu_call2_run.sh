# Session 6, call 2 (issues 23, 22): the wg producer with the L2 prefetch and the tune's full measurements in turns:
# numerics, re-tune of the sm90 tables of v32 h128 / h64 and model1 h64 (wg changed) and v32 h16 / h32 (their small
# batches chose a programmatic combine measured one after another), then one run of every shape against FlashMLA
# and the landed main, the GPU checks and compute-sanitizer on the wg variants.
source .gpu/common.sh
T0=$(date +%s)
cp -r variants/sm90 /tmp/tables_committed  # the wg-only tunes below write partial tables: restored after them
# guarded LABEL LIMIT SITE cmd...: step with its limit cut to what is left of 550 s, skipped under 15 s
guarded() { local left=$(( 550 - ($(date +%s) - T0) )) limit=$2; (( left < limit )) && limit=$left
  if (( limit < 15 )); then echo "$1 skipped: no time left" | tee -a "$SUMMARY"; return; fi
  step "$1" "$limit" "${@:3}"; }
# new: the wg producer with the L2 prefetch; exp: that and the softmax warpgroup's accumulator rescale moved before
# P's hand-off. A wg-only tune of each at 32-128 rows; the faster (sum of the best times) is used for the rest.
for w in new exp; do
  guarded "wg quick numerics $w" 40 $w python3 .gpu/wg_quick.py
  for shape in "v32 128" "v32 64" "model1 64"; do
    set -- $shape
    guarded "tune wg $w $1 h$2" 40 $w python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --variants '*_wg_*' --batches 32,64,128 --splits 1,2,4 --out-dir "$OUT/tune_wg_$w"
  done
done
rm -rf variants/sm90 && cp -r /tmp/tables_committed variants/sm90
W=$(python3 - "$OUT" <<'PY'
import re, sys, glob
total = {}
for w in ("new", "exp"):
    for log in glob.glob(f"{sys.argv[1]}/tune_wg_{w}_*.log"):
        total[w] = total.get(w, 0) + sum(float(x) for x in re.findall(r"best \S+ x\d+(?: programmatic)? ([0-9.]+) us", open(log).read()))
print("exp" if total.get("exp", 1e9) < 0.99 * total.get("new", 0) else "new")
print(total, file=sys.stderr)
PY
)
echo "wg build used from here on: $W" | tee -a "$SUMMARY"
for shape in "v32 128" "v32 64" "model1 64" "v32 16" "v32 32"; do
  set -- $shape
  guarded "tune sm90 $1 h$2" 110 $W python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --out-dir "$OUT/tune"
done
mkdir -p "$OUT/tables" && cp variants/sm90/*.json "$OUT/tables/" && cp variants/sm90/*.json /tmp/site_$W/sparse_mla_aot/kernels/tables/sm90/
ALL=v32/h128/topk2048,v32/h64/topk2048,model1/h64/topk512+128,model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
guarded "peers $W" 100 $W python3 bench/peers.py --no-jit --shapes $ALL
mv "$OUT/peers_sm90.json" "$OUT/peers_$W.json" 2>/dev/null
guarded "peers main" 80 main python3 bench/peers.py --no-jit --no-flash --shapes $ALL
mv "$OUT/peers_sm90.json" "$OUT/peers_main.json" 2>/dev/null
guarded "h200_check $W" 60 $W python3 bench/h200_check.py
WG=v32_wg_bh64_bt64_w4_s2,model1_wg_bh64_bt64_w4_s2
guarded "sanitize wg" 60 $W python3 bench/sanitize.py --label sm90_wg --tools memcheck,racecheck --jobs 4 --per-job 1 --deadline-s 55 --variants $WG
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
