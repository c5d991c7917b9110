# Call 10: wg v4b (QK^T of a step's second tile during the first's softmax) against v3 (staging ring only):
# numerics of v4b, then both timed alone at the three large-head shapes.
source .gpu/common.sh
step "wg quick numerics new" 90 new python3 .gpu/wg_quick.py
for w in new v3; do
  for shape in "v32 128" "v32 64" "model1 64"; do
    set -- $shape
    step "tune wg $w $1 h$2" 90 $w python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --variants '*_wg_*' --batches 8,32,64,128 --out-dir "$OUT/tune_$w"
  done
done
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
