# Session 7, call 3 (issues 23, 22): final = the tree to be committed (the wg producer's per-thread L2 line
# prefetch, the ws/pingpong per-thread arrivals, the sm90 tables of v32 h128 / h64 and model1 h64 re-tuned in
# call 2); main = the landed 61063a9. ncu of the wg kernel at v32 h128, 64 rows; a second peers run of every
# shape; the 16-32-head shapes on the sm89 proxy against the landed main.
source .gpu/common.sh
T0=$(date +%s)
guarded() { local left=$(( 300 - ($(date +%s) - T0) )) limit=$2; (( left < limit )) && limit=$left
  if (( limit < 15 )); then echo "$1 skipped: no time left" | tee -a "$SUMMARY"; return; fi
  step "$1" "$limit" "${@:3}"; }
ALL=v32/h128/topk2048,v32/h64/topk2048,model1/h64/topk512+128,model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
guarded "ncu wg v32 h128 64 rows final" 100 final python3 bench/ncu_profile.py --out "$OUT/ncu_final" --point v32/h128/topk2048:64:wg_bh64_bt64_w4_s2x1 --top 16
guarded "peers final" 90 final python3 bench/peers.py --no-jit --shapes $ALL; mv "$OUT/peers_sm90.json" "$OUT/peers_final.json" 2>/dev/null
guarded "peers proxy final" 60 final python3 bench/peers.py --no-jit --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_final.json" 2>/dev/null
guarded "peers proxy main" 60 main python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_main.json" 2>/dev/null
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
