# Session 23, call 1 (issue 22), prepared for the next device loan (any H100 or H200: every comparison is within the
# call). The wgf8 family (`wgf8.patch`: block_h 16 and 32, the ring holds the gathered fp8 bytes, e4m3 QK^T and f16
# PV wgmmas; docs/design.md, "Tokens as the rows") has compiled on the CPU only. In order of need:
#   1. the gate: the wgf8 variants alone at 16 heads, in the tune that checks numerics first (a variant that fails
#      is rejected and named); a hang stops at the step's limit;
#   2. one tune per 16-head shape over wgf8 and every producer-family variant (ws, pingpong, wg), so each batch
#      size's best wgf8 time and the best other time come from one run; the tables it writes go to $OUT/tables;
#   3. memcheck and racecheck of four wgf8 variants; ncu of the block_h 16 ones at 128 rows;
#   4. the 32-head shapes' tunes, as the budget allows.
# `.whl/wgf8` is main + wgf8.patch built with `SPARSE_MLA_AOT_TARGETS=sm90,sm89-proxy` (README of this folder); run
# from the repository root with .whl and .gpu carried: `OUT=$OUT bash bench/logs/wg23/call1.sh`.
source .gpu/common.sh; BUDGET_S=${BUDGET_S_OVERRIDE:-570}; source bench/logs/gpu_guard.sh
TUNE="env SPARSE_MLA_AOT_TARGET=sm90 python3 -m tuning tune --target sm90"
for kv in model1 v32; do
  guarded "gate wgf8 $kv h16" 45 wgf8 $TUNE --kv-format $kv --heads 16 --variants "*_wgf8_*" --batches 1,64,128 \
    --splits 1 --out-dir "$OUT/gate"
done
# a gate that did not finish (a hang) or rejected a variant: the comparison would only repeat it; the rest of the
# budget goes to session 22's call instead
if ! grep -q "gate wgf8 model1 h16\] rc 0 " "$LOG" || ! grep -q "gate wgf8 v32 h16\] rc 0 " "$LOG" \
    || grep -q "^rejected" "$OUT"/gate_wgf8_*.log; then
  cat "$SUMMARY"; left=$(( BUDGET_S - ($(date +%s) - T0) - 20 ))
  (( left > 120 )) && BUDGET_S_OVERRIDE=$left OUT="$OUT/wg22" bash bench/logs/wg22/call1.sh
  finish; exit 0
fi
mkdir -p "$OUT/tables"
tune_shape() {  # tune_shape KV HEADS: wgf8 beside every producer-family variant; the table it writes to $OUT/tables
  local before; before=$(md5sum < variants/sm90/$1_h$2.json)
  guarded "tune $1 h$2" 110 wgf8 $TUNE --kv-format $1 --heads $2 --variants "*_[wp][gsi]*" \
    --batches 1,8,32,64,96,128 --splits 1,2 --out-dir "$OUT/tune"
  [[ $(md5sum < variants/sm90/$1_h$2.json) == "$before" ]] || cp variants/sm90/$1_h$2.json "$OUT/tables/"
}
tune_shape model1 16
tune_shape v32 16
guarded "sanitize wgf8" 150 wgf8 python3 bench/sanitize.py --label sm90_wgf8 --jobs 4 --per-job 1 --deadline-s 140 \
  --variants model1_wgf8_bh16_bt64_w4_s4,v32_wgf8_bh16_bt64_w4_s4,model1_wgf8_bh32_bt64_w4_s2,v32_wgf8_bh32_bt64_w4_s4
guarded "ncu wgf8 h16 b128" 60 wgf8 python3 bench/ncu_profile.py --out "$OUT/ncu" --top 30 \
  --point model1/h16/topk512+128:128:wgf8_bh16_bt64_w4_s4x1 --point v32/h16/topk2048:128:wgf8_bh16_bt64_w4_s4x1
for shape in "model1 32" "v32 32"; do
  (( BUDGET_S - ($(date +%s) - T0) > 120 )) && tune_shape $shape
done
finish
