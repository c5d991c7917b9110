# Session 16, call 2: the sm90 tables of the 16-head shapes re-tuned with the wg family's block_h 16 / 32 variants
# (tokens as wgmma's rows) in the grid (wheel .whl/new: branch wg16, default grid, sm90 + sm89-proxy; each tune
# checks numerics first); then bench/peers.py of .whl/cur (main 8202121) and of .whl/new with the new tables, on the
# same machine, FlashMLA padded to 64 heads beside both; compute-sanitizer of the new variants. A first quick tune of the new variants alone is the gate:
# if numerics reject one, the call stops there. Run from the repository root with .whl and .gpu carried.
source .gpu/common.sh; BUDGET_S=560; source bench/logs/gpu_guard.sh
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
for kv in model1 v32; do
  guarded "gate $kv h16" 40 new python3 -m tuning tune --target sm90 --kv-format $kv --heads 16 \
    --variants "*_wg_bh[13][62]_*" --batches 1,64,128 --splits 1,2 --out-dir "$OUT/gate"
done
if grep -h "^rejected" "$OUT"/gate_*.log; then echo "gate: numerics rejected a new variant" | tee -a "$SUMMARY"; finish; exit; fi
git checkout -q -- variants 2>/dev/null  # the gate's tables are of a subset: drop them
mkdir -p "$OUT/tables/sm90"
tune() {  # tune FORMAT HEADS LIMIT: the table goes into $OUT/tables/sm90 and new's site
  guarded "tune sm90 $1 h$2" $3 new python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --out-dir "$OUT/tune"
  cp variants/sm90/$1_h$2.json "$OUT/tables/sm90/" && cp variants/sm90/$1_h$2.json /tmp/site_new/sparse_mla_aot/kernels/tables/sm90/
}
tune model1 16 150
tune v32 16 170
for site in new cur; do
  guarded "peers sm90 $site" 70 $site python3 bench/peers.py --no-jit --shapes $SMALL
  mv "$OUT/peers_sm90.json" "$OUT/peers_sm90_$site.json" 2>/dev/null
done
V=v32_wg_bh16_bt64_w4_s2,v32_wg_bh32_bt64_w4_s2,model1_wg_bh16_bt64_w4_s2,model1_wg_bh32_bt64_w4_s2
guarded "sanitize sm90 new" 75 new python3 bench/sanitize.py --label sm90_new --variants $V --jobs 4 --per-job 1 --deadline-s 65
finish
