#!/usr/bin/env bash
# Install what ghfit needs from Debian 12, and nothing that is already there.
# Idempotent; run as root (or with sudo available).  CUDA (nvcc, cuBLAS, NCCL)
# is used when present under /usr/local/cuda and is not installed here.
# GHFIT_WITH_SLURM=1 adds a one-node Slurm, GHFIT_WITH_BROWSER=1 chromium
# (both for the tests; scripts/test.sh sets them).
set -euo pipefail
pkgs=(build-essential cmake pkg-config git
      openmpi-bin libopenmpi-dev
      libhdf5-openmpi-dev hdf5-tools
      libopenblas-dev liblapacke-dev
      libyaml-dev zlib1g-dev
      libgsl-dev libnlopt-dev
      python3 python3-venv python3-h5py python3-numpy
      python3-scipy python3-sklearn)  # the mixture tests (tests/fit_mixture.py): scikit-learn's GaussianMixture, scipy.stats.geninvgauss
# the cluster tools the tests use: a one-node Slurm and a module system (the
# install test loads the generated modulefile)
if [ "${GHFIT_WITH_SLURM:-0}" = 1 ]; then
  pkgs+=(slurmctld slurmd slurm-client munge environment-modules)
fi
# The report's browser test (tests/python.sh browser): headless chromium
# driven by Selenium through chromium-driver.
if [ "${GHFIT_WITH_BROWSER:-0}" = 1 ]; then
  pkgs+=(chromium chromium-driver fonts-dejavu-core)
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
