# Session 21, call 1 (issue 22): session 20's call 4 (issue 22's table for main on both targets, and beside it the
# ceiling of the random record gathers alone on the same GPU) plus ncu of the tables' choices at b=128 for the two
# 16-head shapes, for what limits them. `.whl/main` is main's wheel with both targets
# (`SPARSE_MLA_AOT_TARGETS=sm90,sm89-proxy`); run from the repository root with .whl and .gpu carried.
source .gpu/common.sh; BUDGET_S=480; source bench/logs/gpu_guard.sh
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
guarded "peers sm90 main" 120 main python3 bench/peers.py --no-jit --shapes $SMALL
guarded "peers sm89-proxy main" 120 main python3 bench/peers.py --no-jit --target sm89-proxy --no-flash --shapes $SMALL
guarded "gather ceiling v32" 100 main python3 bench/gather_ceiling.py --programs 128,256,512,2048 --out "$OUT/v32"
guarded "gather ceiling model1" 60 main python3 bench/gather_ceiling.py --record-bytes 584 --topk 640 \
  --programs 128,256,640 --warps 4 --out "$OUT/model1"
guarded "ncu main h16 b128" 60 main python3 bench/ncu_profile.py --out "$OUT/ncu" --top 30 \
  --point v32/h16/topk2048:128 --point model1/h16/topk512+128:128
finish
