#!/usr/bin/env bash
# Issue 15 on two GPUs (nvidia-h200-x2), after tools/gpu/stage.sh staged
# .gpu/ here: the two-GPU tests (section 1 and the NCCL tests), the
# all-reduce correctness check and timing table with one process driving
# both GPUs and with one process per GPU, and NCCL's own word on which
# buffers it registered. About 2 to 4 minutes.
#   tools/gpu/nccl_run.sh            # on the GPU machine
# Results: $OUT/nccl-run.tgz (one log per step) and a summary printed last:
# each test binary's PASSED/FAILED/SKIPPED lines, each bench's PASS/FAIL
# line and its tables (paste them into BENCHMARKS.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
work=$(mktemp -d)
bin=.gpu/bin
# No NVLink multicast on these machines: NCCL must not try NVLS (the
# programs set it too, before NCCL starts).
export NCCL_NVLS_ENABLE=0
step() {  # step NAME TIMEOUT_S command...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$work/$name.txt" 2>&1
  echo "step $name rc=$? $((SECONDS - t0))s" >>"$work/steps.txt"
}

{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  nvidia-smi topo -m
  ls -l /usr/lib/x86_64-linux-gnu/libnccl.so.2* 2>/dev/null
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)' | sort
} >"$work/machine.txt" 2>&1

# 1. Two GPUs, one process: the registry's stacks, peer reads by kernels,
#    threads that switch devices, the device restored (multi_gpu_test); the
#    registry's earlier two-GPU cases; vmm_pages' second-GPU kernel test.
step multi_gpu_test 120 "$bin/multi_gpu_test"
step device_resource_gpu_test 120 "$bin/device_resource_gpu_test"
step vmm_pool_gpu_second_gpu 120 "$bin/vmm_pool_gpu_test" --gtest_filter='*SecondGpu*'
# 2. NCCL on gmr memory: correctness and bad input against the real library,
#    with NCCL's registration log kept.
step nccl_gpu_test 180 env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,REG "$bin/nccl_gpu_test"
# 3. The all-reduce table: every variant, 1 MiB to 1 GiB, every result
#    checked element by element; one process, then one process per GPU.
step nccl_bench 300 "$bin/nccl_bench" --min 1MiB --max 1GiB --iterations 20 --warmup 5
step nccl_bench_processes 300 "$bin/nccl_bench" --processes --min 1MiB --max 1GiB \
  --iterations 20 --warmup 5
# 4. Which buffers NCCL registered (its REG log): gmr's pool, vmm_pages' pages
#    and cudaMalloc, at 64 MiB, in one process and across processes (POSIX
#    file descriptors: what nccl_ready memory is made for).
for v in 1 3 4 5; do
  step "nccl_reg_log_$v" 120 env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=REG "$bin/nccl_bench" \
    --variants "$v" --min 64MiB --max 64MiB --iterations 3 --warmup 1
done
for v in 3 5; do
  step "nccl_reg_log_processes_$v" 120 env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=REG \
    "$bin/nccl_bench" --processes --variants "$v" --min 64MiB --max 64MiB --iterations 3 --warmup 1
done

tar czf "$out/nccl-run.tgz" -C "$work" .
echo "== machine"
head -3 "$work/machine.txt"
cat "$work/steps.txt"
for t in multi_gpu_test device_resource_gpu_test vmm_pool_gpu_second_gpu nccl_gpu_test; do
  echo "== $t"
  grep -E '^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]+ test|^\[  FAILED  \] [A-Z]' "$work/$t.txt"
  grep -A1 -m1 'Skipped' "$work/$t.txt" | tail -1  # the first skip reason, if any
  grep -A3 -m3 'Failure' "$work/$t.txt"
done
echo "== NCCL's registrations during nccl_gpu_test"
grep -cE 'IPC regist' "$work/nccl_gpu_test.txt" | sed 's/^/IPC register lines: /'
names=([1]="cudaMalloc+reg" [3]="gmr pool+reg" [4]="vmm_pages+reg" [5]="symmetric+reg")
for v in 1 3 4 5; do
  for mode in "" _processes; do
    f="$work/nccl_reg_log${mode}_$v.txt"
    [ -f "$f" ] || continue
    printf '%-16s %-10s IPC register lines: %s, failed: %s; %s\n' "${names[$v]}" \
      "${mode:+processes}${mode:-single}" "$(grep -cE 'IPC regist(er|ering) buffer' "$f")" \
      "$(grep -cE 'failed to IPC register' "$f")" "$(grep -E '^nccl_bench: (PASS|FAIL|SKIP)' "$f" | tail -1)"
  done
done
for b in nccl_bench nccl_bench_processes; do
  echo "== $b"
  sed -n '/^### /,$p' "$work/$b.txt"
  grep -E '^nccl_bench: (PASS|FAIL|SKIP)' "$work/$b.txt" || echo "nccl_bench: no verdict (see the log)"
done
