#!/usr/bin/env bash
# Job files that would hold a run (2 ranks): lists nested 300,000 deep (libyaml's
# loader needs minutes for them), a deep block mapping, a file over the 1 MiB
# limit, a FIFO.  Each: exit 2 within seconds, one "ghfit: error:" line naming
# the file and the limit, no output, inputs unchanged.
# usage: faults_jobfile.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$W"; mkdir -p "$W/in"; cd "$W"
. "$SRC/tests/faults_lib.sh"

"$G" generate --model nig --dim 2 --n 500 --seed 1 --out in/d.h5 > /dev/null || { echo "cannot generate"; exit 1; }
python3 - <<'PY'
d = 300000
open("in/deep.yaml", "w").write("data: in/d.h5\nout: x.h5\ntol: " + "[" * d + "]" * d + "\n")
open("in/deepmap.yaml", "w").write("data: in/d.h5\nout: x.h5\nwindows:\n" +
    "".join("  " * (i + 1) + "k%d:\n" % i for i in range(40)) + "  " * 41 + "v: 1\n")
open("in/big.yaml", "w").write("data: in/d.h5\nout: x.h5\n" + "# padding\n" * 120000)
PY
mkfifo in/fifo.yaml
snapshot in > in.sha

one() { # NAME FILE PATTERN
  local t0=$(date +%s)
  run_t 60 "$1.txt" mpirun -np 2 "$G" run "$2"; local rc=$?
  outcome "$1" $rc 2 "$1.txt" error "$3"
  [ $(( $(date +%s) - t0 )) -le 20 ] || die "$1: took $(( $(date +%s) - t0 )) s"
  [ -e x.h5 ] && die "$1: output written"
}
one "lists nested 300,000 deep" in/deep.yaml "^ghfit: error: in/deep.yaml:3: lists or mappings nested deeper than 16 levels"
one "a mapping nested 41 deep" in/deepmap.yaml "^ghfit: error: in/deepmap.yaml:[0-9]+: lists or mappings nested deeper than 16 levels"
one "a 1.2 MB job file" in/big.yaml "^ghfit: error: in/big.yaml: the job file has 1200024 bytes, more than the limit of 1048576 \(1 MiB\)"
one "a FIFO as job file" in/fifo.yaml "^ghfit: error: in/fifo.yaml: the job file is not a regular file"

same_files "inputs" in.sha in
ls | grep -v -x -e in -e in.sha -e in.sha.after -e left.lst -e '.*\.txt' > left.lst; [ -s left.lst ] && die "left behind: $(cat left.lst)"
[ $fail -eq 0 ] && echo "faults_jobfile: all passed" || echo "faults_jobfile: FAILED"
exit $fail
