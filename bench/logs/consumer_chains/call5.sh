# Session 13, call 5: the two-per-sm wheel's ws variants under compute-sanitizer (sm90 and proxy), and bench/peers.py
# on the proxy for main's wheel (.whl/new) and tps (its proxy tables are main's). Run from the repository root with
# .whl and .gpu carried: bash bench/logs/consumer_chains/call5.sh
source .gpu/common.sh; BUDGET_S=290; source bench/logs/gpu_guard.sh
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
V=v32_ws_bh16_bt32_w4_s4,model1_ws_bh16_bt32_w4_s2,v32_ws_bh16_bt32_w4_s2,model1_ws_bh16_bt32_w4_s4
P="env SPARSE_MLA_AOT_TARGET=sm89-proxy"
guarded "sanitize sm90 tps" 70 tps python3 bench/sanitize.py --label sm90_tps --variants $V --jobs 8 --per-job 1 --deadline-s 75
guarded "peers proxy new" 80 new python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_new.json" 2>/dev/null
guarded "peers proxy tps" 80 tps python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_tps.json" 2>/dev/null
guarded "sanitize proxy tps" 60 tps $P python3 bench/sanitize.py --label sm89-proxy_tps --variants $V --jobs 8 --per-job 1 --deadline-s 75
finish
