# Call 5 (2026-12-05, fourth session): the sm89-proxy sweeps of model1 h16 and h32 that earlier calls ran out of
# time for (every shipped proxy variant x split count x 11 batch sizes), from which the sm120 / sm121 tables of
# those shapes are derived on the build host.
source .gpu/common.sh
for h in 16 32; do
  SPARSE_MLA_AOT_TARGET=sm89-proxy step "tune sm89-proxy model1 h$h" 280 new python3 -m tuning tune --target sm89-proxy --kv-format model1 --heads $h --out-dir "$OUT/tune"
done
mkdir -p "$OUT/tables" && cp variants/sm89-proxy/model1_h16.json variants/sm89-proxy/model1_h32.json "$OUT/tables/"
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
