# Session 7, call 2 (issues 23, 22). new = the committed kernels (83081c0); exp2 = new with (a) the wg producer's
# L2 prefetch as per-thread prefetch.global.L2 of each record's 128-byte lines (no bulk prefetch: ptxas looped over a
# warp's distinct addresses) and (b) every ws/pingpong consumer thread arriving on the empty/merge barriers
# (bench/logs/ws_arrivals patch, checked in call 1). main = the landed 61063a9.
source .gpu/common.sh
T0=$(date +%s)
guarded() { local left=$(( 565 - ($(date +%s) - T0) )) limit=$2; (( left < limit )) && limit=$left
  if (( limit < 15 )); then echo "$1 skipped: no time left" | tee -a "$SUMMARY"; return; fi
  step "$1" "$limit" "${@:3}"; }
ALL=v32/h128/topk2048,v32/h64/topk2048,model1/h64/topk512+128,model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
WSPROXY=model1_ws_bh16_bt32_w4_s2,model1_ws_bh16_bt32_w4_s4,v32_ws_bh16_bt32_w4_s2,v32_ws_bh16_bt32_w4_s4
WG=v32_wg_bh64_bt64_w4_s2,model1_wg_bh64_bt64_w4_s2
cp -r variants/sm90 /tmp/tables_committed
guarded "wg quick numerics exp2" 40 exp2 python3 .gpu/wg_quick.py
for w in new exp2; do
  for shape in "v32 128" "v32 64" "model1 64"; do
    set -- $shape
    guarded "tune wg $w $1 h$2" 40 $w python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --variants '*_wg_*' --batches 16,32,64,128 --splits 1,2,4 --out-dir "$OUT/tune_wg_$w"
  done
done
rm -rf variants/sm90 && cp -r /tmp/tables_committed variants/sm90
WIN=$(python3 - "$OUT" <<'PY'
import re, sys, glob
total = {}
for w in ("new", "exp2"):
    for log in glob.glob(f"{sys.argv[1]}/tune_wg_{w}_*.log"):
        total[w] = total.get(w, 0) + sum(float(x) for x in re.findall(r"best \S+ x\d+(?: programmatic)? ([0-9.]+) us", open(log).read()))
print("yes" if total.get("exp2", 1e9) < 0.99 * total.get("new", 0) else "no")
print(total, file=sys.stderr)
PY
)
echo "exp2's wg faster by > 1%: $WIN" | tee -a "$SUMMARY"
guarded "h200_check exp2" 60 exp2 python3 bench/h200_check.py
guarded "sanitize wg exp2" 50 exp2 python3 bench/sanitize.py --label sm90_wg_exp2 --tools memcheck,racecheck --jobs 2 --per-job 1 --deadline-s 45 --variants $WG
SPARSE_MLA_AOT_TARGET=sm89-proxy guarded "sanitize ws proxy exp2" 60 exp2 python3 bench/sanitize.py --label sm89-proxy_ws_exp2 --tools memcheck,racecheck --jobs 4 --per-job 1 --deadline-s 55 --variants $WSPROXY
if [ "$WIN" = yes ]; then SHAPES="v32 128;v32 64;model1 64"; else SHAPES="model1 16;model1 32;v32 16;v32 32"; fi
IFS=';' read -ra TUNE <<< "$SHAPES"
for shape in "${TUNE[@]}"; do
  set -- $shape
  guarded "tune sm90 exp2 $1 h$2" 100 exp2 python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --out-dir "$OUT/tune"
done
mkdir -p "$OUT/tables" && cp variants/sm90/*.json "$OUT/tables/" && cp variants/sm90/*.json /tmp/site_exp2/sparse_mla_aot/kernels/tables/sm90/
guarded "peers exp2" 100 exp2 python3 bench/peers.py --no-jit --shapes $ALL; mv "$OUT/peers_sm90.json" "$OUT/peers_exp2.json" 2>/dev/null
guarded "peers new" 100 new python3 bench/peers.py --no-jit --no-flash --shapes $ALL; mv "$OUT/peers_sm90.json" "$OUT/peers_new.json" 2>/dev/null
guarded "peers main" 85 main python3 bench/peers.py --no-jit --no-flash --shapes $ALL; mv "$OUT/peers_sm90.json" "$OUT/peers_main.json" 2>/dev/null
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
