# Session 13, call 1: the trio family (three 4-warp consumer groups at 160 registers, q in shared memory, V read
# after the softmax; branch `trio`) against pingpong in one tune per shape, sm90 only. Wheel .whl/trio (grid-ci +
# trio, sm90). Run from the repository root with .whl and .gpu carried: bash bench/logs/consumer_chains/call1.sh
source .gpu/common.sh; BUDGET_S=560; source bench/logs/gpu_guard.sh
guarded "h200_check sm90 trio" 80 trio python3 bench/h200_check.py
for spec in v32/16 model1/16 v32/32 model1/32; do
  IFS=/ read -r fmt h <<<"$spec"
  guarded "tune sm90 $fmt h$h pingpong+trio" 100 trio env SPARSE_MLA_AOT_TARGET=sm90 python3 -m tuning tune \
    --target sm90 --kv-format $fmt --heads $h --variants '*_[pt][ir]*' --batches 16,32,64,96,128 --out-dir "$OUT/tune"
done
finish
