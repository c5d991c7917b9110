# Call 12 (2026-12-05, fifth session, issue 23): the wg family as committed (block_t 64, both halves of a tile in
# flight, P handed from the softmax warpgroup to the PV warpgroup): numerics, the sm90 tables of v32 h128 / h64 and
# model1 h64 re-tuned over every shipped variant, one timing run against FlashMLA and the landed main, the GPU
# acceptance checks and compute-sanitizer on the wg variants.
source .gpu/common.sh
step "wg quick numerics" 60 new python3 .gpu/wg_quick.py
for shape in "v32 128" "v32 64" "model1 64"; do
  set -- $shape
  step "tune sm90 $1 h$2" 100 new python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --out-dir "$OUT/tune"
done
mkdir -p "$OUT/tables" && cp variants/sm90/*.json "$OUT/tables/" && cp variants/sm90/*.json /tmp/site_new/sparse_mla_aot/kernels/tables/sm90/
SH=v32/h128/topk2048,v32/h64/topk2048,model1/h64/topk512+128
step "peers new" 80 new python3 bench/peers.py --no-jit --shapes $SH --batches 1,2,4,8,16,32,64,128
mv "$OUT/peers_sm90.json" "$OUT/peers_new.json" 2>/dev/null
step "peers main" 60 main python3 bench/peers.py --no-jit --no-flash --shapes $SH --batches 1,2,4,8,16,32,64,128
mv "$OUT/peers_sm90.json" "$OUT/peers_main.json" 2>/dev/null
step "h200_check new" 110 new python3 bench/h200_check.py
WG=v32_wg_bh64_bt64_w4_s2,model1_wg_bh64_bt64_w4_s2
step "sanitize wg" 100 new python3 bench/sanitize.py --label sm90_wg --tools memcheck,racecheck --jobs 4 --per-job 1 --deadline-s 85 --variants $WG
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
