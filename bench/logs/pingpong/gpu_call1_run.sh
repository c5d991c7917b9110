# Call 1: numerics of every ws / pingpong variant (sm90), then the sm90 h16 / h32 tables re-tuned from empty CSVs
# over every shipped variant (fused, ws, pingpong).
source .gpu/common.sh
step "h200_check new" 100 new python3 bench/h200_check.py
for shape in "model1 16 110" "v32 16 80" "model1 32 110" "v32 32 80"; do
  set -- $shape
  step "tune sm90 $1 h$2" $3 new python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --out-dir "$OUT/tune"
done
mkdir -p "$OUT/tables" && cp variants/sm90/*.json "$OUT/tables/"
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt --exclude=tune --exclude=tables * && find . -maxdepth 1 -type f ! -name logs.tgz ! -name summary.txt -delete
cat "$SUMMARY"
