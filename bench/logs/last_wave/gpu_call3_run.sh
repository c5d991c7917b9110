# Session 8, call 3: final (the committed tree: last-wave split, result writers on row >= unsplit_rows, the re-tuned
# sm90 v32 h128 table) against base (main before it), in one call; same-call alternations where call 2 disagreed.
source .gpu/common.sh
T0=$(date +%s)
guarded() { local left=$(( 560 - ($(date +%s) - T0) )) limit=$2; (( left < limit )) && limit=$left
  if (( limit < 15 )); then echo "$1 skipped: no time left" | tee -a "$SUMMARY"; return; fi
  step "$1" "$limit" "${@:3}"; }
ALL=v32/h128/topk2048,v32/h64/topk2048,model1/h64/topk512+128,model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
for r in 1 2; do
  for w in base final; do
    guarded "alt$r proxy model1 h16 $w" 30 $w python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes model1/h16/topk512+128; mv "$OUT/peers_sm89-proxy.json" "$OUT/alt${r}_proxy_$w.json" 2>/dev/null
    guarded "alt$r v32 h128 small $w" 30 $w python3 bench/peers.py --no-jit --no-flash --shapes v32/h128/topk2048 --batches 1,2,4,8,16; mv "$OUT/peers_sm90.json" "$OUT/alt${r}_sm90_$w.json" 2>/dev/null
  done
done
guarded "peers base" 75 base python3 bench/peers.py --no-jit --no-flash --shapes $ALL; mv "$OUT/peers_sm90.json" "$OUT/peers_base.json" 2>/dev/null
guarded "peers final" 80 final python3 bench/peers.py --no-jit --shapes $ALL; mv "$OUT/peers_sm90.json" "$OUT/peers_final.json" 2>/dev/null
guarded "peers proxy base" 70 base python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_base.json" 2>/dev/null
guarded "peers proxy final" 70 final python3 bench/peers.py --no-jit --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_final.json" 2>/dev/null
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
