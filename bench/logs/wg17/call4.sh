# Session 17, call 4 (prepared for a later session, issue 22): which side of the wg ring sets a block_h 16 / 32
# tile's time, and where the softmax warpgroup waits. Wheels (.whl/<site>, carried with .gpu): `cur` = main (sm90 +
# sm89-proxy), `no_memory` and `gathers_only` = main's default grid for sm90 built with the wg template of
# bench/logs/wg17/wg_ablation.patch with ABLATE set to that name (SPARSE_MLA_AOT_TEMPLATES_DIR; README.md here):
# no_memory reads no memory past the ring's first tiles (the producer's and consumers' work unchanged),
# gathers_only's consumers release each full slot at once. Forced variants timed with `python -m tuning ab`
# (graph replay, rotating inputs; outputs not checked: two builds compute garbage), 1 row at 2 splits (16 tiles per
# program at v32) and 64 / 128 rows at 1 split; then call 3's ncu profiles of main's variants.
# Run from the repository root with .whl and .gpu carried.
source .gpu/common.sh; BUDGET_S=330; source bench/logs/gpu_guard.sh
W="family=wg,block_t=64,num_warps=4,num_stages=2"
for site in cur no_memory gathers_only; do
  for shape in "v32 16" "v32 32" "model1 16"; do set -- $shape
    guarded "ab $site $1 h$2 wg bh$2 x2 / x1" 40 $site python3 -m tuning ab --kv-format $1 --heads $2 \
      --a $W,block_h=$2,num_splits=2 --b $W,block_h=$2,num_splits=1 --batches 1,64,128 --rounds 6
  done
done
guarded "ncu wg v32" 90 cur python3 bench/ncu_profile.py --out "$OUT/ncu" --top 24 \
  --point v32/h32/topk2048:128:wg_bh32_bt64_w4_s2x1 \
  --point v32/h16/topk2048:1:wg_bh16_bt64_w4_s2x2
finish
