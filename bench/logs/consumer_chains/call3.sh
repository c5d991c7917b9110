# Session 13, call 3: two ws programs per SM (branch ws2: lazy-rescale's ws consumer; the 8-warp ws kernels launched
# at 128 registers per thread, setmaxnreg giving the consumer warpgroup 232 and the producer 24, so two programs share
# an SM) against main's ws kernels (one program per SM at 255) and main's pingpong, one tune per shape and wheel,
# sm90. Wheels .whl/new (main) and .whl/ws2 (grid-ci, sm90). Run from the repository root with .whl and .gpu carried:
# bash bench/logs/consumer_chains/call3.sh
source .gpu/common.sh; BUDGET_S=560; source bench/logs/gpu_guard.sh
B=8,16,32,64,96,128
for spec in model1/16 v32/16 model1/32 v32/32; do
  IFS=/ read -r fmt h <<<"$spec"
  guarded "tune sm90 $fmt h$h ws2 ws bt32 w4" 70 ws2 env SPARSE_MLA_AOT_TARGET=sm90 python3 -m tuning tune --target sm90 \
    --kv-format $fmt --heads $h --variants '*_ws_bh16_bt32_w4_*' --batches $B --out-dir "$OUT/tune_ws2"
  guarded "tune sm90 $fmt h$h new ws bt32 w4 + pingpong" 70 new env SPARSE_MLA_AOT_TARGET=sm90 python3 -m tuning tune --target sm90 \
    --kv-format $fmt --heads $h --variants '*_[wp][si]*_bh16_bt32_w4_*' --batches $B --out-dir "$OUT/tune_new"
done
finish
