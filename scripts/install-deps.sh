#!/usr/bin/env bash
# Installs every Debian 12 package that the build, the demo and the test suite need.
# Idempotent; run as root (CI and fresh machines are root).
set -euo pipefail
pkgs=(
  build-essential meson ninja-build pkg-config
  libuv1-dev libprotobuf-c-dev protobuf-c-compiler
  libngtcp2-dev libngtcp2-crypto-gnutls-dev libgnutls28-dev gnutls-bin libnghttp3-dev
  clang libclang-rt-14-dev llvm
  openmpi-bin libopenmpi-dev
  iproute2 nftables procps python3
  libseccomp-dev systemd
  python3-numpy python3-pytest
  python3-torch libtorch-dev python3-pybind11
  scdoc man-db
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
