#!/usr/bin/env bash
# Installs the build dependencies, builds nexar and runs its whole test suite.
# This is what CI runs (.ci/run).  Phases, each in its own build directory
# under build-test/:
#
#   normal  gcc, -Dwerror=true (-Wall -Wextra): suites unit, integration, sim,
#           transport and netns (netns skips, 77, where namespaces cannot be made),
#           and sandbox: daemons under systemd/nexard.service's restrictions (seccomp
#           list, /proc subset, read-only mounts, no capabilities; skips without root)
#   asan    gcc, -Db_sanitize=address,undefined: the same suites but for suite
#           wide (the cross-node matrix on 3 x 1, 4 x 1, 4 x 2 and interleaved
#           placement: more of the paths that 2 x 1, 2 x 2 and 3 x 2 take), halting
#           on the first ASan/UBSan/LSan report; with -Dcuda=enabled where nvcc is, so
#           that nexard's device logic (the CUDA adapter against its stand-ins, the
#           staging across nodes) runs under the sanitizers too
#   tsan    gcc, -Db_sanitize=thread: suite threads (ranks using communicators from
#           several threads, and a big op across nexard's worker threads), halting on
#           the first data race
#   fuzz    clang, -Dfuzz=true: every libFuzzer target (suite fuzz) for a while
#   cuda    -Dcuda=enabled: builds the CUDA adapter, its kernels and the gpu suite
#           (checking that they were built), runs the cuda.h check and suite gpu,
#           whose tests skip (77) without a GPU (skipped when there is no nvcc)
#
# The last line is "N passed, N failed, N skipped", summed over every meson test
# run; the exit status is non-zero when a build or a test failed.
#
# Usage: bash scripts/test.sh [--long] [--gpu] [--no-deps] [--only PHASE[,PHASE...]]
#   --long     also register the long sweeps (-Dlong_tests=true) in the normal
#              build, and fuzz each target for 120 s instead of 20 s
#   --gpu      also run suites unit + integration against the cuda build (a nexard
#              with the CUDA adapter); for hosts with a GPU
#   --no-deps  do not run scripts/install-deps.sh
#   --only     run only these phases (normal, asan, tsan, fuzz, cuda)
set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top" || exit 1

long=false gpu=false deps=true only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --long) long=true ;;
    --gpu) gpu=true ;;
    --no-deps) deps=false ;;
    --only) only="${2:?--only needs a list}"; shift ;;
    --only=*) only="${1#--only=}" ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

want() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }
for p in ${only//,/ }; do
  case "$p" in
    normal|asan|tsan|fuzz|cuda) ;;
    *) echo "test.sh: unknown phase '$p' (normal, asan, tsan, fuzz, cuda)" >&2; exit 2 ;;
  esac
done

jobs=$(nproc 2>/dev/null || echo 2)
# Every suite that needs no GPU and no fuzzing build.
all_suites="--suite unit --suite integration --suite sim --suite transport --suite netns"
fuzz_secs=20
$long && fuzz_secs=120
base=build-test
passed=0 failed=0 skipped=0 bad=0
timings=()
problems=()

now() { date +%s; }
say() { printf '\n=== %s\n' "$*"; }

# Adds the results of one `meson test` run (its testlog JSON) to the totals.
count_results() { # $1 = testlog json
  local line
  if [ ! -s "$1" ]; then
    echo "test.sh: no test ran ($1 is missing or empty)" >&2
    failed=$((failed + 1))
    return
  fi
  line=$(python3 - "$1" <<'PY'
import json, sys
p = f = s = 0
for raw in open(sys.argv[1], encoding="utf-8"):
    raw = raw.strip()
    if not raw:
        continue
    r = json.loads(raw).get("result", "")
    if r in ("OK", "EXPECTEDFAIL"):
        p += 1
    elif r == "SKIP":
        s += 1
    else:
        f += 1
print(p, f, s)
PY
) || { failed=$((failed + 1)); return; }
  set -- $line
  passed=$((passed + $1)) failed=$((failed + $2)) skipped=$((skipped + $3))
}

# setup_build DIR [meson options...]: configures DIR (again, when it exists) and builds it.
setup_build() {
  local dir=$1
  shift
  mkdir -p "$(dirname "$dir")"
  # Reuse a configured directory; start afresh when that fails (another meson, a
  # half-written directory).
  if ! { [ -f "$dir/build.ninja" ] &&
         meson setup --reconfigure "$dir" "$@" >"$dir.setup.log" 2>&1; }; then
    rm -rf "$dir"
    meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }
  fi
  tail -n 25 "$dir.setup.log"
  ninja -C "$dir"
}

# run_suites NAME DIR [meson test options...]: runs suites, counts their results.
run_suites() {
  local name=$1 dir=$2
  shift 2
  rm -f "$dir/meson-logs/testlog-$name.json"
  meson test -C "$dir" --no-rebuild --print-errorlogs --logbase "testlog-$name" \
    --num-processes "$jobs" "$@"
  local rc=$? before=$failed
  count_results "$dir/meson-logs/testlog-$name.json"
  if [ $rc -ne 0 ]; then
    problems+=("$name: meson test exited $rc (log: $dir/meson-logs/testlog-$name.txt)")
    # A run that failed without a failed test (it could not start) still counts.
    [ "$failed" -gt "$before" ] || failed=$((failed + 1))
  fi
}

# Per phase: its time, and the results its test runs added to the totals.
mark_p=0 mark_f=0 mark_s=0
phase_done() { # $1 = name, $2 = start time
  local line
  line=$(printf '%-7s %4ss' "$1" $(($(now) - $2)))
  if [ "$1" != total ] && [ $((passed + failed + skipped - mark_p - mark_f - mark_s)) -gt 0 ]; then
    line+=$(printf '   %d passed, %d failed, %d skipped' $((passed - mark_p)) \
      $((failed - mark_f)) $((skipped - mark_s)))
  fi
  timings+=("$line")
  mark_p=$passed mark_f=$failed mark_s=$skipped
}

build_failed() { # $1 = phase
  problems+=("$1: the build failed")
  failed=$((failed + 1))
  bad=1
}

t_all=$(now)

if $deps; then
  say "installing packages (scripts/install-deps.sh)"
  t=$(now)
  if ! bash scripts/install-deps.sh; then
    echo "test.sh: scripts/install-deps.sh failed" >&2
    echo "0 passed, 1 failed"
    exit 1
  fi
  phase_done deps "$t"
fi

# nvcc lives outside PATH in the CUDA packages.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:detect_leaks=1"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"

if want normal; then
  say "normal: gcc, -Dwerror=true; suites ${all_suites//--suite /} sandbox"
  t=$(now)
  if CC=gcc setup_build "$base/normal" --buildtype=debugoptimized -Dwarning_level=2 \
      -Dwerror=true -Dcuda=disabled -Dfuzz=false -Dlong_tests=$long; then
    run_suites normal "$base/normal" $all_suites --suite sandbox
  else
    build_failed normal
  fi
  phase_done normal "$t"
fi

if want asan; then
  say "asan: gcc, -Db_sanitize=address,undefined; suites ${all_suites//--suite /}"
  t=$(now)
  if CC=gcc setup_build "$base/asan" --buildtype=debugoptimized -Dwarning_level=2 \
      -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false \
      -Dcuda=$(command -v nvcc >/dev/null 2>&1 && echo enabled || echo disabled) \
      -Dfuzz=false -Dlong_tests=false; then
    run_suites asan "$base/asan" $all_suites --no-suite wide --timeout-multiplier 3
  else
    build_failed asan
  fi
  phase_done asan "$t"
fi

if want tsan; then
  say "tsan: gcc, -Db_sanitize=thread; suite threads"
  t=$(now)
  if CC=gcc setup_build "$base/tsan" --buildtype=debugoptimized -Dwarning_level=2 \
      -Dwerror=true -Db_sanitize=thread -Dcuda=disabled -Dfuzz=false -Dlong_tests=false; then
    run_suites tsan "$base/tsan" --suite threads --timeout-multiplier 3
  else
    build_failed tsan
  fi
  phase_done tsan "$t"
fi

if want fuzz; then
  say "fuzz: clang, -Dfuzz=true; every target for ${fuzz_secs}s"
  t=$(now)
  if ! command -v clang >/dev/null 2>&1; then
    problems+=("fuzz: clang is not installed")
    failed=$((failed + 1))
  elif CC=clang setup_build "$base/fuzz" --buildtype=debugoptimized -Dwarning_level=2 \
      -Dwerror=true -Dfuzz=true -Dcuda=disabled -Dtorch=disabled -Dlong_tests=false; then
    # Later flags win in libFuzzer: this overrides the time registered in meson.
    run_suites fuzz "$base/fuzz" --suite fuzz \
      --test-args="-max_total_time=$fuzz_secs" --timeout-multiplier 10
  else
    build_failed fuzz
  fi
  phase_done fuzz "$t"
fi

if want cuda; then
  t=$(now)
  if command -v nvcc >/dev/null 2>&1; then
    say "cuda: -Dcuda=enabled ($(command -v nvcc)); suite gpu skips without a GPU"
    # nexar.torch (a minute of C++ on 2 cores) is the normal phase's; --gpu runs the
    # suites that use it against this build.
    if setup_build "$base/cuda" --buildtype=debugoptimized -Dwarning_level=2 \
        -Dwerror=true -Dcuda=enabled -Dfuzz=false -Dtorch=$($gpu && echo auto || echo disabled) \
        -Dlong_tests=false; then
      # The adapter must really be there, and in nexard: -Dcuda=enabled must not
      # quietly build the CPU-only daemon.
      if [ ! -f "$base/cuda/cuda/libnx_cuda_kernels.a" ] ||
         ! nm "$base/cuda/daemon/nexard" 2>/dev/null | grep ' nx_cuda_init$' >/dev/null; then
        problems+=("cuda: the build has no CUDA adapter in nexard")
        failed=$((failed + 1))
      fi
      run_suites cuda "$base/cuda" --suite gpu
      if $gpu; then
        run_suites cuda-all "$base/cuda" --suite unit --suite integration
      fi
    else
      build_failed cuda
    fi
  else
    say "cuda: skipped, no nvcc (neither in PATH nor /usr/local/cuda/bin)"
  fi
  phase_done cuda "$t"
fi

phase_done total "$t_all"

say "summary"
for l in "${timings[@]}"; do echo "  $l"; done
for p in "${problems[@]}"; do echo "  FAILED: $p"; done
echo
echo "$passed passed, $failed failed, $skipped skipped"
if [ "$failed" -ne 0 ] || [ "$bad" -ne 0 ] || [ "${#problems[@]}" -ne 0 ]; then
  exit 1
fi
exit 0
