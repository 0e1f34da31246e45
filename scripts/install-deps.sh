#!/usr/bin/env bash
# Installs the Debian packages fused builds and tests with. Run as root (CI does).
set -euo pipefail
# Every package is named here, none assumed: the README's two commands must pass on a minimal
# Debian 12 image (pkg-config is optional for the build, listed so that the lookups take its path).
pkgs=(cmake ninja-build g++ python3 xz-utils pkg-config
      libboost1.81-dev libfmt-dev doctest-dev nlohmann-json3-dev
      libpcre2-dev libutf8proc-dev libcli11-dev libcpp-httplib-dev
      clang-16 libclang-rt-16-dev libomp-16-dev libopenmpi-dev openmpi-bin)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then echo "install-deps: all packages present"; exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run this script as root (sudo $0) to install them with apt-get" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
