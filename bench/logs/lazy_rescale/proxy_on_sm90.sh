# What an H100 / H200 runs for the sm89 proxy: the wheel ships the proxy's kernels as sm_89 PTX, which the driver
# compiles for sm_90 at first launch. This compiles a variant's PTX from a wheel's folder with Triton's bundled ptxas
# for sm_89 and for sm_90 and prints the per-tile consumer loops (inner_loops.py) and the e4m3 / f16 MMA counts.
# bash bench/logs/lazy_rescale/proxy_on_sm90.sh UNZIPPED_WHEEL_DIR VARIANT
set -eu
bin=$(PYTHONPATH=src:. python3 -c "from build_tools.cubin_inspect import cuobjdump_path; print(cuobjdump_path().parent)")
ptx="$1/sparse_mla_aot/kernels/sm89-proxy/$2.ptx"
for arch in sm_89 sm_90; do
  sed "s/^\.target sm_89.*/.target $arch/" "$ptx" > "/tmp/$2_$arch.ptx"
  "$bin/ptxas" -arch=$arch -O3 "/tmp/$2_$arch.ptx" -o "/tmp/$2_$arch.cubin"
  "$bin/cuobjdump" -sass "/tmp/$2_$arch.cubin" > "/tmp/$2_$arch.sass" 2>/dev/null
  echo "$arch: QMMA $(grep -c QMMA "/tmp/$2_$arch.sass") HMMA $(grep -c HMMA "/tmp/$2_$arch.sass")"
  python3 bench/logs/qk_groups/inner_loops.py "/tmp/$2_$arch.sass"
done
