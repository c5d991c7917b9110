# Session 6, call 1 (issues 23, 22): the wg producer prefetching the next tile's records into L2 ("exp") against the
# committed wg ("new"): numerics, a wg-only tune of both; both committed wheels over every shape against FlashMLA and
# the landed main ("main"); the 1-row v32 h64 regression (table's programmatic combine vs none); ncu of wg at 64 rows.
source .gpu/common.sh
for w in new exp; do cp variants/sm90/*.json /tmp/site_$w/sparse_mla_aot/kernels/tables/sm90/; done
step "wg quick numerics exp" 60 exp python3 .gpu/wg_quick.py
for w in new exp; do
  for shape in "v32 128" "v32 64" "model1 64"; do
    set -- $shape
    step "tune wg $w $1 h$2" 60 $w python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --variants '*_wg_*' --batches 8,16,32,64,128 --splits 1,2,4,8 --out-dir "$OUT/tune_$w"
  done
done
BIG=v32/h128/topk2048,v32/h64/topk2048,model1/h64/topk512+128
step "peers exp" 60 exp python3 bench/peers.py --no-jit --no-flash --shapes $BIG --batches 1,8,16,32,64,128
mv "$OUT/peers_sm90.json" "$OUT/peers_exp.json" 2>/dev/null
ALL=$BIG,model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
step "peers new" 120 new python3 bench/peers.py --no-jit --shapes $ALL
mv "$OUT/peers_sm90.json" "$OUT/peers_new.json" 2>/dev/null
step "peers main" 100 main python3 bench/peers.py --no-jit --no-flash --shapes $ALL
mv "$OUT/peers_sm90.json" "$OUT/peers_main.json" 2>/dev/null
step "ab v32 h64 b1 table vs no-pdl" 40 new python3 -m tuning ab --a table --b family=fused,block_h=16,block_t=64,num_warps=8,num_stages=1,num_splits=32 --kv-format v32 --heads 64 --batches 1 --rounds 20
step "ncu wg v32 h128 64 rows new" 100 new python3 bench/ncu_profile.py --out "$OUT/ncu_new" --point v32/h128/topk2048:64:wg_bh64_bt64_w4_s2x1 --top 16
step "ncu wg v32 h128 64 rows exp" 100 exp python3 bench/ncu_profile.py --out "$OUT/ncu_exp" --point v32/h128/topk2048:64:wg_bh64_bt64_w4_s2x1 --top 16
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
