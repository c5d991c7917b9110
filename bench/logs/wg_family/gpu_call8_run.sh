# Call 8 (2026-12-05, fifth session, issue 23): the wg family's first run. Quick numerics of the forced wg
# variants; then the sm90 tables of v32 h128 / h64 and model1 h64 re-tuned over every shipped variant (wg among
# them); then one timing run of those tables against FlashMLA.
source .gpu/common.sh
step "wg quick numerics" 90 new python3 .gpu/wg_quick.py
if grep -q "all passed" "$OUT/wg_quick_numerics.log"; then
  for shape in "v32 128" "v32 64" "model1 64"; do
    set -- $shape
    step "tune sm90 $1 h$2" 150 new python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --out-dir "$OUT/tune"
  done
  mkdir -p "$OUT/tables" && cp variants/sm90/*.json "$OUT/tables/" && cp variants/sm90/*.json /tmp/site_new/sparse_mla_aot/kernels/tables/sm90/
  step "peers new" 120 new python3 bench/peers.py --no-jit --shapes v32/h128/topk2048,v32/h64/topk2048,model1/h64/topk512+128 --batches 1,2,4,8,16,32,64,128
fi
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
