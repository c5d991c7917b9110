# Session 12, call 1 (written in session 11, when no device machine could be started; session 12 appended the tunes,
# which take what time is left, and FlashMLA beside lazyall). Wheels under .whl/<name>/ (README.md here): new = main's
# kernels, lazyall = fp8-qk-lazy's. Run from the repository root as `bash bench/logs/lazy_rescale/gpu_call_lazy.sh`
# with .whl and .gpu carried (.gpu/common.sh: bench/logs/issue24_faults/gpu_common.sh plus `rm -rf /tmp/site_$name`
# before each install; .gpu/flashmla_sm90_sparse_decode.tgz).
source .gpu/common.sh; BUDGET_S=580; source bench/logs/gpu_guard.sh; source bench/logs/lazy_rescale/tune_table.sh
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
P="env SPARSE_MLA_AOT_TARGET=sm89-proxy"
guarded "h200_check sm90 lazyall" 50 lazyall python3 bench/h200_check.py
guarded "peers sm90 new" 45 new python3 bench/peers.py --no-jit --no-flash --shapes $SMALL; mv "$OUT/peers_sm90.json" "$OUT/peers_new.json" 2>/dev/null
guarded "peers sm90 lazyall" 60 lazyall python3 bench/peers.py --no-jit --shapes $SMALL; mv "$OUT/peers_sm90.json" "$OUT/peers_lazyall.json" 2>/dev/null
guarded "h200_check proxy lazyall" 110 lazyall $P python3 bench/h200_check.py
guarded "peers proxy new" 90 new python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_new.json" 2>/dev/null
guarded "peers proxy lazyall" 75 lazyall python3 bench/peers.py --no-jit --target sm89-proxy --shapes $SMALL; mv "$OUT/peers_sm89-proxy.json" "$OUT/peers_proxy_lazyall.json" 2>/dev/null
for table in sm90/v32/16 sm90/model1/16 sm89-proxy/v32/16 sm89-proxy/model1/16; do
  IFS=/ read -r target fmt h <<<"$table"; tune_table $target $fmt $h 85
done
finish
