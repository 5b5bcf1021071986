#!/usr/bin/env bash
# Install what ghfit needs from Debian 12, and nothing that is already there.
# Idempotent; run as root (or with sudo available).  CUDA (nvcc, cuBLAS, NCCL)
# is used when present under /usr/local/cuda and is not installed here.
set -euo pipefail
pkgs=(build-essential cmake pkg-config git
      openmpi-bin libopenmpi-dev
      libhdf5-openmpi-dev hdf5-tools
      libopenblas-dev liblapacke-dev
      libyaml-dev zlib1g-dev
      libgsl-dev
      python3 python3-venv python3-h5py python3-numpy)
if [ "${GHFIT_WITH_SLURM:-0}" = 1 ]; then
  pkgs+=(slurmctld slurmd slurm-client munge)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
