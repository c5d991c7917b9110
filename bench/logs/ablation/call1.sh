# Session 15, call 1: which side of the ws ring limits a tile? Three sm90 builds of the ws template from one
# experiment tree (bench/logs/ablation/ablation.patch; 16-head ws and pingpong variants only, no tables):
# `none` (unchanged), `producer_only` (consumers wait for each full slot and release it at once), `consumer_only`
# (the producer gathers only the first ring's tiles; later tiles reuse the slots' bytes). Forced variants, timed
# with `python -m tuning ab` (graph replay, rotating inputs); outputs are not checked (two builds compute garbage).
# Then ncu of the unchanged model1 ws variant at 128 rows and 1 and 2 splits (are two programs resident per SM?),
# and on an H200 only, bench/peers.py of main's wheel (.whl/cur: 5f5d8ba, sm90 + sm89-proxy) for issue 22's table.
source .gpu/common.sh; BUDGET_S=540; source bench/logs/gpu_guard.sh
F=family=ws,block_h=16,num_stages=2
for site in none producer_only consumer_only; do
  guarded "ab $site model1 w4 s1 / bt64 w8 s1" 60 $site python3 -m tuning ab --kv-format model1 --heads 16 \
    --a $F,block_t=32,num_warps=4,num_splits=1 --b $F,block_t=64,num_warps=8,num_splits=1 --batches 1,64,128 --rounds 10
  guarded "ab $site model1 w4 s2 / pingpong s1" 60 $site python3 -m tuning ab --kv-format model1 --heads 16 \
    --a $F,block_t=32,num_warps=4,num_splits=2 --b family=pingpong,block_h=16,num_stages=2,block_t=32,num_warps=4,num_splits=1 --batches 1,64,128 --rounds 10
  guarded "ab $site v32 w4 s1 / pingpong s1" 60 $site python3 -m tuning ab --kv-format v32 --heads 16 \
    --a $F,block_t=32,num_warps=4,num_splits=1 --b family=pingpong,block_h=16,num_stages=2,block_t=32,num_warps=4,num_splits=1 --batches 1,64,128 --rounds 10
done
guarded "ab none model1 one tile (topk 32, no extra)" 45 none python3 -m tuning ab --kv-format model1 --heads 16 --topk 32 --extra-topk 0 \
  --a $F,block_t=32,num_warps=4,num_splits=1 --b family=pingpong,block_h=16,num_stages=2,block_t=32,num_warps=4,num_splits=1 --batches 1,64,128 --rounds 10
guarded "ncu none model1 ws 128x2" 90 none python3 bench/ncu_profile.py --point model1/h16/topk512+128:128:ws_bh16_bt32_w4_s2x2 --point model1/h16/topk512+128:128:ws_bh16_bt32_w4_s2x1
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
  guarded "peers sm90 cur" 70 cur python3 bench/peers.py --no-jit --shapes $SMALL
  guarded "peers proxy cur" 70 cur python3 bench/peers.py --no-jit --no-flash --target sm89-proxy --shapes $SMALL
fi
finish
