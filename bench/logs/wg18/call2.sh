# Session 18, call 2 (issue 22): call 1 put `pred` 3-4% behind `cur` on v32 h128 with every index valid (both rounds;
# the other shapes within 1-2%) although the two differ by 4 producer instructions per tile. Three more rounds of
# bench/logs/wg18/invalid_tail.py on the block_h 64 shapes, cur and pred in turns, the order flipped each round.
# On an H200, issue 22's table for main as in call 1. Run from the repository root with .whl and .gpu carried (.whl/cur, .whl/pred as in call 1).
source .gpu/common.sh; BUDGET_S=440; source bench/logs/gpu_guard.sh
SHAPES=v32/h128/topk2048,v32/h64/topk2048,model1/h64/topk512+128
for round in 1 2 3; do
  order="cur pred"; (( round % 2 == 0 )) && order="pred cur"
  for site in $order; do
    guarded "tails $site $round" 60 $site python3 bench/logs/wg18/invalid_tail.py --label $site --shapes $SHAPES \
      --json "$OUT/tails_${site}_$round.json"
  done
done
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then  # issue 22's yardstick, if one is lent
  SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
  guarded "peers sm90 cur" 80 cur python3 bench/peers.py --no-jit --shapes $SMALL
  guarded "peers sm89-proxy cur" 90 cur python3 bench/peers.py --no-jit --target sm89-proxy --no-flash --shapes $SMALL
fi
finish
