# Call 2: numerics of every ws / pingpong variant (sm90); the sm90 h16 / h32 tables re-tuned from empty CSVs over
# every shipped variant (model1 h32 not: no time); the re-tuned tables put into the installed new wheel; then one timing run of the landed main
# and of the new build (FlashMLA padded beside the new one); then compute-sanitizer on the pingpong variants.
source .gpu/common.sh
step "h200_check new" 80 new python3 bench/h200_check.py
for shape in "model1 16 100" "v32 16 70" "v32 32 70"; do
  set -- $shape
  step "tune sm90 $1 h$2" $3 new python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --out-dir "$OUT/tune"
done
mkdir -p "$OUT/tables" && cp variants/sm90/*.json "$OUT/tables/" && cp variants/sm90/*.json /tmp/site_new/sparse_mla_aot/kernels/tables/sm90/
SH=model1/h16/topk512+128,v32/h16/topk2048,model1/h32/topk512+128,v32/h32/topk2048
step "peers new" 100 new python3 bench/peers.py --no-jit --shapes $SH --batches 1,8,32,64,128
mv "$OUT/peers.json" "$OUT/peers_new.json" 2>/dev/null
step "peers main" 80 main python3 bench/peers.py --no-jit --no-flash --shapes $SH --batches 1,8,32,64,128
mv "$OUT/peers.json" "$OUT/peers_main.json" 2>/dev/null
PP=v32_pingpong_bh16_bt32_w4_s2,v32_pingpong_bh16_bt32_w4_s4,model1_pingpong_bh16_bt32_w4_s2,model1_pingpong_bh16_bt32_w4_s4
step "sanitize pingpong" 90 new python3 bench/sanitize.py --label sm90_pingpong --tools memcheck,racecheck --jobs 8 --per-job 1 --deadline-s 70 --variants $PP
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
