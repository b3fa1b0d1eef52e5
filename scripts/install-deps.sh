#!/usr/bin/env bash
# Installs what zeromem needs to build and test on Debian 12 (bookworm), if
# missing. Runs apt-get through sudo when not root. Safe to run again.
set -euo pipefail
pkgs=(cmake g++ make nlohmann-json3-dev libcli11-dev libgtest-dev libbenchmark-dev
      libopenmpi-dev openmpi-bin libeigen3-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
