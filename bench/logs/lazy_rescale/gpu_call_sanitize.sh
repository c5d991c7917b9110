# Session 12, call 3 (same H100): compute-sanitizer memcheck and racecheck of lazyall's changed ws variants on sm90
# and the sm89 proxy. model1_ws_bh16_bt64_w8_s2 is not shipped for the proxy (116,772 B of shared memory > 101,376 B),
# so the proxy run's process for it exits with the loader's KeyError; the other launches are checked.
source .gpu/common.sh; BUDGET_S=220; source bench/logs/gpu_guard.sh
V=v32_ws_bh16_bt32_w4_s4,model1_ws_bh16_bt32_w4_s4,model1_ws_bh16_bt64_w8_s2,v32_ws_bh16_bt32_w8_s2
guarded "sanitize sm90 lazyall" 90 lazyall python3 bench/sanitize.py --label sm90_lazyall --variants $V --jobs 8 --per-job 1 --deadline-s 85
guarded "sanitize proxy lazyall" 120 lazyall env SPARSE_MLA_AOT_TARGET=sm89-proxy python3 bench/sanitize.py --label sm89-proxy_lazyall --variants $V --jobs 8 --per-job 1 --deadline-s 110
finish
