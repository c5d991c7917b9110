# Session 9, call D: call C again for the proxy's four shapes and sm90's v32 h16 / h32 (call C's CSVs and tables did
# not come back: too many files under $OUT), tarred this time.
source .gpu/common.sh
mkdir -p "$OUT/variants/sm90" "$OUT/variants/sm89-proxy"
for shape in "v32 16" "v32 32" "model1 16" "model1 32"; do
  set -- $shape
  step "tune proxy $1 h$2" 70 final env SPARSE_MLA_AOT_TARGET=sm89-proxy python3 -m tuning tune --target sm89-proxy --kv-format $1 --heads $2 --out-dir "$OUT/tune"
  cp variants/sm89-proxy/$1_h$2.json "$OUT/variants/sm89-proxy/" 2>/dev/null
done
for shape in "v32 16" "v32 32"; do
  set -- $shape
  step "tune sm90 $1 h$2" 60 final python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --out-dir "$OUT/tune"
  cp variants/sm90/$1_h$2.json "$OUT/variants/sm90/" 2>/dev/null
done
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
