# Session 18, call 1 (issue 22): the wg producer's L2 prefetch predicated on index >= 0 (an invalid token's address
# is token 0's, so every program's -1 indices prefetched the same lines). Wheels (.whl/<site>, carried with .gpu):
# `cur` = main a993bbd (sm90 + sm89-proxy), `pred` = main + the predicated prefetch (sm90), `nomem` = `pred` with
# bench/logs/wg17/wg_ablation.patch's ABLATE = "no_memory" (sm90). Steps: bench/logs/wg18/invalid_tail.py with cur
# and pred in alternation (rows ending in -1 against all-valid rows, the tables' launches); the wg17 ablation's
# memory-less block_h 16 / 32 variants again, now that no prefetch goes to token 0; on an H200 only, issue 22's table
# for main (bench/peers.py, both targets).
# Run from the repository root with .whl and .gpu carried.
source .gpu/common.sh; BUDGET_S=560; source bench/logs/gpu_guard.sh
for round in 1 2; do
  for site in cur pred; do
    guarded "tails $site $round" 110 $site python3 bench/logs/wg18/invalid_tail.py --label $site \
      --json "$OUT/tails_${site}_$round.json"
  done
done
W="family=wg,block_t=64,num_warps=4,num_stages=2"
for shape in "v32 16" "v32 32" "model1 16"; do set -- $shape
  guarded "ab nomem $1 h$2 wg bh$2 x2 / x1" 40 nomem python3 -m tuning ab --kv-format $1 --heads $2 \
    --a $W,block_h=$2,num_splits=2 --b $W,block_h=$2,num_splits=1 --batches 1,64,128 --rounds 6
done
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
  guarded "peers sm90 cur" 80 cur python3 bench/peers.py --no-jit --shapes $SMALL
  guarded "peers sm89-proxy cur" 90 cur python3 bench/peers.py --no-jit --target sm89-proxy --no-flash --shapes $SMALL
fi
finish
