# Call 9: the wg family, second version (one softmax warpgroup handing P to a PV warpgroup; indices two rounds
# ahead): quick numerics, then its times alone at the three large-head shapes.
source .gpu/common.sh
step "wg quick numerics" 90 new python3 .gpu/wg_quick.py
if grep -q "all passed" "$OUT/wg_quick_numerics.log"; then
  for shape in "v32 128" "v32 64" "model1 64"; do
    set -- $shape
    step "tune wg $1 h$2" 90 new python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --variants '*_wg_*' --batches 8,16,32,64,128 --out-dir "$OUT/tune"
  done
  step "ncu wg v32 h128" 120 new python3 bench/ncu_profile.py --point v32/h128/topk2048:128:wg_bh64_bt32_w4_s2x1
fi
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
