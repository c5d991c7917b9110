# Session 7, call 4 (issue 22): the proxy tables of model1 h16 / h32 (2026-12-05, measured one after another) chose
# 20 / 10 splits at 4 rows where the landed main's 64 / 32 ran 6-8% faster (call 3): re-tune both in turns with the
# final build, then those shapes on the proxy, final (new tables) against main, in one call.
source .gpu/common.sh
T0=$(date +%s)
guarded() { local left=$(( 175 - ($(date +%s) - T0) )) limit=$2; (( left < limit )) && limit=$left
  if (( limit < 15 )); then echo "$1 skipped: no time left" | tee -a "$SUMMARY"; return; fi
  step "$1" "$limit" "${@:3}"; }
for h in 16 32; do
  guarded "tune proxy final model1 h$h" 65 final python3 -m tuning tune --target sm89-proxy --kv-format model1 --heads $h --out-dir "$OUT/tune"
done
mkdir -p "$OUT/tables" && cp variants/sm89-proxy/model1_h*.json "$OUT/tables/" && cp variants/sm89-proxy/*.json /tmp/site_final/sparse_mla_aot/kernels/tables/sm89-proxy/
S=model1/h16/topk512+128,model1/h32/topk512+128
guarded "peers proxy final" 25 final python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $S; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_final.json" 2>/dev/null
guarded "peers proxy main" 25 main python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $S; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_main.json" 2>/dev/null
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
