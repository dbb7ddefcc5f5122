#!/usr/bin/env bash
# Installs the packages, builds nexar into build/, installs it (meson's prefix, /usr/local
# unless build/ was set up otherwise) and runs the demo:
#  - nexar-run starts a private nexard and 4 ranks of nexar-bench, which run every
#    collective from 8 B to 16 MiB (x4 per step) and print nccl-tests style tables; then
#    the same 4 ranks on two simulated nodes (two daemons, QUIC with mutual TLS);
#  - a numpy all_reduce (python/examples/allreduce.py) and DistributedDataParallel over
#    nexar (python/examples/ddp.py), 2 ranks each, with the installed Python package.
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
ninja -C build install >/dev/null
ldconfig  # the new libnexarshim into the loader's cache, for programs built against it
prefix=$(meson introspect --buildoptions build |
         /usr/bin/python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
echo "installed into $prefix (man nexarctl, $prefix/bin/nexar-run, the nexar Python package)"
run=$prefix/bin/nexar-run
bench=$prefix/bin/nexar-bench

if [ $# -eq 0 ]; then
  set -- -b 8 -e 16M -f 4 -c 1 -t all
fi
show() { echo; echo "+ $*"; "$@"; }
show "$run" -n 4 "$bench" "$@"
show "$run" --nodes 2 -n 4 "$bench" "$@"
# Debian's python3 imports from $prefix/lib/python3.X/dist-packages for /usr/local;
# other prefixes need it on PYTHONPATH (docs/python.md).
pydir=$(echo "$prefix"/lib/python3*/dist-packages)
[ "$prefix" = /usr ] && pydir=/usr/lib/python3/dist-packages
export PYTHONPATH=$pydir${PYTHONPATH:+:$PYTHONPATH}
show "$run" -n 2 /usr/bin/python3 python/examples/allreduce.py
show "$run" -n 2 /usr/bin/python3 python/examples/ddp.py
