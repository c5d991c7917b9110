# Session 21, call 4 (issue 22), prepared for the next device loan (not run: no device time was left). Question from
# call 2's gather ceilings: pingpong's consumers release a slot once they have loaded it, so with four slots its
# producer may run about three 32-token tiles (63 KB) ahead, yet at v32 h16, 128 rows it runs at the gathers'
# 41 KiB-per-SM point (73.0 against 73.8 us on an H100; 66.7 with 82 KiB per SM). Does a deeper ring move more
# bytes? Eight slots (`ring8.patch`: WS_RING_SLOTS gets 8, the
# pingpong grid axis num_stages [2, 4, 8]; 223,504 B of shared memory on sm90 for v32, same registers and spills as
# s4; pruned on sm120 and the proxy) let it run up to seven ahead. The gate: one tune per shape over the pingpong variants, so
# s2, s4 and s8 are timed in the same run (numerics first), then memcheck and racecheck of the two s8 cubins.
# `.whl/ring8`: main + ring8.patch, `SPARSE_MLA_AOT_TARGETS=sm90,sm89-proxy` (6,481,943 B at 237adb3); run from the
# repository root with .whl and .gpu carried.
source .gpu/common.sh; BUDGET_S=${BUDGET_S_OVERRIDE:-420}; source bench/logs/gpu_guard.sh
for shape in "v32 16" "model1 16" "v32 32" "model1 32"; do
  set -- $shape
  guarded "gate ring8 $1 h$2" 60 ring8 env SPARSE_MLA_AOT_TARGET=sm90 python3 -m tuning tune --target sm90 \
    --kv-format $1 --heads $2 --variants "*_pingpong_*" --batches 1,32,64,96,128 --splits 1,2 --out-dir "$OUT/gate"
done
guarded "sanitize ring8 s8" 150 ring8 python3 bench/sanitize.py --label sm90_ring8 \
  --variants v32_pingpong_bh16_bt32_w4_s8,model1_pingpong_bh16_bt32_w4_s8 --jobs 4 --per-job 1 --deadline-s 140
finish
