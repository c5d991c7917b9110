# Call 13: is the new tree slower than the landed main at 1-4 rows (v32 h64 / h128)? Three alternating runs of both.
source .gpu/common.sh
mkdir -p /tmp/t && cp variants/sm90/*.json /tmp/site_new/sparse_mla_aot/kernels/tables/sm90/
for r in 1 2 3; do
  for w in new main; do
    step "peers $w run $r" 40 $w python3 bench/peers.py --no-jit --no-flash --shapes v32/h64/topk2048,v32/h128/topk2048 --batches 1,2,4
  done
done
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
