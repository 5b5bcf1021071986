#!/usr/bin/env bash
# make-carry.sh - bundle what a bare GPU machine lacks into .carry/ (git-ignored),
# for scripts/gpu-check.sh.
#
# The GPU machine has the NVIDIA driver, nvcc/CUDA (cudart, cuBLAS, NCCL expected
# there), CMake and Python, but no MPI, HDF5, OpenBLAS, LAPACKE or libyaml.  So the
# binaries are built HERE and carried with the shared libraries they need
# (found with ldd), plus the Open MPI run-time pieces that singleton MPI_Init
# and mpirun load at run time (MCA plugins, PMIx plugins, help files, orted,
# mpirun), laid out as a relocatable prefix (OPAL_PREFIX / PMIX_INSTALL_PREFIX).
#
#   scripts/make-carry.sh [BUILD_DIR]     (default: build-cuda; built if missing)
#
# Output: .carry/ghfit-carry.tar.xz (~20 MB; gpu-check.sh unpacks it), whose tree is
#   bin/   ghfit test_cuda_estep test_cuda_nodev bench_cuda h5get (stripped)
#   lib/   shared libraries (not glibc, not the CUDA toolkit's big libraries;
#                 libcudart is kept as a fallback in lib/cuda/)
#   root/  Open MPI prefix: bin/{orted,mpirun}, lib/x86_64-linux-gnu/openmpi/...,
#                 lib/x86_64-linux-gnu/pmix2/..., share/openmpi, share/pmix
# The unpacked tree is ~120 MB, the archive ~20 MB: under the 64 MiB a device run
# can carry (run(carry=[".carry"])).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build-cuda}
OUTTOP=$ROOT/.carry
CARRY=$OUTTOP/tree
BINS="ghfit test_cuda_estep test_cuda_nodev bench_cuda h5get"
MA=$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)

# always (re)build: a stale binary on the GPU machine costs device time
echo "make-carry: building in $BUILD (CUDA on, archs 80;90)"
cmake -S "$ROOT" -B "$BUILD" -DGHFIT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="80;90" -DGHFIT_BENCH=ON >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target $BINS

rm -rf "$OUTTOP"
mkdir -p "$CARRY/bin" "$CARRY/lib/cuda" "$CARRY/root/bin" "$CARRY/root/lib/$MA" "$CARRY/root/share"
for b in $BINS; do
  cp "$BUILD/$b" "$CARRY/bin/"
  strip --strip-unneeded "$CARRY/bin/$b" 2>/dev/null || true
done

# Libraries the binaries and the Open MPI plugins need.
skip_re='/(ld-linux[^/]*|libc\.so[^/]*|libm\.so[^/]*|libdl\.so[^/]*|libpthread\.so[^/]*|librt\.so[^/]*|libresolv\.so[^/]*|libutil\.so[^/]*|libcuda\.so[^/]*|libnvidia[^/]*|libcublas[^/]*|libcublasLt[^/]*|libnccl[^/]*)$'
OMPI_LIBDIR=/usr/lib/$MA/openmpi
PMIX_DIR=/usr/lib/$MA/pmix2
objs=""
for b in $BINS; do objs="$objs $BUILD/$b"; done
objs="$objs $(find "$OMPI_LIBDIR/lib/openmpi3" "$PMIX_DIR" -name '*.so*' 2>/dev/null | tr '\n' ' ')"
objs="$objs $(readlink -f /usr/bin/orted) $(readlink -f /usr/bin/mpirun)"
for o in $objs; do
  ldd "$o" 2>/dev/null | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
  if [[ "$lib" =~ $skip_re ]]; then
    case "$lib" in */libcudart*) cp -L "$lib" "$CARRY/lib/cuda/" ;; esac
    continue
  fi
  cp -L "$lib" "$CARRY/lib/"
done
# libcudart is needed but lives beside the big CUDA libraries: keep a copy as fallback
for o in $BUILD/ghfit; do
  ldd "$o" | awk '/libcudart/{print $3}' | xargs -r -I{} cp -L {} "$CARRY/lib/cuda/"
done

# Open MPI run time, as a relocatable prefix (OPAL_PREFIX=$CARRY/root)
cp -a "$OMPI_LIBDIR" "$CARRY/root/lib/$MA/"
rm -rf "$CARRY/root/lib/$MA/openmpi/include" "$CARRY/root/lib/$MA/openmpi/lib/pkgconfig"
find "$CARRY/root/lib/$MA/openmpi" -name '*.a' -delete 2>/dev/null || true
[ -d "$PMIX_DIR" ] && cp -a "$PMIX_DIR" "$CARRY/root/lib/$MA/"
[ -d /usr/share/openmpi ] && cp -a /usr/share/openmpi "$CARRY/root/share/"
[ -d /usr/share/pmix ] && cp -a /usr/share/pmix "$CARRY/root/share/"
cp -L /usr/bin/orted "$CARRY/root/bin/orted"
cp -L "$(readlink -f /usr/bin/mpirun)" "$CARRY/root/bin/mpirun"
# the plugins' own links (e.g. libmca_common_*.so) are already in lib/$MA/openmpi/lib

# Remove dangling symlinks that point outside the bundle
find "$CARRY" -xtype l -delete

cat > "$CARRY/README" <<EOF
Made by scripts/make-carry.sh on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ)
from $BUILD (git $(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)).
Used by scripts/gpu-check.sh; see that script for the environment it sets.
EOF
du -sh "$CARRY"/* | sort -h
tar -C "$CARRY" -cf - . | xz -6 -T0 > "$OUTTOP/ghfit-carry.tar.xz"
rm -rf "$CARRY"
ls -la "$OUTTOP/ghfit-carry.tar.xz"
