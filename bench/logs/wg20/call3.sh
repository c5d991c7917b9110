# Session 20, call 3 (issue 22), after calls 1-2 (pp2, with half the work per warpgroup and tile, is no faster; main
# and pp2 both at 64-66% of DRAM peak in ncu at v32 h16, 128 rows): the ceiling of the random record gathers alone
# on this GPU (bench/gather_ceiling.py, Triton JIT on the device's triton): v32 records at the v32 h16 b=128 shape
# over programs per call, records per step and warps; model1's 584-byte records at topk 512+128. Run from the
# repository root with .gpu carried.
source .gpu/common.sh; BUDGET_S=150; source bench/logs/gpu_guard.sh
guarded "gather ceiling v32" 90 main python3 bench/gather_ceiling.py --programs 128,512 --out "$OUT/v32"
guarded "gather ceiling model1" 55 main python3 bench/gather_ceiling.py --record-bytes 584 --topk 640 \
  --programs 128 --warps 4 --out "$OUT/model1"
finish
