# Session 15, call 2: the f16 copy of V (f16.patch: each consumer warp converts its chunks' fp8 bytes once into a
# shared f16 copy and reads K and V from it with ldmatrix) against main's template, 16-head ws and pingpong variants
# at block_t 32 (grid-f16.toml here, sm90). Sites: none (main's kernels), f16_none, and both with the producer
# gathering only the first ring's tiles (consumer_only: the consumers' own time). The tunes check numerics first.
source .gpu/common.sh; BUDGET_S=300; source bench/logs/gpu_guard.sh
for site in none f16_none; do
  for shape in "model1 --heads 16" "v32 --heads 16"; do
    guarded "tune $site ${shape%% *}" 60 $site python3 -m tuning tune --target sm90 --kv-format $shape \
      --batches 1,64,128 --splits 1,2 --out-dir "$OUT/tune_$site"
  done
done
F=family=ws,block_h=16,num_stages=2,block_t=32,num_warps=4,num_splits=1
P=family=pingpong,block_h=16,num_stages=2,block_t=32,num_warps=4,num_splits=1
for site in consumer_only f16_consumer_only; do
  for kv in model1 v32; do
    guarded "ab $site $kv ws / pingpong" 45 $site python3 -m tuning ab --kv-format $kv --heads 16 --a $F --b $P \
      --batches 1,64,128 --rounds 10
  done
done
finish
