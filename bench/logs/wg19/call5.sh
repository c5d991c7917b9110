# Session 19, call 5 (issue 22), not run (too little device time was left to start a machine): call 4 cut to one
# round of the gate of the 16-head shapes for main and pp2 (numerics first). Sites and overlays as in call4.sh; run
# from the repository root with .whl, .ovl and .gpu carried.
source .gpu/common.sh; BUDGET_S=150; source bench/logs/gpu_guard.sh
for o in .ovl/*/; do s=$(basename "$o"); rm -rf /tmp/site_$s; cp -r /tmp/site_main /tmp/site_$s && cp -r "$o". /tmp/site_$s/; done
for kv in v32 model1; do for site in main pp2; do
  guarded "gate 1 $site $kv h16" 30 $site python3 -m tuning tune --target sm90 --kv-format $kv --heads 16 \
    --variants "*_wg_bh16_*" --batches 1,64,128 --splits 1,2 --out-dir "$OUT/gate1_$site"
done; done
git checkout -q -- variants 2>/dev/null  # the gates' tables are of a subset: drop them
python3 bench/logs/wg19/gate_table.py "$OUT" >"$OUT/gate_table.txt" 2>&1; cat "$OUT/gate_table.txt" >>"$SUMMARY"
finish
