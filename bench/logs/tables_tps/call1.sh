# Session 14, call 1: compute-sanitizer of main's two-per-SM ws cubins on sm90 (memcheck + racecheck); proxy sweeps of
# model1 h16 / h32 with main's kernels (wheel .whl/cur: main f0e93c0, default grid, sm90 + proxy), the measurements
# the sm120 / sm121 tables are derived from (python -m build_tools tables --target sm120 --proxy-sweep <dir>); the
# sm90 model1 h16 table re-tuned.
# Run from the repository root with .whl and .gpu carried: bash bench/logs/tables_tps/call1.sh
source .gpu/common.sh; BUDGET_S=455; source bench/logs/gpu_guard.sh
V=v32_ws_bh16_bt32_w4_s4,model1_ws_bh16_bt32_w4_s2,v32_ws_bh16_bt32_w4_s2,model1_ws_bh16_bt32_w4_s4
mkdir -p "$OUT/tables/sm90" "$OUT/tables/sm89-proxy"
guarded "sanitize sm90 cur" 110 cur python3 bench/sanitize.py --label sm90_cur --variants $V --jobs 8 --per-job 1 --deadline-s 100
tune() {  # tune TARGET FORMAT HEADS LIMIT: the table goes into $OUT/tables/TARGET and cur's site
  guarded "tune $1 $2 h$3" $4 cur env SPARSE_MLA_AOT_TARGET=$1 python3 -m tuning tune --target $1 --kv-format $2 \
    --heads $3 --out-dir "$OUT/tune"
  cp variants/$1/$2_h$3.json "$OUT/tables/$1/" && cp variants/$1/$2_h$3.json /tmp/site_cur/sparse_mla_aot/kernels/tables/$1/
}
tune sm89-proxy model1 16 100
tune sm89-proxy model1 32 85
tune sm90 model1 16 145
finish
