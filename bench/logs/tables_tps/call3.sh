# Session 14, call 3: bench/peers.py of main's wheel (.whl/cur) with every table of calls 1-2 installed into its site,
# sm90 with FlashMLA padded, then the proxy. Run from the repository root with .whl and .gpu carried.
source .gpu/common.sh; BUDGET_S=150; source bench/logs/gpu_guard.sh
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
for c in call1 call2; do for t in sm90 sm89-proxy; do cp bench/logs/tables_tps/$c/tables/$t/*.json /tmp/site_cur/sparse_mla_aot/kernels/tables/$t/ 2>/dev/null; done; done
guarded "peers sm90 cur" 65 cur python3 bench/peers.py --no-jit --shapes $SMALL; mv "$OUT/peers_sm90.json" "$OUT/peers_cur.json" 2>/dev/null
guarded "peers proxy cur" 60 cur python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_cur.json" 2>/dev/null
finish
