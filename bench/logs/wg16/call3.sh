# Session 16, call 3: the sm90 tables of the 32-head shapes re-tuned (wheel .whl/new, as in call 2), call 2's
# 16-head tables installed first (bench/logs/wg16/call2/tables); bench/peers.py with all four new tables;
# bench/h200_check.py (numerics of every shipped ws / pingpong / wg variant, their graph replays with fresh inputs,
# the dispatched op). It ran on call 2's warm machine with what device time was left (BUDGET_S 285; call 2 had run
# the sanitizer).
# Run from the repository root with .whl and .gpu carried.
source .gpu/common.sh; BUDGET_S=285; source bench/logs/gpu_guard.sh
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
cp bench/logs/wg16/call2/tables/sm90/*.json /tmp/site_new/sparse_mla_aot/kernels/tables/sm90/
mkdir -p "$OUT/tables/sm90"
tune() {  # tune FORMAT HEADS LIMIT: the table goes into $OUT/tables/sm90 and new's site
  guarded "tune sm90 $1 h$2" $3 new python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --out-dir "$OUT/tune"
  cp variants/sm90/$1_h$2.json "$OUT/tables/sm90/" && cp variants/sm90/$1_h$2.json /tmp/site_new/sparse_mla_aot/kernels/tables/sm90/
}
tune model1 32 130
tune v32 32 150
guarded "peers sm90 new" 60 new python3 bench/peers.py --no-jit --shapes $SMALL
V=v32_wg_bh16_bt64_w4_s2,v32_wg_bh32_bt64_w4_s2,model1_wg_bh16_bt64_w4_s2,model1_wg_bh32_bt64_w4_s2
guarded "sanitize sm90 new" 80 new python3 bench/sanitize.py --label sm90_new --variants $V --jobs 4 --per-job 1 --deadline-s 70
guarded "h200_check sm90 new" 140 new python3 bench/h200_check.py
finish
