#!/usr/bin/env bash
# Install what moetune needs from Debian packages, only when it is missing.
# The CUDA toolkit is expected at /usr/local/cuda (or CUDAToolkit_ROOT).
set -euo pipefail
pkgs=(cmake pkg-config gcc g++ clang libsqlite3-dev liblua5.4-dev libcmocka-dev)
manual() {
  echo "deps: $1; install these Debian packages (or their equivalents) by hand, then rerun:" >&2
  echo "  ${pkgs[*]}" >&2
  exit 1
}
command -v dpkg-query >/dev/null && command -v apt-get >/dev/null ||
  manual "no dpkg-query or apt-get here (not a Debian system?)"
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in "${pkgs[@]}"; do
  have_pkg "$p" || need+=("$p")
done
if ((${#need[@]})); then
  echo "deps: installing ${need[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || manual "not root and no sudo to install ${need[*]}"
    SUDO=sudo
  fi
  $SUDO apt-get update -q || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${need[@]}"
fi
cuda="${CUDAToolkit_ROOT:-/usr/local/cuda}"
if [ ! -f "$cuda/include/nvrtc.h" ]; then
  echo "deps: the CUDA toolkit is missing at $cuda (need NVRTC and cuBLAS headers and libraries)" >&2
  exit 1
fi
