# Session 21, call 3 (issue 22), for an H200 (the GPU of issue 22's acceptance; none was lent since 2026-12-04), after
# call 2 ran on an H100: call 2's steps, most needed first: issue 22's table for main on both targets, the ceiling
# of the random record gathers alone, ncu of main's 16-head choices at b=128; then, if the budget allows, the sm90
# tables of the four 16-32-head shapes re-tuned on this GPU (tables into $OUT/tables and a copy of main's install,
# site `tuned`) and the sm90 table again with them. `.whl/main` is main's wheel with both targets
# (`SPARSE_MLA_AOT_TARGETS=sm90,sm89-proxy`); run from the repository root with .whl and .gpu carried.
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then  # call 2 ran all of this on an H100
  nvidia-smi --query-gpu=name --format=csv,noheader; echo "not an H200: nothing run"; exit 0; fi
source .gpu/common.sh; BUDGET_S=${BUDGET_S_OVERRIDE:-575}; source bench/logs/gpu_guard.sh
SMALL=model1/h16/topk512+128,model1/h32/topk512+128,v32/h16/topk2048,v32/h32/topk2048
guarded "peers sm90 main" 90 main python3 bench/peers.py --no-jit --shapes $SMALL
guarded "peers sm89-proxy main" 90 main python3 bench/peers.py --no-jit --target sm89-proxy --no-flash --shapes $SMALL
guarded "gather ceiling v32" 40 main python3 bench/gather_ceiling.py --programs 128,256,512,2048 --out "$OUT/v32"
guarded "gather ceiling model1" 30 main python3 bench/gather_ceiling.py --record-bytes 584 --topk 640 \
  --programs 128,256,640 --warps 4 --out "$OUT/model1"
guarded "ncu main h16 b128" 45 main python3 bench/ncu_profile.py --out "$OUT/ncu" --top 30 \
  --point v32/h16/topk2048:128 --point model1/h16/topk512+128:128
rm -rf /tmp/site_tuned && cp -r /tmp/site_main /tmp/site_tuned && mkdir -p "$OUT/tables"
for shape in "v32 16" "model1 16" "v32 32" "model1 32"; do
  set -- $shape
  (( BUDGET_S - ($(date +%s) - T0) > 150 )) || break  # leave room for the tuned table's peers run
  before=$(md5sum < variants/sm90/$1_h$2.json)
  guarded "tune sm90 $1 h$2" 120 main env SPARSE_MLA_AOT_TARGET=sm90 python3 -m tuning tune --target sm90 \
    --kv-format $1 --heads $2 --out-dir "$OUT/tune"
  [[ $(md5sum < variants/sm90/$1_h$2.json) == "$before" ]] && continue  # not rewritten: the tune did not finish
  cp variants/sm90/$1_h$2.json "$OUT/tables/" && cp variants/sm90/$1_h$2.json /tmp/site_tuned/sparse_mla_aot/kernels/tables/sm90/
done
# the four shapes, re-tuned or not (a shape whose tune did not finish runs main's table again)
ls "$OUT/tables"/*.json >/dev/null 2>&1 && guarded "peers sm90 tuned" 50 tuned python3 bench/peers.py --no-jit --shapes $SMALL
finish
