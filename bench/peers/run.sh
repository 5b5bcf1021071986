#!/usr/bin/env bash
# Peer benchmark: ghfit vs normix (JAX) on the same data, one command.
#
#   bash bench/peers/run.sh [--smoke] [--gpu] [--out DIR] [--cap SECONDS] [peers.py options]
#
# Makes (or reuses) the virtual environment $GHF_BENCH_VENV (default
# <repo>/.venv-bench) with the pinned packages of bench/peers/requirements.txt,
# builds ghfit into <repo>/build-bench unless GHFIT names a binary, then runs
# bench/peers/peers.py.  Results go to <repo>/results/peers (or --out).
# Exits non-zero, with a message, when the environment cannot be made (no
# Python >= 3.12, no network to PyPI) or ghfit cannot be built.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
venv=${GHF_BENCH_VENV:-$repo/.venv-bench}
req=$here/requirements.txt

die() { echo "bench/peers/run.sh: error: $*" >&2; exit 1; }

want_gpu=0
for a in "$@"; do [ "$a" = "--gpu" ] && want_gpu=1; done

# ---- Python >= 3.12 (normix requires it) ----------------------------------
py_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; }
find_python() {
    local c
    for c in ${PYTHON:-} python3.13 python3.12; do
        if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 && py_ok "$c"; then command -v "$c"; return 0; fi
    done
    local roots=()
    command -v pyenv >/dev/null 2>&1 && roots+=("$(pyenv root)/versions")
    roots+=("$HOME/.pyenv/versions" /root/.pyenv/versions /usr/local/bin)
    for r in "${roots[@]}"; do
        for c in "$r"/3.1[2-9]*/bin/python3 "$r"/python3.1[2-9]; do
            [ -x "$c" ] && py_ok "$c" && { echo "$c"; return 0; }
        done
    done
    if command -v python3 >/dev/null 2>&1 && py_ok python3; then command -v python3; return 0; fi
    return 1
}

# ---- the virtual environment, cached by the hash of requirements.txt -------
stamp=$venv/.peers-requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && py_ok "$venv/bin/python" && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "bench/peers/run.sh: reusing $venv"
else
    if ! py=$(find_python); then
        # Debian 12 ships Python 3.11: the smoke test reports a skip (77), a real run fails
        [ "${GHF_PEERS_SKIP_NO_PYTHON:-0}" = 1 ] && { echo "bench/peers/run.sh: SKIP: normix needs Python >= 3.12 and none was found (set PYTHON=/path/to/python3.12)"; exit 77; }
        die "normix needs Python >= 3.12 and none was found (set PYTHON=/path/to/python3.12)"
    fi
    echo "bench/peers/run.sh: creating $venv with $py ($("$py" --version 2>&1))"
    rm -rf "$venv"
    "$py" -m venv "$venv" || die "could not create the virtual environment $venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip \
        || die "pip could not reach PyPI (no network?) while upgrading pip in $venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" \
        || die "pip could not install the pinned packages of $req (no network to PyPI?)"
    "$venv/bin/python" -c 'import normix, jax, h5py, matplotlib' \
        || die "the packages installed but do not import"
    echo "$want" > "$stamp"
fi

# ---- ghfit -----------------------------------------------------------------
if [ -z "${GHFIT:-}" ]; then
    bdir=$repo/build-bench
    cuda=OFF
    if [ $want_gpu = 1 ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        bdir=$repo/build-bench-cuda
        cuda=ON
    fi
    echo "bench/peers/run.sh: building ghfit in $bdir (CUDA $cuda)"
    mkdir -p "$bdir"
    cmake -S "$repo" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DGHFIT_CUDA=$cuda \
        -DGHFIT_TESTS=OFF -DGHFIT_BENCH=OFF >"$bdir/peers-configure.log" 2>&1 \
        || { cat "$bdir/peers-configure.log" >&2; die "cmake configure failed"; }
    cmake --build "$bdir" -j"$(nproc)" --target ghfit >"$bdir/peers-build.log" 2>&1 \
        || { tail -40 "$bdir/peers-build.log" >&2; die "ghfit build failed"; }
    GHFIT=$bdir/ghfit
fi
[ -x "$GHFIT" ] || die "GHFIT=$GHFIT is not an executable"
export GHFIT

export JAX_ENABLE_X64=1
exec "$venv/bin/python" "$here/peers.py" --ghfit "$GHFIT" "$@"
