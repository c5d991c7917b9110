# Session 19, call 1 (issue 22), prepared; not run in session 19 (no device was lent). Where a wg block_h 16 / 32
# tile's time goes, and six producer / consumer changes against main. Wheels (sm90, default grid; README.md here):
# .whl/main = main 218c225; .whl/ovl = + ovl.patch; .whl/hs = + the half-step producer; .whl/hsovl = + both;
# .whl/pp = + pp.patch (block_h 16: two whole-tile consumer warpgroups in turn); .whl/hspp = + the half-step
# producer and pp.patch; .whl/s3 = + s3.patch (model1 block_h 16 with three ring slots); .whl/tl = +
# timeline.patch (cycle stamps; not a kernel to time).
# Steps: the timeline of the block_h 16 / 32 variants at 1 split; the gate (the wg block_h 16 variant alone at 16
# heads, block_h 16 and 32 at 32; numerics first, 1 / 64 / 128 rows at 1 and 2 splits), then a second round of the
# 16-head shapes (main, ovl, pp, hspp, s3) in the opposite order. call2.sh: compute-sanitizer and profiles of the
# candidates.
# Run from the repository root with .whl, .ovl and .gpu carried.
source .gpu/common.sh; BUDGET_S=570; source bench/logs/gpu_guard.sh
# The sites other than main come as overlays of main's install (the working tree's 64 MiB carry limit): each
# .ovl/<site>/ holds that wheel's cubins that differ from main's, their records and its manifest (README.md here).
for o in .ovl/*/; do s=$(basename "$o"); rm -rf /tmp/site_$s; cp -r /tmp/site_main /tmp/site_$s && cp -r "$o". /tmp/site_$s/; done
guarded "timeline" 90 tl python3 bench/logs/wg19/timeline.py --json "$OUT/timeline.json" \
  --point v32/h16/topk2048:1 --point v32/h16/topk2048:128 --point model1/h16/topk512+128:1 \
  --point model1/h16/topk512+128:128 --point v32/h32/topk2048:128:wg_bh32_bt64_w4_s2x1
for round in 1 2; do
  order="main ovl hs hsovl pp hspp s3"; heads="16 32"
  [[ $round == 2 ]] && order="s3 hspp pp ovl main" && heads=16
  for kv in v32 model1; do for h in $heads; do for site in $order; do
    [[ $site == s3 && $kv$h != model116 ]] && continue  # s3 changes model1's block_h 16 variant only
    [[ $site == *pp && $h != 16 ]] && continue  # pp changes the block_h 16 variants only
    glob="*_wg_bh16_*"; [[ $h == 32 ]] && glob="*_wg_bh[13][62]_*"
    guarded "gate $round $site $kv h$h" 40 $site python3 -m tuning tune --target sm90 --kv-format $kv --heads $h \
      --variants "$glob" --batches 1,64,128 --splits 1,2 --out-dir "$OUT/gate${round}_$site"
  done; done; done
done
git checkout -q -- variants 2>/dev/null  # the gates' tables are of a subset: drop them
python3 bench/logs/wg19/gate_table.py "$OUT" >"$OUT/gate_table.txt" 2>&1; cat "$OUT/gate_table.txt" >>"$SUMMARY"
finish
