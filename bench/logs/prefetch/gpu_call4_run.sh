# Call 4 (2026-12-05, fourth session): does loading a tile's indices 4 tiles ahead (new) beat 1 tile ahead (head,
# 90cd1b3's kernels), and do 8 ring slots help pingpong? Same tables (the tree's sm90 tables) in both wheels.
source .gpu/common.sh
for site in head new; do cp variants/sm90/*.json /tmp/site_$site/sparse_mla_aot/kernels/tables/sm90/; done
V='*_[pw][is]*_bh16_*'
for shape in "v32 16" "model1 16" "v32 32" "model1 32"; do
  set -- $shape
  for site in head new; do
    step "tune $site $1 h$2" 75 $site python3 -m tuning tune --target sm90 --kv-format $1 --heads $2 --batches 32,64,128 --splits 1,2,4,8 --variants "$V" --out-dir "$OUT/tune_$site"
  done
done
SH=model1/h16/topk512+128,v32/h16/topk2048,model1/h32/topk512+128,v32/h32/topk2048
step "peers new" 90 new python3 bench/peers.py --no-jit --no-flash --shapes $SH --batches 1,8,32,64,128
mv "$OUT/peers.json" "$OUT/peers_new.json" 2>/dev/null
step "peers head" 90 head python3 bench/peers.py --no-jit --no-flash --shapes $SH --batches 1,8,32,64,128
mv "$OUT/peers.json" "$OUT/peers_head.json" 2>/dev/null
python3 - "$OUT" <<'PY' | tee -a "$SUMMARY"
import csv, glob, sys, collections
out = sys.argv[1]
for site in ("head", "new"):
    for f in sorted(glob.glob(f"{out}/tune_{site}/*.csv")):
        best = {}
        for r in csv.DictReader(open(f)):
            k = (int(r["batch_rows"]), r["variant"].split("_", 1)[1])
            t = float(r["median_us"])
            if t < best.get(k, (1e9,))[0]: best[k] = (t, r["num_splits"])
        for b in (32, 64, 128):
            row = sorted((t, v, s) for (bb, v), (t, s) in best.items() if bb == b)
            print(site, f.rsplit("/", 1)[1][:-4], b, " ".join(f"{v}x{s}={t:.1f}" for t, v, s in row[:6]))
PY
cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz --exclude=summary.txt * && find . -mindepth 1 -maxdepth 1 ! -name logs.tgz ! -name summary.txt -exec rm -rf {} +
cat "$SUMMARY"
