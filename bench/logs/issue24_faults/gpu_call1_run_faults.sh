# Issue 24's acceptance: each GPU script against a package with a deliberate fault must exit non-zero.
source .gpu/common.sh
SAN_VARIANTS=model1_ws_bh16_bt64_w8_s2,v32_fused_bh16_bt64_w8_s1
for fault in combine-halved table-format; do
  # bench/faulty_kernels.py's output, carried as the files it changed over the installed wheel's kernels
  rm -rf /tmp/k_$fault && cp -a /tmp/site_new/sparse_mla_aot/kernels /tmp/k_$fault && cp -a .gpu/overlay/$fault/. /tmp/k_$fault/
  export SPARSE_MLA_AOT_KERNEL_DIR=/tmp/k_$fault
  step "fault=$fault h200_check" 120 new python3 bench/h200_check.py
  step "fault=$fault sanitize" 100 new python3 bench/sanitize.py --label fault-$fault --tools memcheck --variants $SAN_VARIANTS --jobs 2 --per-job 1
  step "fault=$fault peers" 80 new python3 bench/peers.py --no-jit --no-flash --shapes model1/h16/topk512+128 --batches 1,8
  step "fault=$fault host_overhead" 60 new python3 bench/host_overhead.py --calls 200
  step "fault=$fault compile_check" 150 new python3 bench/compile_check.py
done
unset SPARSE_MLA_AOT_KERNEL_DIR
cat "$SUMMARY"
