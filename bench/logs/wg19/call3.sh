# Session 19, call 3 (issue 22): after call 1's timeline (the producer's 4,250 cycles per tile set the block_h 16
# variants' pace), ncu profiles of main's block_h 16 variants at 128 rows (one split) for the producer's stalls; then
# the eighteenth session's prepared question (bench/logs/wg18/call4.sh): ncu of the v32 block_h 64 variant at 128
# rows from cur (main a993bbd, no prefetch predicate) and main. Wheels: .whl/main (main 218c225, sm90) and .whl/cur
# (a993bbd, sm90 + sm89-proxy); run from the repository root with .whl and .gpu carried.
source .gpu/common.sh; BUDGET_S=420; source bench/logs/gpu_guard.sh
guarded "ncu main h16" 120 main python3 bench/ncu_profile.py --out "$OUT/ncu_main_h16" --top 40 \
  --point v32/h16/topk2048:128:wg_bh16_bt64_w4_s2x1 --point model1/h16/topk512+128:128:wg_bh16_bt64_w4_s2x1
for site in cur main; do
  guarded "ncu $site v32 h128" 90 $site python3 bench/ncu_profile.py --out "$OUT/ncu_${site}_h128" --top 24 \
    --point v32/h128/topk2048:128:wg_bh64_bt64_w4_s2x1
done
finish
