#!/usr/bin/env bash
# gpu-bundle.sh - prepares the GPU run on this machine, for a machine with a GPU that can
# neither fetch packages nor build nexar (the lent device machines: a CUDA image without
# meson's dependencies, no network).
#
# Builds nexar with -Dcuda=enabled and copies into gpu-bundle/ (git-ignored, in the
# repository, so that it travels with the working tree) what the gpu suite runs:
# nexard, nexar-run, libnexarshim, the suite's programs, the shared libraries they need
# beyond glibc, libstdc++ and the CUDA driver (libuv, GnuTLS and its dependencies,
# ngtcp2, nghttp3, protobuf-c), and scripts/gpu-run.sh as gpu-bundle/run.sh.  There:
#
#   bash gpu-bundle/run.sh        # output in $OUT (or gpu-bundle/out): gpu-run.txt
#
# Usage: bash scripts/gpu-bundle.sh [BUILD_DIR]     (default build-gpu)
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
bdir=${1:-build-gpu}
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
if [ ! -f "$bdir/build.ninja" ]; then
  meson setup "$bdir" --buildtype=debugoptimized -Dcuda=enabled -Dfuzz=false \
    -Dtorch=disabled -Dlong_tests=false
fi
ninja -C "$bdir"

out=gpu-bundle
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
progs=(daemon/nexard tools/nexar-run tests/gpu/test_exec_logic tests/gpu/test_gpu_kernels
       tests/gpu/test_gpu_nowait tests/gpu/test_gpu_coll tests/gpu/test_gpu_stream
       tests/gpu/test_gpu_events tests/gpu/test_gpu_deadlock tests/gpu/bench_staging
       tools/nexar-bench tools/nexarctl tests/bench/limits_bench)
for p in "${progs[@]}"; do
  if [ ! -x "$bdir/$p" ]; then
    echo "gpu-bundle: $bdir/$p was not built (is -Dcuda enabled there?)" >&2
    exit 1
  fi
  cp "$bdir/$p" "$out/bin/"
done
cp -L "$bdir/libshim/libnexarshim.so.0" "$out/lib/" 2>/dev/null ||
  cp -L "$bdir"/libshim/libnexarshim.so* "$out/lib/"

# The libraries of this Debian the programs load, under their sonames; not glibc's, not
# libstdc++/libgcc_s (the device's are newer and serve both), not the CUDA driver's.
for f in "$out"/bin/* "$out"/lib/*; do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r soname path; do
  case "$soname" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|\
    libgcc_s.so*|libcuda.so*|libnexarshim.so*) continue ;;
  esac
  cp -L "$path" "$out/lib/$soname"
done
cp scripts/gpu-run.sh "$out/run.sh"
# tools/bench-transport --pairs, in the layout it expects: the script under tools/, its
# helpers under tests/netns/, the binaries under a build directory.
mkdir -p "$out/tools" "$out/tests/netns" "$out/build/daemon" "$out/build/tools"
cp tools/bench-transport "$out/tools/"
cp tests/netns/lib.sh "$out/tests/netns/"
cp "$bdir/daemon/nexard" "$out/build/daemon/"
cp "$bdir/tools/nexarctl" "$out/build/tools/"
git rev-parse --short HEAD > "$out/COMMIT" 2>/dev/null || true
echo "gpu-bundle: $(du -sh "$out" | cut -f1) in $out/ ($(ls "$out/lib" | wc -l) libraries);" \
  "on the GPU machine: bash $out/run.sh"
