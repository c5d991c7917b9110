# Session 17, call 3 (issue 22): where main's wg block_h 16 / 32 programs wait (wheel .whl/cur = main 7602064, sm90 +
# sm89-proxy): bench/ncu_profile.py of v32 h32's shipped wg block_h 32 at 128 rows (x1) and of v32 h16's wg
# block_h 16 at 1 row (x2), whose per-tile time did not move when its producer's work was cut.
# Run from the repository root with .whl and .gpu carried.
source .gpu/common.sh; BUDGET_S=100; source bench/logs/gpu_guard.sh
guarded "ncu wg v32" 90 cur python3 bench/ncu_profile.py --out "$OUT/ncu" --top 24 \
  --point v32/h32/topk2048:128:wg_bh32_bt64_w4_s2x1 \
  --point v32/h16/topk2048:1:wg_bh16_bt64_w4_s2x2
finish
