# Session 8, call 2: tailB (the last-wave split, result writers reading row >= unsplit_rows: the producer's
# captures as in main) against tail (call 1's build: the writers took part_row / row_splits) and base (main).
source .gpu/common.sh
T0=$(date +%s)
guarded() { local left=$(( 560 - ($(date +%s) - T0) )) limit=$2; (( left < limit )) && limit=$left
  if (( limit < 15 )); then echo "$1 skipped: no time left" | tee -a "$SUMMARY"; return; fi
  step "$1" "$limit" "${@:3}"; }
ALL=v32/h128/topk2048,v32/h64/topk2048,model1/h64/topk512+128,model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
SM90_TABLE_VARIANTS=$(cat variants/sm90/*.json | grep '"variant"' | sort -u | sed 's/.*: "\(.*\)",*/\1/' | paste -sd,)
for w in base tail tailB; do
  for shape in "v32 128" "v32 64" "model1 64"; do
    set -- $shape
    guarded "tune wg $w $1 h$2" 40 $w python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --variants '*_wg_*' --batches 16,32,64,128 --splits 1,2,4 --out-dir "$OUT/tune_wg_$w"
  done
done
for w in base tail; do
  guarded "ncu wg v32 h128 64 rows $w" 60 $w python3 bench/ncu_profile.py --out "$OUT/ncu_$w" --point v32/h128/topk2048:64:wg_bh64_bt64_w4_s2x1 --top 16
done
guarded "h200_check tailB" 80 tailB python3 bench/h200_check.py
guarded "peers tailB" 80 tailB python3 bench/peers.py --no-jit --shapes $ALL; mv "$OUT/peers_sm90.json" "$OUT/peers_tailB.json" 2>/dev/null
guarded "tune tailB v32 h128" 80 tailB python3 -m tuning tune --target sm90 --kv-format v32 --heads 128 --out-dir "$OUT/tune"; cp variants/sm90/v32_h128.json "$OUT/tune/" 2>/dev/null
guarded "sanitize memcheck tailB" 60 tailB python3 bench/sanitize.py --label sm90_tailB --tools memcheck --jobs 8 --per-job 2 --deadline-s 55 --variants $SM90_TABLE_VARIANTS
guarded "h200_check proxy tailB" 70 tailB env SPARSE_MLA_AOT_TARGET=sm89-proxy python3 bench/h200_check.py
guarded "peers proxy tailB" 50 tailB python3 bench/peers.py --no-jit --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_tailB.json" 2>/dev/null
guarded "peers proxy base" 50 base python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_base.json" 2>/dev/null
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
