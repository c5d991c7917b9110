# Session 20, call 4 (issue 22), prepared for the next session (no device time was left): issue 22's table for main
# on both targets and, beside it, the ceiling of the gathers alone on the same GPU. `.whl/main` must be main's wheel
# with both targets (`SPARSE_MLA_AOT_TARGETS=sm90,sm89-proxy`, README command 1's environment, about 6 MB); run from
# the repository root with .whl and .gpu carried. On an H200 this is the acceptance run of issue 22 (b=64 and 128
# rows of the four 16-32-head shapes); on an H100 it says how close the tables' variants are to that GPU's ceiling.
source .gpu/common.sh; BUDGET_S=420; source bench/logs/gpu_guard.sh
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
guarded "gather ceiling v32" 100 main python3 bench/gather_ceiling.py --programs 128,256,512,2048 --out "$OUT/v32"
guarded "gather ceiling model1" 60 main python3 bench/gather_ceiling.py --record-bytes 584 --topk 640 \
  --programs 128,256,640 --warps 4 --out "$OUT/model1"
guarded "peers sm90 main" 90 main python3 bench/peers.py --no-jit --shapes $SMALL
guarded "peers sm89-proxy main" 100 main python3 bench/peers.py --no-jit --target sm89-proxy --no-flash --shapes $SMALL
finish
