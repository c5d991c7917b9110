# What racecheck's ws hazards are (kind, threads), synccheck of the ws family, and the proxy's checks.
source .gpu/common.sh
ws() { PYTHONPATH=/tmp/site_head python3 -c "
from sparse_mla_aot.catalog import Catalog
print(','.join(n for n, r in sorted(Catalog().shipped('$1').items()) if r.variant and r.variant.family == 'ws'))"; }
step "racecheck hazards model1_ws_bh16_bt32_w4_s2" 110 head python3 bench/sanitize.py --label race_hazard --tools racecheck --racecheck-report hazard --variants model1_ws_bh16_bt32_w4_s2 --jobs 1 --per-job 1
step "synccheck ws sm90" 150 head python3 bench/sanitize.py --label sm90_ws --tools synccheck --jobs 16 --per-job 1 --deadline-s 130 --variants $(ws sm90)
export SPARSE_MLA_AOT_TARGET=sm89-proxy
step "proxy ws memcheck+racecheck" 220 head python3 bench/sanitize.py --label proxy_ws --tools memcheck,racecheck --jobs 16 --per-job 1 --deadline-s 200 --variants $(ws sm89-proxy)
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -maxdepth 1 -type f ! -name logs.tgz ! -name summary.txt -delete
cat "$SUMMARY"
