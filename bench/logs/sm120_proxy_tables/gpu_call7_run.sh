# Call 7 (2026-12-05, fourth session): the proxy's model1 h16 / h32 with their new tables (call 5's sweeps; call 6
# ran them with the old ones, which were still in the tree on the device).
source .gpu/common.sh
cp variants/sm89-proxy/*.json /tmp/site_new/sparse_mla_aot/kernels/tables/sm89-proxy/
step "peers new proxy model1" 100 new python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes model1/h16/topk512+128,model1/h32/topk512+128 --batches 1,8,32,64,128
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
