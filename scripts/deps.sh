#!/usr/bin/env bash
# Install what moetune needs from Debian packages, only when it is missing.
# The CUDA toolkit is expected at /usr/local/cuda (or CUDAToolkit_ROOT).
set -euo pipefail
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in cmake pkg-config gcc g++ clang libsqlite3-dev liblua5.4-dev libcmocka-dev; do
  have_pkg "$p" || need+=("$p")
done
if ((${#need[@]})); then
  echo "deps: installing ${need[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${need[@]}"
fi
cuda="${CUDAToolkit_ROOT:-/usr/local/cuda}"
if [ ! -f "$cuda/include/nvrtc.h" ]; then
  echo "deps: the CUDA toolkit is missing at $cuda (need NVRTC and cuBLAS headers and libraries)" >&2
  exit 1
fi
