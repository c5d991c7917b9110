# Session 20, call 1 (issue 22): session 19's pp2 (bench/logs/wg19/pp2.patch: two producer warpgroups, one per
# half-tile, beside pp's two whole-tile consumer warpgroups; the block_h 16 wg variants launch 16 warps) against main.
# The gate of the 16-head shapes (wg block_h 16 variants alone, numerics first) for main and pp2 in two rounds
# (opposite orders; pp was gated in session 19); pick.py forks: if pp2's time is below 0.97 of main's, the full sm90 tunes of the
# two 16-head shapes with pp2, bench/peers.py for pp2 and main on the four 16-32-head shapes, then compute-sanitizer
# of pp2's variants; else bench/peers.py for main alone (issue 22's table on whichever GPU this is). Sites and
# overlays as in bench/logs/wg19/call1.sh; run from the repository root with .whl, .ovl and .gpu carried.
source .gpu/common.sh; BUDGET_S=400; source bench/logs/gpu_guard.sh
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
for s in pp2; do rm -rf /tmp/site_$s; cp -r /tmp/site_main /tmp/site_$s && cp -r .ovl/$s/. /tmp/site_$s/; done
gate() { guarded "gate $1 $2 $3 h16" 30 $2 python3 -m tuning tune --target sm90 --kv-format $3 --heads 16 \
  --variants "*_wg_bh16_*" --batches 1,64,128 --splits 1,2 --out-dir "$OUT/gate$1_$2"; }
for kv in v32 model1; do for site in main pp2; do gate 1 $site $kv; done; done
for kv in v32 model1; do for site in pp2 main; do gate 2 $site $kv; done; done
git checkout -q -- variants 2>/dev/null  # the gates' tables are of a subset: drop them
python3 bench/logs/wg19/gate_table.py "$OUT" >"$OUT/gate_table.txt" 2>&1; cat "$OUT/gate_table.txt" >>"$SUMMARY"
PICK=$(python3 bench/logs/wg20/pick.py "$OUT" 2>"$OUT/pick.txt"); cat "$OUT/pick.txt" >>"$SUMMARY"
echo "picked: $PICK" | tee -a "$SUMMARY"
if [[ $PICK == pp2 ]]; then
  mkdir -p "$OUT/tables/sm90"
  for t in "v32 16 110" "model1 16 120"; do set -- $t
    guarded "tune sm90 $1 h$2 pp2" $3 pp2 python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --out-dir "$OUT/tune"
    cp variants/sm90/$1_h$2.json "$OUT/tables/sm90/" && cp variants/sm90/$1_h$2.json /tmp/site_pp2/sparse_mla_aot/kernels/tables/sm90/
  done
  git checkout -q -- variants 2>/dev/null
  SITES="pp2 main"
else
  SITES=main
fi
for site in $SITES; do
  guarded "peers sm90 $site" 70 $site python3 bench/peers.py --no-jit --shapes $SMALL
  mv "$OUT/peers_sm90.json" "$OUT/peers_sm90_$site.json" 2>/dev/null
done
[[ $PICK == pp2 ]] && guarded "sanitize sm90 pp2" 80 pp2 python3 bench/sanitize.py --label sm90_pp2 \
  --variants v32_wg_bh16_bt64_w4_s2,model1_wg_bh16_bt64_w4_s2 --jobs 2 --per-job 1 --deadline-s 70
finish
