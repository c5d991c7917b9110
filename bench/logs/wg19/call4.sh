# Session 19, call 4 (issue 22): after call 1's timeline (the producer's ~4,250 cycles per tile set the block_h 16
# variants' pace, the consumers wait for full slots) and call 3's profile: pp2 = pp with two producer warpgroups,
# one per half-tile (16 warps at 128 registers; setmaxnreg 160 for the second consumer group, 96 per producer),
# built from a worktree with pp2.patch (template and contract: the block_h 16 wg variant launches 16 warps). The gate
# of the 16-head shapes for main, pp and pp2 in two rounds (opposite orders), then compute-sanitizer of pp2's two
# variants. Sites as in call1.sh (.ovl/pp2 also carries pp2's contract.py); run from the repository root with .whl,
# .ovl and .gpu carried.
source .gpu/common.sh; BUDGET_S=250; source bench/logs/gpu_guard.sh
for o in .ovl/*/; do s=$(basename "$o"); rm -rf /tmp/site_$s; cp -r /tmp/site_main /tmp/site_$s && cp -r "$o". /tmp/site_$s/; done
for round in 1 2; do
  order="main pp pp2"; [[ $round == 2 ]] && order="pp2 pp main"
  for kv in v32 model1; do for site in $order; do
    guarded "gate $round $site $kv h16" 30 $site python3 -m tuning tune --target sm90 --kv-format $kv --heads 16 \
      --variants "*_wg_bh16_*" --batches 1,64,128 --splits 1,2 --out-dir "$OUT/gate${round}_$site"
  done; done
done
git checkout -q -- variants 2>/dev/null  # the gates' tables are of a subset: drop them
python3 bench/logs/wg19/gate_table.py "$OUT" >"$OUT/gate_table.txt" 2>&1; cat "$OUT/gate_table.txt" >>"$SUMMARY"
guarded "sanitize sm90 pp2" 90 pp2 python3 bench/sanitize.py --label sm90_pp2 --variants v32_wg_bh16_bt64_w4_s2,model1_wg_bh16_bt64_w4_s2 --jobs 2 --per-job 1 --deadline-s 80
finish
