#!/usr/bin/env bash
# Installs what zeromem needs to build and test on Debian 12 (bookworm), if
# missing. Runs apt-get through sudo when not root. Safe to run again.
set -euo pipefail
pkgs=(cmake g++ make python3 nlohmann-json3-dev libcli11-dev libyaml-cpp-dev libgtest-dev libbenchmark-dev help2man)
# zeromem-gui: Qt 6 Widgets/Test and Qt Charts (qt6-charts-dev is the real name of
# the virtual libqt6charts6-dev); Qt6Charts' CMake config also needs Qt6OpenGL
# (libqt6opengl6-dev, not pulled in by qt6-charts-dev on Debian 12), GL and xkbcommon headers.
pkgs+=(qt6-base-dev qt6-charts-dev libqt6opengl6-dev libgl-dev libxkbcommon-dev)
# zeromem measure/validate: the runtime (MPI collectives, Eigen on the host backend).
pkgs+=(libopenmpi-dev openmpi-bin libeigen3-dev)
# scripts/fuzz.sh: libFuzzer targets built with clang.
pkgs+=(clang-14 libfuzzer-14-dev)
# tests/python: the zeromem Python package (python/) dumps live torch models (torch 1.13; the tests pin
# ZEROMEM_STACK=defaults, so its version is never taken for the user's stack).
pkgs+=(python3-torch)
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
