# Session 14, call 4 (same warm machine as call 3): bench/peers.py of the wheel before two programs per SM
# (.whl/new, main 360114d, its own tables), sm90 then the proxy: the baseline for call 3.
source .gpu/common.sh; BUDGET_S=85; source bench/logs/gpu_guard.sh
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
guarded "peers sm90 new" 40 new python3 bench/peers.py --no-jit --no-flash --shapes $SMALL; mv "$OUT/peers_sm90.json" "$OUT/peers_new.json" 2>/dev/null
guarded "peers proxy new" 35 new python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_new.json" 2>/dev/null
finish
