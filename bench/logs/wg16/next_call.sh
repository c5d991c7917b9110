# Prepared in session 16 for a later GPU call (not run): the wg family's block_h 16 / 32 variants in three builds, the
# new variants alone per shape (numerics first, then 1 / 64 / 128 rows at 1 and 2 splits). Sites: cur (main), f16
# (main + bench/logs/wg16/f16.patch), p2 (main + bench/logs/wg16/f16_two_producers.patch), each a wheel in .whl/<site>/
# built from the default grid for sm90 (one SPARSE_MLA_AOT_BUILD_DIR for the three: only the wg variants recompile).
# Then compute-sanitizer of p2's four variants. Run from the repository root with .whl and .gpu carried.
source .gpu/common.sh; BUDGET_S=560; source bench/logs/gpu_guard.sh
for site in cur f16 p2; do
  for shape in "model1 --heads 16" "v32 --heads 16" "model1 --heads 32" "v32 --heads 32"; do
    kv=${shape%% *}; h=${shape##* }
    guarded "gate $site $kv h$h" 45 $site python3 -m tuning tune --target sm90 --kv-format $shape \
      --variants "*_wg_bh[13][62]_*" --batches 1,64,128 --splits 1,2 --out-dir "$OUT/gate_$site"
  done
done
V=v32_wg_bh16_bt64_w4_s2,v32_wg_bh32_bt64_w4_s2,model1_wg_bh16_bt64_w4_s2,model1_wg_bh32_bt64_w4_s2
guarded "sanitize sm90 p2" 75 p2 python3 bench/sanitize.py --label sm90_p2 --variants $V --jobs 4 --per-job 1 --deadline-s 65
finish
