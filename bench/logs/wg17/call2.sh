# Session 17, call 2 (issue 22): the table for main (7602064; wheel .whl/cur, default grid, sm90 +
# sm89-proxy) on whichever GPU this call gets (the yardstick is an H200): bench/peers.py on the four 16-32-head
# shapes for sm90 with FlashMLA padded to 64 heads beside, then for the proxy. Then the sm90 v32 h32 table re-tuned
# (session 16's table took wg block_h 16 at 3-4 rows, a near tie that bench/peers.py measured 2.5% slower than the
# ws variant before it) and bench/peers.py of v32 h32 with that table and with main's, back to back.
# Run from the repository root with .whl and .gpu carried.
source .gpu/common.sh; BUDGET_S=420; source bench/logs/gpu_guard.sh
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
guarded "peers sm90 cur" 80 cur python3 bench/peers.py --no-jit --shapes $SMALL
guarded "peers sm89-proxy cur" 90 cur python3 bench/peers.py --no-jit --target sm89-proxy --no-flash --shapes $SMALL
cp -r /tmp/site_cur /tmp/site_t && mkdir -p "$OUT/tables/sm90"
guarded "tune sm90 v32 h32" 100 cur python3 -m tuning tune --target sm90 --kv-format v32 --heads 32 --out-dir "$OUT/tune"
cp variants/sm90/v32_h32.json "$OUT/tables/sm90/" && cp variants/sm90/v32_h32.json /tmp/site_t/sparse_mla_aot/kernels/tables/sm90/
mv "$OUT/peers_sm90.json" "$OUT/peers_sm90_cur.json"
for site in t cur; do
  guarded "peers sm90 v32 h32 $site" 40 $site python3 bench/peers.py --no-jit --no-flash --shapes v32/h32/topk2048
  mv "$OUT/peers_sm90.json" "$OUT/peers_sm90_v32h32_$site.json"
done
finish
