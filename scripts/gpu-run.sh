#!/usr/bin/env bash
# gpu-run.sh - the gpu suite from a bundle (scripts/gpu-bundle.sh copies this file into
# it as run.sh), on a machine with a GPU, within a time budget.
#
# Runs, in this order, each under `timeout` and within GX_BUDGET_S seconds in all
# (default 480, so that one device call of 10 minutes holds the machine's start, the
# transfers and this): the fake-runtime logic test (a check of the bundle), the kernels,
# which CUDA calls block the CPU while a stream waits (gpu_nowait), the collectives and
# stream ordering on 2 ranks, the same across 2 simulated nodes x 2 ranks, a
# stream-ordered ring that waits for itself (it must end at NEXAR_TIMEOUT), the staging
# benchmark, the event functions, then 4 and 3 ranks, the ring on 3 and across 2
# nodes.  Then, since the machine has cores to spare, host buffers across 2 simulated
# nodes x 1 rank (nexar-bench, each node on half the CPUs) beside this machine's memcpy
# and AES-128-GCM a core (limits_bench): what one daemon's loop thread moves when no rank
# shares its core; the same with quic_lanes = 4; and how QUIC throughput grows with
# connections each on a core of its own: K lanes between one pair (bench-transport
# --lanes 1,2,4,8), and K pairs (--pairs 1,2,4,8).  GX_ONLY=host runs only these host
# measurements.  What the budget leaves out is listed as such.
#
# Writes everything the programs print to $OUT/gpu-run.txt (or the bundle's out/), after
# the machine's facts (nvidia-smi, the libraries nexard resolves), and one line per
# program to $OUT/summary.txt: its name, exit status (0 passed, 77 skipped, 124 timed
# out) and seconds.  Exits 0 when every program that ran passed.
set -uo pipefail

b=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH="$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NEXARD="$b/bin/nexard" NEXAR_RUN="$b/bin/nexar-run"
out=${OUT:-$b/out}
mkdir -p "$out"
log="$out/gpu-run.txt" sum="$out/summary.txt"
: >"$log"
: >"$sum"
budget=${GX_BUDGET_S:-480}
t_start=$(date +%s)
bad=0

{
  echo "== bundle of $(cat "$b/COMMIT" 2>/dev/null || echo '?'), $(date -u '+%F %T UTC')"
  uname -a
  nvidia-smi -L 2>&1 || echo "(no nvidia-smi)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
  echo "== nexard's libraries"
  ldd "$NEXARD" 2>&1
} >>"$log"

# run NAME LIMIT_S PROGRAM [ARGS...]
run() {
  local name=$1 limit=$2
  shift 2
  local left=$((budget - ($(date +%s) - t_start)))
  if [ "$left" -lt 15 ]; then
    echo "$name not run (budget)" | tee -a "$sum"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name: $*" >>"$log"
  local t0 rc
  t0=$(date +%s)
  timeout -k 10 "$limit" "$@" >>"$log" 2>&1
  rc=$?
  echo "$name rc=$rc $(($(date +%s) - t0))s" | tee -a "$sum"
  [ "$rc" -eq 0 ] || bad=1
}

cd "$b/bin" || exit 1
if [ "${GX_ONLY:-}" != host ]; then
run exec_logic 60 ./test_exec_logic
run gpu_kernels 120 ./test_gpu_kernels
run gpu_nowait 60 ./test_gpu_nowait
run gpu_collectives_w2 150 ./test_gpu_coll --world 2
run gpu_stream_order_w2 60 ./test_gpu_stream --world 2
run gpu_collectives_n2_r2 180 ./test_gpu_coll --world 4 --nodes 2
run gpu_stream_order_n2_r2 90 ./test_gpu_stream --world 4 --nodes 2
run gpu_deadlock_w2 60 ./test_gpu_deadlock --world 2 --nexar-timeout 5
run gpu_staging_bench 150 ./bench_staging
run gpu_events_w2 60 ./test_gpu_events --world 2
run gpu_collectives_w4 150 ./test_gpu_coll --world 4
run gpu_stream_order_w4 60 ./test_gpu_stream --world 4
run gpu_collectives_w3 150 ./test_gpu_coll --world 3
run gpu_deadlock_w3 60 ./test_gpu_deadlock --world 3 --nexar-timeout 5
run gpu_deadlock_n2 90 ./test_gpu_deadlock --world 2 --nodes 2 --nexar-timeout 5
run gpu_deadlock_n2_r2 90 ./test_gpu_deadlock --world 4 --nodes 2 --nexar-timeout 5
fi
echo "== cpus: $(nproc)" >>"$log"
run host_limits 30 ./limits_bench 5
run host_2x1_small 60 ./nexar-run --nodes 2 -n 2 ./nexar-bench -b 8 -e 8 -n 200 -w 20 \
  -t all_reduce,broadcast
run host_2x1_large 120 ./nexar-run --nodes 2 -n 2 ./nexar-bench -b 8M -e 64M -f 8 -n 8 -w 2 \
  -t all_reduce,broadcast,all_gather,reduce_scatter
run host_2x1_large_lanes4 120 ./nexar-run --nodes 2 -n 2 --daemon-arg --set \
  --daemon-arg quic_lanes=4 ./nexar-bench -b 8M -e 64M -f 8 -n 8 -w 2 \
  -t all_reduce,broadcast,all_gather,reduce_scatter
run host_lanes 150 "$b/tools/bench-transport" --build "$b/build" --lanes 1,2,4,8 --bytes 1G \
  --repeat 2
run host_pairs 150 "$b/tools/bench-transport" --build "$b/build" --pairs 1,2,4,8 --bytes 1G \
  --repeat 2
echo "== done in $(($(date +%s) - t_start)) s" >>"$log"
exit $bad
