# Session 20, call 2 (issue 22), after call 1 (pp2 1.04-1.05x main's time at v32 h16 from 64 rows, 0.99-1.01 on
# model1: halving each warpgroup's work per tile does not shorten the tile): ncu of main's and pp2's block_h 16
# variant at v32 h16, 128 rows, one split, on the same machine, for what bounds both (DRAM throughput, L2, stalls).
# Sites and overlays as in call1.sh; run from the repository root with .whl, .ovl and .gpu carried.
source .gpu/common.sh; BUDGET_S=200; source bench/logs/gpu_guard.sh
rm -rf /tmp/site_pp2; cp -r /tmp/site_main /tmp/site_pp2 && cp -r .ovl/pp2/. /tmp/site_pp2/
for site in main pp2; do
  guarded "ncu $site v32 h16" 95 $site python3 bench/ncu_profile.py --out "$OUT/ncu_$site" --top 30 \
    --point v32/h16/topk2048:128:wg_bh16_bt64_w4_s2x1
done
finish
