# Sourced by the GPU-host scripts: installs the wheels and FlashMLA, defines step().
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG="$OUT/log.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee -a "$LOG"
for w in .whl/*/; do
  name=$(basename "$w"); pip install -q --no-deps --target /tmp/site_$name "$w"*.whl >>"$LOG" 2>&1
done
mkdir -p /tmp/fm && tar -xzf .gpu/flashmla_sm90_sparse_decode.tgz -C /tmp/fm
SUMMARY="$OUT/summary.txt"
# step LABEL LIMIT_S SITE cmd...: runs cmd with PYTHONPATH=<site>:/tmp/fm:. , logs to $OUT/LABEL.log, records rc.
step() {
  local label=$1 limit=$2 site=$3; shift 3
  local t0=$(date +%s) file=$(printf %s "$label" | tr -c 'A-Za-z0-9_.-' '_')
  echo "== [$label] $* (limit ${limit}s)" >>"$LOG"
  PYTHONPATH=/tmp/site_$site:/tmp/fm:. timeout "$limit" "$@" >"$OUT/$file.log" 2>&1
  local rc=$?
  echo "== [$label] rc $rc in $(( $(date +%s) - t0 )) s" >>"$LOG"
  printf "%-44s rc %3d  %4d s  %s\n" "$label" "$rc" "$(( $(date +%s) - t0 ))" \
    "$(grep -E '^FAIL|FAIL |Error|error:' "$OUT/$file.log" | head -1 | cut -c1-110)" | tee -a "$SUMMARY"
}
