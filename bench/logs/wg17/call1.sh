# Session 17, call 1 (issue 22): the f16 prototypes measured against main. Wheels (sm90, default grid, one build
# directory): .whl/cur = main 7602064, .whl/f16 = main + bench/logs/wg16/f16.patch, .whl/p2 = main +
# bench/logs/wg16/f16_two_producers.patch. First the gate: the wg family's block_h 16 / 32 variants alone on the four
# 16-32-head shapes, per build (numerics first, then 1 / 64 / 128 rows at 1 and 2 splits). pick_site.py chooses the
# better prototype if it beats main's variants by 3% at 16 heads; that build then gets the full sm90 tunes of the
# 16-head shapes, bench/peers.py against cur on the same machine, compute-sanitizer of its four variants and an ncu
# profile of v32 h16 at 128 rows. Run from the repository root with .whl and .gpu carried.
source .gpu/common.sh; BUDGET_S=575; source bench/logs/gpu_guard.sh
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
for site in cur f16 p2; do
  for kv in model1 v32; do for h in 16 32; do
    guarded "gate $site $kv h$h" 40 $site python3 -m tuning tune --target sm90 --kv-format $kv --heads $h \
      --variants "*_wg_bh[13][62]_*" --batches 1,64,128 --splits 1,2 --out-dir "$OUT/gate_$site"
  done; done
done
git checkout -q -- variants 2>/dev/null  # the gates' tables are of a subset: drop them
PICK=$(python3 bench/logs/wg17/pick_site.py "$OUT" 2>"$OUT/pick.txt"); cat "$OUT/pick.txt" >>"$SUMMARY"
echo "picked: $PICK" | tee -a "$SUMMARY"
if [[ $PICK != none ]]; then
  mkdir -p "$OUT/tables/sm90"
  for t in "model1 16 140" "v32 16 110"; do set -- $t
    guarded "tune sm90 $1 h$2 $PICK" $3 $PICK python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --out-dir "$OUT/tune"
    cp variants/sm90/$1_h$2.json "$OUT/tables/sm90/" && cp variants/sm90/$1_h$2.json /tmp/site_$PICK/sparse_mla_aot/kernels/tables/sm90/
  done
  for site in $PICK cur; do
    guarded "peers sm90 $site" 60 $site python3 bench/peers.py --no-jit --shapes $SMALL
    mv "$OUT/peers_sm90.json" "$OUT/peers_sm90_$site.json" 2>/dev/null
  done
  V=v32_wg_bh16_bt64_w4_s2,v32_wg_bh32_bt64_w4_s2,model1_wg_bh16_bt64_w4_s2,model1_wg_bh32_bt64_w4_s2
  guarded "sanitize sm90 $PICK" 70 $PICK python3 bench/sanitize.py --label sm90_$PICK --variants $V --jobs 4 --per-job 1 --deadline-s 60
  guarded "ncu v32 h16 $PICK" 60 $PICK python3 bench/ncu_profile.py --out "$OUT/ncu_$PICK" \
    --point v32/h16/topk2048:128:wg_bh16_bt64_w4_s2x1 --point model1/h16/topk512+128:128:wg_bh16_bt64_w4_s2x1
fi
finish
