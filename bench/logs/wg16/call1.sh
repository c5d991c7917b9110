# Session 16, call 1: the wg family at block_h 16 and 32 (tokens as wgmma's rows) against the 16-head ws and pingpong
# variants, one experiment wheel (grid-exp.toml, sm90 only, no tables). Each tune checks numerics first.
source .gpu/common.sh; BUDGET_S=560; source bench/logs/gpu_guard.sh
for shape in "model1 --heads 16" "v32 --heads 16" "model1 --heads 32" "v32 --heads 32"; do
  kv=${shape%% *}; h=${shape##* }
  guarded "tune $kv h$h" 170 wg16 python3 -m tuning tune --target sm90 --kv-format $shape \
    --batches 1,8,32,64,96,128 --splits 1,2,4,8 --out-dir "$OUT/tune"
done
finish
