# Session 13, call 2: why three consumer groups are slower. Nsight Compute profiles of model1 h16 and v32 h16 at 128
# rows, one split: the trio variant against pingpong at the same 4 ring slots (trio wheel, sm90; its pingpong kernels
# are main's). Run from the repository root with .whl and .gpu carried: bash bench/logs/consumer_chains/call2.sh
source .gpu/common.sh; BUDGET_S=300; source bench/logs/gpu_guard.sh
guarded "ncu model1 h16 128 pingpong s4 / trio" 140 trio python3 bench/ncu_profile.py --out "$OUT/ncu_model1" --top 16 \
  --point model1/h16/topk512+128:128:pingpong_bh16_bt32_w4_s4x1 --point model1/h16/topk512+128:128:trio_bh16_bt32_w4_s4x1
guarded "ncu v32 h16 128 pingpong s4 / trio" 140 trio python3 bench/ncu_profile.py --out "$OUT/ncu_v32" --top 16 \
  --point v32/h16/topk2048:128:pingpong_bh16_bt32_w4_s4x1 --point v32/h16/topk2048:128:trio_bh16_bt32_w4_s4x1
finish
