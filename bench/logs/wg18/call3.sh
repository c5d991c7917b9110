# Session 18, call 3 (issue 22): three more rounds on the block_h 64 shapes never started (five refusals and failed
# starts), so this is their smallest form for the device time left: v32 h128, where call 1 put `pred` 3-4% behind
# `cur` with every index valid, in six alternating runs of bench/logs/wg18/invalid_tail.py (cur pred pred cur cur
# pred). Run from the repository root with .whl and .gpu carried.
source .gpu/common.sh; BUDGET_S=100; source bench/logs/gpu_guard.sh
n=0
for site in cur pred pred cur cur pred; do n=$((n + 1))
  guarded "tails $site $n" 25 $site python3 bench/logs/wg18/invalid_tail.py --label $site --shapes v32/h128/topk2048 \
    --json "$OUT/tails_${site}_$n.json"
done
finish
