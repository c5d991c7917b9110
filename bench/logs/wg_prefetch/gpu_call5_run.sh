# Session 6, call 5 (issue 23): the wg kernel with every thread arriving on the mbarriers ("arr") against the
# committed one ("new"): numerics, compute-sanitizer memcheck + racecheck, the GPU checks, and a wg-only tune of both.
source .gpu/common.sh
for w in new arr; do cp variants/sm90/*.json /tmp/site_$w/sparse_mla_aot/kernels/tables/sm90/; done
step "wg quick numerics arr" 40 arr python3 .gpu/wg_quick.py
WG=v32_wg_bh64_bt64_w4_s2,model1_wg_bh64_bt64_w4_s2
step "sanitize wg arr" 60 arr python3 bench/sanitize.py --label sm90_wg_arr --tools memcheck,racecheck --jobs 4 --per-job 1 --deadline-s 55 --variants $WG
for w in new arr; do
  for shape in "v32 128" "v32 64" "model1 64"; do
    set -- $shape
    step "tune wg $w $1 h$2" 40 $w python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --variants '*_wg_*' --batches 16,32,64,128 --splits 1,2,4 --out-dir "$OUT/tune_wg_$w"
  done
done
step "h200_check arr" 50 arr python3 bench/h200_check.py
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
