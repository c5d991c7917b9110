# Session 18, call 4 (prepared, not run: no device time was left): where the predicated prefetch's 4% on v32 h128
# with every index valid goes. ncu of the wg block_h 64 variant at 128 rows (one split, as the table launches it)
# from `cur` (main a993bbd, no predicate) and `pred` (the predicate; main from 5711578 on), then the same variant's
# all-valid and -1-tail time once more in turns. Wheels as in README.md here; run from the repository root with
# .whl and .gpu carried.
source .gpu/common.sh; BUDGET_S=240; source bench/logs/gpu_guard.sh
for site in cur pred; do
  guarded "ncu $site v32 h128" 80 $site python3 bench/ncu_profile.py --out "$OUT/ncu_$site" --top 24 \
    --point v32/h128/topk2048:128:wg_bh64_bt64_w4_s2x1
done
for site in cur pred; do
  guarded "tails $site" 25 $site python3 bench/logs/wg18/invalid_tail.py --label $site --shapes v32/h128/topk2048 \
    --json "$OUT/tails_$site.json"
done
finish
