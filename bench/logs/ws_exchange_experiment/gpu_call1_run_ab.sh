# The ws family with one exchange per tile and lazy rescaling (ws2), the same with tile i's PV issued beside tile
# i + 1's QK^T (ws3), the current kernels (head) and the landed main (main): numerics, then one timing run of each
# wheel (sm90, then the proxy). peers.py checks every timed output against the reference too.
source .gpu/common.sh
SH=model1/h16/topk512+128,v32/h16/topk2048,model1/h32/topk512+128,v32/h32/topk2048
for wheel in ws2 ws3; do step "h200_check $wheel" 90 $wheel python3 bench/h200_check.py; done
for wheel in ws3 ws2 head main; do
  step "peers $wheel" 90 $wheel python3 bench/peers.py --no-jit $([ $wheel = ws2 ] || echo --no-flash) --shapes $SH --batches 1,8,32,64,128
  mv "$OUT/peers.json" "$OUT/peers_$wheel.json" 2>/dev/null
done
for wheel in ws3 ws2 head; do
  step "proxy peers $wheel" 50 $wheel python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes model1/h16/topk512+128,v32/h16/topk2048 --batches 1,8,32,64,128
  mv "$OUT/peers.json" "$OUT/peers_proxy_$wheel.json" 2>/dev/null
done
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -maxdepth 1 -type f ! -name logs.tgz ! -name summary.txt -delete
cat "$SUMMARY"
