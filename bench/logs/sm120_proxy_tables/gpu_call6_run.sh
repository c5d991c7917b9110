# Call 6 (2026-12-05, fourth session): proxy sweeps of v32 h16 / h32 on this GPU beside call 5's model1 ones (one
# harness for all four sm120 derivations); the sm90 model1 h32 table re-tuned (it could not choose pingpong); then
# one timing run of the new tables (sm90 with FlashMLA padded, and the proxy) and of the landed main (both targets).
source .gpu/common.sh
for h in 16 32; do
  SPARSE_MLA_AOT_TARGET=sm89-proxy step "tune sm89-proxy v32 h$h" 150 new python3 -m tuning tune --target sm89-proxy --kv-format v32 --heads $h --out-dir "$OUT/tune"
done
step "tune sm90 model1 h32" 150 new python3 -m tuning tune --target sm90 --kv-format model1 --heads 32 --out-dir "$OUT/tune"
mkdir -p "$OUT/tables/sm90" "$OUT/tables/sm89-proxy"
cp variants/sm90/model1_h32.json "$OUT/tables/sm90/" && cp variants/sm89-proxy/v32_h16.json variants/sm89-proxy/v32_h32.json "$OUT/tables/sm89-proxy/"
cp variants/sm90/*.json /tmp/site_new/sparse_mla_aot/kernels/tables/sm90/
cp variants/sm89-proxy/*.json /tmp/site_new/sparse_mla_aot/kernels/tables/sm89-proxy/
SH=model1/h16/topk512+128,v32/h16/topk2048,model1/h32/topk512+128,v32/h32/topk2048
step "peers new sm90" 100 new python3 bench/peers.py --no-jit --shapes $SH --batches 1,8,32,64,128
step "peers new proxy" 100 new python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $SH --batches 1,8,32,64,128
mkdir -p "$OUT/main" && OUT_SAVE=$OUT
OUT=$OUT_SAVE/main step "peers main sm90" 80 main python3 bench/peers.py --no-jit --no-flash --shapes $SH --batches 1,8,32,64,128
OUT=$OUT_SAVE/main step "peers main proxy" 80 main python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $SH --batches 1,8,32,64,128
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
