#!/usr/bin/env bash
# Installs the packages, builds nexar into build/ and runs the demo: nexar-run starts
# a private nexard and 4 ranks of nexar-bench, which run every collective from 8 B to
# 16 MiB (x4 per step) and print nccl-tests style results (time, algbw, busbw, #wrong,
# algorithm); then the same 4 ranks on two simulated nodes (two daemons, QUIC).
#
# Usage: bash scripts/demo.sh [nexar-bench arguments]   (default: -b 8 -e 16M -f 4 -c 1 -t all)
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"

bash scripts/install-deps.sh
if [ -f build/build.ninja ]; then
  meson setup --reconfigure build >/dev/null
else
  meson setup build
fi
ninja -C build

if [ $# -eq 0 ]; then
  set -- -b 8 -e 16M -f 4 -c 1 -t all
fi
echo
echo "+ build/tools/nexar-run -n 4 build/tools/nexar-bench $*"
build/tools/nexar-run -n 4 build/tools/nexar-bench "$@"
# The same 4 ranks on two simulated nodes: two daemons, QUIC with mutual TLS between them.
echo
echo "+ build/tools/nexar-run --nodes 2 -n 4 build/tools/nexar-bench $*"
exec build/tools/nexar-run --nodes 2 -n 4 build/tools/nexar-bench "$@"
