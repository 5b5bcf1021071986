#!/usr/bin/env bash
# The factor form of the dispersion (--sigma diag|factor:R, job key sigma:;
# src/em/em_factor.c, docs/math.md 9):
#  - 1 to 4 ranks: the same log-likelihood within 1e-12 relative and the same
#    iteration count (nig and gh, factor:2 and diag), a trace monotone to
#    1e-12 relative;
#  - every family, symmetric or not, gh with --p-fixed, weights (--halflife):
#    a fit with the factor form, sigma_structure/factors attributes, params/B
#    [d x R] and params/D [d], params/sigma = B B' + D (d <= 1000), |Sigma| = 1;
#    gauss with a factor form is Gaussian factor analysis (allowed);
#  - gh --p-fixed -0.5 factor:2 is nig factor:2 (1e-9);
#  - N < d (d = 40, N = 30; gauss factor:2): a fit, not a refusal;
#  - a sweep over sigma: [diag, factor:1, factor:2] names its fits *_diag, *_f1,
#    *_f2 and factor:R's AIC uses d R - R(R-1)/2 + d dispersion parameters;
#  - the fitted-law commands read a factor fit: eval's total is the fit's
#    log-likelihood (1e-10), sample draws from it; risk and optimize (which
#    read B and D only, no Sigma) agree with the same law read as full;
#  - checkpoints: a factor:2 fit stopped by SIGUSR1 mid-run (exit 75, the
#    checkpoint kept) and resumed ends bitwise equal to the uninterrupted fit
#    (loglik, trace, n_iter, mu, gamma, B, D, p, a, b), on 1 and 2 ranks; a
#    resume with --sigma factor:3 from that factor:2 checkpoint: exit 2, one line;
#  - --se (gh factor:2 and diag, 2 ranks): SEs of mu, gamma, Sigma, p, a, b,
#    no reason, param_cov of the full form's 36 parameters;
#  - --missing em: without NaN (factor:2) the same bits as without the option; 10% of
#    the entries missing at random: nig factor:2 on 1 and 2 ranks agrees to
#    1e-12 with the same iterations; it, gh diag and a weighted nig factor:1
#    have a monotone trace and the attribute missing = em;
#  - bad input: factor:0, factor:x, factor:R with R >= d, factor with
#    --se-method subset, --se with d > 100, --backend cuda: exit 2, one line.
# usage: fit_factor.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
. "$(dirname "$0")/lib.sh"
rm -rf "$W"; mkdir -p "$W"; cd "$W"
MPI=mpirun
fail=0
die() { echo "FAIL: $*"; exit 1; }
# data with a two-factor dispersion: a nig factor:2 law sampled
"$G" generate --model nig --dim 6 --n 2000 --seed 5 --out g.h5 >/dev/null || die "generate"
"$G" fit --data g.h5 --model nig --sigma factor:2 --out law.h5 --quiet --max-iter 200 || die "law fit"
"$G" sample --model law.h5 --n 3001 --seed 9 --out data.h5 --quiet || die "sample"

dumpf() { # FILE: every value of the nig fit, %.17g (equal text = equal bits)
  local a; for a in loglik n_iter status; do echo "$a $("$H" "$1" /fits/nig $a)"; done
  for a in loglik params/mu params/gamma params/B params/D params/sigma params/p params/a params/b; do
    echo "$a"; "$H" "$1" /fits/nig/$a; done
}
monotone() { # FILE FIT: the trace never falls by more than 1e-12 relative
  "$H" "$1" /fits/$2/loglik | awk 'NR > 1 { if ($1 < prev - 1e-12 * (prev < 0 ? -prev : prev)) n++ } { prev = $1 } END { exit n > 0 }'
}

for spec in "nig factor:2" "gh factor:2" "t diag"; do
  set -- $spec; m=$1; s=$2
  ref_ll=""; ref_it=""
  for np in 1 2 3 4; do
    rm -f r.h5
    $MPI -np $np "$G" fit --data data.h5 --model $m --sigma $s --out r.h5 --quiet --max-iter 3000 || { echo "FAIL [$m $s np$np]: exit"; fail=1; continue; }
    ll=$("$H" r.h5 /fits/$m loglik); it=$("$H" r.h5 /fits/$m n_iter); st=$("$H" r.h5 /fits/$m status)
    monotone r.h5 $m || { echo "FAIL [$m $s np$np]: the log-likelihood falls"; fail=1; }
    if [ -z "$ref_ll" ]; then
      ref_ll=$ll; ref_it=$it; echo "ok   [$m $s]: $it iterations, loglik $ll, $st"
      case "$st" in converged*) ;; *) echo "FAIL [$m $s]: status '$st'"; fail=1;; esac
      continue
    fi
    [ "$it" = "$ref_it" ] || { echo "FAIL [$m $s np$np]: $it iterations, 1 rank: $ref_it"; fail=1; }
    relcheck "$ll" "$ref_ll" 1e-12 >/dev/null || { echo "FAIL [$m $s np$np]: loglik $ll vs $ref_ll"; fail=1; }
  done
done

# every family, symmetric or not; the schema
for m in gh hyp nig vg t gauss; do
  for sym in "" --symmetric; do
    [ "$m" = gauss ] && [ -n "$sym" ] && continue
    rm -f f.h5
    "$G" fit --data data.h5 --model $m $sym --sigma factor:2 --out f.h5 --quiet --max-iter 3000 >/dev/null 2>err.txt \
      || { echo "FAIL [$m $sym]: exit"; cat err.txt; fail=1; continue; }
    st=$("$H" f.h5 /fits/$m status); ss=$("$H" f.h5 /fits/$m sigma_structure); nf=$("$H" f.h5 /fits/$m factors)
    case "$st" in failed*) echo "FAIL [$m $sym]: $st"; fail=1;; esac
    [ "$ss" = factor ] && [ "$nf" = 2 ] || { echo "FAIL [$m $sym]: sigma_structure '$ss' factors '$nf'"; fail=1; }
    monotone f.h5 $m || { echo "FAIL [$m $sym]: the log-likelihood falls"; fail=1; }
    # Sigma = B B' + D, and |Sigma| = 1 (but for gauss: Sigma is the covariance)
    "$H" f.h5 /fits/$m/params/B > B.txt; "$H" f.h5 /fits/$m/params/D > D.txt; "$H" f.h5 /fits/$m/params/sigma > S.txt
    err=$(awk -v d=6 'FILENAME == "B.txt" { for (i = 1; i <= NF; i++) B[nb++] = $i; next }
                      FILENAME == "D.txt" { for (i = 1; i <= NF; i++) D[nd++] = $i; next }
                      { for (i = 1; i <= NF; i++) S[ns++] = $i }
                      END { r = nb / d; e = 0; for (i = 0; i < d; i++) for (j = 0; j < d; j++) {
                              v = (i == j ? D[i] : 0); for (k = 0; k < r; k++) v += B[i * r + k] * B[j * r + k];
                              t = v - S[i * d + j]; if (t < 0) t = -t; if (t > e) e = t }
                            print (nb == 2 * d && nd == d && ns == d * d) ? e : 1 }' B.txt D.txt S.txt)
    awk -v e="$err" 'BEGIN { exit !(e <= 1e-12) }' || { echo "FAIL [$m $sym]: sigma != B B' + D ($err)"; fail=1; }
    echo "ok   [$m $sym factor:2]: $("$H" f.h5 /fits/$m n_iter) iterations, $st"
  done
done
# gh with p held at -1/2 is nig
"$G" fit --data data.h5 --model gh --p-fixed -0.5 --sigma factor:2 --out fp.h5 --quiet --max-iter 3000 || fail=1
"$G" fit --data data.h5 --model nig --sigma factor:2 --out fn.h5 --quiet --max-iter 3000 || fail=1
relcheck "$("$H" fp.h5 /fits/gh loglik)" "$("$H" fn.h5 /fits/nig loglik)" 1e-9 || { echo "FAIL: gh p = -1/2 factor:2 != nig factor:2"; fail=1; }
# weights
$MPI -np 2 "$G" fit --data data.h5 --model nig --sigma factor:1 --halflife 1000 --out w.h5 --quiet || { echo "FAIL: weighted factor fit"; fail=1; }
[ "$("$H" w.h5 /fits/nig sigma_structure)" = factor ] || { echo "FAIL: weighted factor fit's schema"; fail=1; }
# N < d: Gaussian factor analysis of 30 rows in 40 columns
"$G" generate --model gauss --dim 40 --n 30 --seed 3 --out small.h5 >/dev/null
"$G" fit --data small.h5 --model gauss --sigma factor:2 --out small_fit.h5 --quiet || { echo "FAIL: N < d"; fail=1; }
[ -f small_fit.h5 ] && echo "ok   [N = 30 < d = 40]: $("$H" small_fit.h5 /fits/gauss status)"

# --se with factor:2 (the rotations B -> B Q fixed) and diag: SEs of every
# identified quantity, no reason, param_cov over mu, gamma, Sigma, p, a, b
for s in factor:2 diag; do
  rm -f se.h5
  $MPI -np 2 "$G" fit --data data.h5 --model gh --sigma $s --se --out se.h5 --quiet --max-iter 3000 || { echo "FAIL [se $s]: exit"; fail=1; continue; }
  rs=$("$H" se.h5 /fits/gh/se reason); cn=$("$H" se.h5 /fits/gh/se condition_number); nd=$("$H" se.h5 /fits/gh/se newton_decrement)
  # every SE of Sigma positive (diag: its off-diagonal entries are 0, and so are their SEs)
  nn=$("$H" se.h5 /fits/gh/se/sigma | awk -v diag=$([ $s = diag ] && echo 1 || echo 0) '
        { if (diag && (NR - 1) % 7 != 0 ? $1 != 0 : !($1 > 0)) n++ } END { print NR == 36 ? n + 0 : -1 }')
  np_=$("$H" se.h5 /fits/gh/se n_params)
  { [ -z "$rs" ] && [ "$nn" = 0 ] && [ "$np_" = $((12 + 21 + 3)) ] && awk -v c="$cn" -v n="$nd" 'BEGIN { exit !(c > 1 && c < 1e8 && n < 1e-2) }'; } \
    || { echo "FAIL [se $s]: reason '$rs', $nn SEs of Sigma not positive, n_params $np_, cond $cn, Newton decrement $nd"; fail=1; continue; }
  echo "ok   [se gh $s]: condition number $cn, Newton decrement $nd"
done

# --missing em: without NaN the same bits as the plain factor fit; with 10%
# of the entries missing at random 1 and 2 ranks agree (1e-12, the same
# iterations), the trace is monotone, nig factor:2, gh diag, and weighted
for s in factor:2; do
  "$G" fit --data data.h5 --model nig --sigma $s --out mn0.h5 --quiet --max-iter 3000 || fail=1
  "$G" fit --data data.h5 --model nig --sigma $s --missing em --out mn1.h5 --quiet --max-iter 3000 || fail=1
  cmp -s <(dumpf mn0.h5) <(dumpf mn1.h5) && echo "ok   [missing em $s, no NaN]: the same bits as without" \
    || { echo "FAIL [missing em $s, no NaN]: differs from the fit without --missing em"; fail=1; }
done
/usr/bin/python3 - <<'PYEOF' || { echo "FAIL: making the rows with NaN"; fail=1; }
import h5py, numpy as np
x = h5py.File('data.h5', 'r')['X'][()]
m = np.random.default_rng(4).random(x.shape) < 0.10
m[m.all(axis=1), 0] = False
with h5py.File('miss.h5', 'w') as f:
    f['X'] = np.where(m, np.nan, x)
PYEOF
for spec in "nig factor:2" "gh diag" "nig factor:1 --halflife 1000"; do
  set -- $spec; m=$1; s=$2; shift 2
  ref_ll=""; ref_it=""
  nps="1 2"; [ $s = factor:2 ] || nps=2 # (the others on 2 ranks only: a few seconds less)
  for np in $nps; do
    rm -f mm.h5
    $MPI -np $np "$G" fit --data miss.h5 --model $m --sigma $s --missing em "$@" --out mm.h5 --quiet --max-iter 3000 \
      || { echo "FAIL [missing em $spec np$np]: exit"; fail=1; continue; }
    ll=$("$H" mm.h5 /fits/$m loglik); it=$("$H" mm.h5 /fits/$m n_iter); st=$("$H" mm.h5 /fits/$m status)
    monotone mm.h5 $m || { echo "FAIL [missing em $spec np$np]: the log-likelihood falls"; fail=1; }
    [ "$("$H" mm.h5 /fits/$m missing)" = em ] || { echo "FAIL [missing em $spec]: attribute missing"; fail=1; }
    [ $s = factor:2 ] || { echo "ok   [missing em $spec np$np]: $it iterations, loglik $ll, $st"; continue; }
    if [ -z "$ref_ll" ]; then ref_ll=$ll; ref_it=$it; continue; fi
    [ "$it" = "$ref_it" ] || { echo "FAIL [missing em $spec np$np]: $it iterations, 1 rank: $ref_it"; fail=1; }
    relcheck "$ll" "$ref_ll" 1e-12 >/dev/null || { echo "FAIL [missing em $spec np$np]: loglik $ll vs $ref_ll"; fail=1; }
    echo "ok   [missing em $spec]: $it iterations, loglik $ll on 1 and 2 ranks, $st"
  done
done

# a sweep over the dispersion's form; AIC's parameter count
cat > job.yaml <<EOF
data: data.h5
out: sweep.h5
family: nig
sigma: [diag, factor:1, factor:2]
EOF
$MPI -np 2 "$G" run job.yaml --quiet >/dev/null || { echo "FAIL: sweep"; fail=1; }
for nm in nig_diag_tol1e-10_s1 nig_f1_tol1e-10_s1 nig_f2_tol1e-10_s1; do
  case $nm in *diag*) r=0;; *f1*) r=1;; *) r=2;; esac
  ll=$("$H" sweep.h5 /fits/$nm loglik) || { echo "FAIL: no fit $nm"; fail=1; continue; }
  aic=$("$H" sweep.h5 /fits/$nm aic)
  # k = mu, gamma (2d) + dispersion (d r - r(r-1)/2 + d) + nig's free subordinator (2) - the scale direction (1)
  awk -v ll="$ll" -v aic="$aic" -v r=$r 'BEGIN { d = 6; k = 2 * d + d * r - r * (r - 1) / 2 + d + 1;
      e = aic - (2 * k - 2 * ll); exit !(e < 1e-6 && e > -1e-6) }' || { echo "FAIL: $nm: aic $aic, loglik $ll"; fail=1; }
  echo "ok   [sweep $nm]: loglik $ll aic $aic"
done

# the fitted-law commands: eval's total is the fit's log-likelihood; sample
$MPI -np 2 "$G" eval --model fn.h5 --data data.h5 --out ev.h5 --quiet || { echo "FAIL: eval"; fail=1; }
relcheck "$("$H" ev.h5 / loglik)" "$("$H" fn.h5 /fits/nig loglik)" 1e-10 || { echo "FAIL: eval total"; fail=1; }
$MPI -np 2 "$G" sample --model fn.h5 --n 100 --seed 1 --out smp.h5 --quiet || { echo "FAIL: sample"; fail=1; }

# risk: w' Sigma w = |B'w|^2 + w'Dw (never Sigma) gives the VaR/ES of the same law read as full
/usr/bin/python3 - <<'PYEOF' || { echo "FAIL: making the dense copy"; fail=1; }
import h5py, numpy as np, shutil
shutil.copy('fn.h5', 'dense.h5')
with h5py.File('dense.h5', 'a') as f:
    g = f['/fits/nig']
    del g.attrs['factors'], g.attrs['sigma_structure']
with h5py.File('w.h5', 'w') as f:
    f['W'] = np.random.default_rng(1).normal(size=(50, 6))
PYEOF
$MPI -np 2 "$G" risk --model fn.h5 --portfolios w.h5:/W --alpha 0.95,0.99 --out rf.h5 >/dev/null || { echo "FAIL: risk"; fail=1; }
$MPI -np 2 "$G" risk --model dense.h5 --portfolios w.h5:/W --alpha 0.95,0.99 --out rd.h5 >/dev/null || { echo "FAIL: risk (dense)"; fail=1; }
/usr/bin/python3 - <<'PYEOF' || { echo "FAIL: risk of the factor form != risk of its dense Sigma"; fail=1; }
import h5py, numpy as np
with h5py.File('rf.h5', 'r') as a, h5py.File('rd.h5', 'r') as b:
    e = max(float(np.max(np.abs(a[k][()] - b[k][()]) / np.abs(b[k][()]))) for k in ('var', 'es'))
print(f"ok   [risk: factor form vs dense Sigma]: largest relative difference {e:.2e}")
raise SystemExit(0 if e < 1e-12 else 1)
PYEOF
# optimize reads B and D only (no d x d Sigma): the ES-optimal long-only
# portfolio of the factor fit is that of the same law read as full
"$G" optimize --model fn.h5 --measure es --long-only --out of.h5 >/dev/null || { echo "FAIL: optimize"; fail=1; }
"$G" optimize --model dense.h5 --measure es --long-only --out od.h5 >/dev/null || { echo "FAIL: optimize (dense)"; fail=1; }
/usr/bin/python3 - <<'PYEOF' || { echo "FAIL: optimize of the factor form != optimize of its dense Sigma"; fail=1; }
import h5py, numpy as np
with h5py.File('of.h5', 'r') as a, h5py.File('od.h5', 'r') as b:
    e = float(np.max(np.abs(a['weights'][()] - b['weights'][()])))
    r = float(np.max(np.abs(a['risk'][()] - b['risk'][()]) / np.abs(b['risk'][()])))
print(f"ok   [optimize: factor form vs dense Sigma]: weights {e:.2e}, risk {r:.2e}")
raise SystemExit(0 if e < 1e-9 and r < 1e-12 else 1)
PYEOF

# checkpoints: stop mid-run (SIGUSR1), resume, the same bits as without the stop
CK=(fit --data data.h5 --model nig --sigma factor:2 --max-iter 3000 --quiet)
"$G" "${CK[@]}" --out ck_ref.h5 || { echo "FAIL: checkpoint reference fit"; fail=1; }
dumpf ck_ref.h5 > ck_ref.txt
for np in 1 2; do
  rm -f ck.h5 ck_prev.h5 ck_x.h5 ck_r.h5
  GHFIT_TEST_ITER_SLEEP=60 $MPI -np $np "$G" "${CK[@]}" --out ck_x.h5 --checkpoint ck.h5 --checkpoint-every 3 >ck_stop.txt 2>&1 &
  pid=$!
  wait_until "[ -e ck_prev.h5 ]" 60 || echo "FAIL [checkpoint np$np]: no second checkpoint"
  kill -USR1 $pid; wait $pid; rc=$?
  { [ $rc = 75 ] && [ -e ck.h5 ] && [ ! -e ck_x.h5 ] && grep -q "^ghfit: note: stopped on a signal at iteration" ck_stop.txt; } \
    || { echo "FAIL [checkpoint np$np]: the stop: exit $rc"; cat ck_stop.txt; fail=1; continue; }
  cp ck.h5 ck_keep.h5
  $MPI -np $np "$G" "${CK[@]}" --out ck_r.h5 --checkpoint ck.h5 --resume >ck_res.txt 2>&1 || { echo "FAIL [checkpoint np$np]: resume"; cat ck_res.txt; fail=1; continue; }
  dumpf ck_r.h5 > ck_r.txt
  if cmp -s ck_ref.txt ck_r.txt; then echo "ok   [checkpoint np$np]: $(grep -o 'iteration [0-9]*' ck_stop.txt), resumed: the same bits, $(sed -n 2p ck_r.txt)"
  else echo "FAIL [checkpoint np$np]: the resumed fit differs"; diff ck_ref.txt ck_r.txt | head -5; fail=1; fi
done
cp ck_keep.h5 ck.h5
refused fit "checkpoint does not belong to this run" -- "${CK[@]/factor:2/factor:3}" --out out.h5 --checkpoint ck.h5 --resume

# bad input
refused fit "factor:0" -- --data data.h5 --model nig --sigma factor:0 --out out.h5
refused fit "factor:x" -- --data data.h5 --model nig --sigma factor:x --out out.h5
refused fit "fewer factors than the 6 columns" -- --data data.h5 --model nig --sigma factor:6 --out out.h5
refused fit "subset method of standard errors" -- --data data.h5 --model nig --sigma factor:1 --se-method subset --out out.h5
"$G" generate --model gauss --dim 101 --n 150 --seed 3 --out wide.h5 >/dev/null
refused fit "computed for d <= 100" -- --data wide.h5 --model gauss --sigma factor:1 --se --out out.h5
refused fit "backend cuda" -- --data data.h5 --model nig --sigma factor:1 --backend cuda --out out.h5
printf 'data: data.h5\nout: out.h5\nfamily: nig\nsigma: [full, factor:0]\n' > bad.yaml
refused run "factor:0" -- bad.yaml
echo "fit_factor: $([ $fail -eq 0 ] && echo all passed || echo FAILURES)"
exit $fail
