/* weights.c - the observation weights of a fit's rows (weighted EM): read
 * from a dataset (each rank its shard, with the row partition of the data)
 * or made from a half-life, checked, and summed exactly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "h5io.h"
#include "pipe.h"
#include "util.h"
#include "xreduce.h"

/* file and dataset of j->weights: "FILE:DATASET" (split at the last ':'),
 * or "DATASET" in the data file */
static void weights_source(const ghf_job *j, char *file, size_t flen, char *ds, size_t dlen)
{
    const char *c = strrchr(j->weights, ':');
    if (c) {
        snprintf(file, flen, "%.*s", (int)(c - j->weights), j->weights);
        snprintf(ds, dlen, "%s", c + 1);
    } else {
        snprintf(file, flen, "%s", j->data_file);
        snprintf(ds, dlen, "%s", j->weights);
    }
}

void ghf__weights_label(const ghf_job *j, char *out, size_t len)
{
    if (j->weights) {
        char file[1024], ds[512];
        weights_source(j, file, sizeof file, ds, sizeof ds);
        snprintf(out, len, "%s:%s", file, ds);
    } else {
        snprintf(out, len, "halflife %.17g", j->halflife);
    }
}

int ghf_weights_probe(const ghf_job *j, int64_t *n, char *err, size_t errlen)
{
    char file[1024], ds[512];
    weights_source(j, file, sizeof file, ds, sizeof ds);
    int64_t nw = 0, nx = 0;
    int d = 0;
    int st = ghf_h5_probe_vector(file, ds, &nw, err, errlen);
    if (!st) st = ghf_h5_probe(j->data_file, j->dataset, &nx, &d, err, errlen);
    if (!st && nw != nx) { /* the weights cover every row of the data set */
        snprintf(err, errlen, "weights %s:%s: %lld values, but the data %s:%s have %lld rows", file, ds,
                 (long long)nw, j->data_file, j->dataset, (long long)nx);
        st = GHF_EXIT_USAGE;
    }
    if (n) *n = nw;
    return st;
}

int ghf__weights_read(MPI_Comm comm, const ghf_job *j, int64_t row_start, int64_t len, ghf_shard *ws, char *err,
                      size_t errlen)
{
    char file[1024], ds[512];
    weights_source(j, file, sizeof file, ds, sizeof ds);
    int rank;
    MPI_Comm_rank(comm, &rank);
    int st = rank == 0 ? ghf_weights_probe(j, NULL, err, errlen) : 0;
    if ((st = ghf_agree(comm, st, err, errlen)) != 0) return st;
    ghf_read_opts ro = {.path = file, .dataset = ds, .win_start = row_start, .win_len = len, .drop_nonfinite = 2,
                         .granule = GHF_ROW_BLOCK, .vector = 1};
    return ghf_h5_read_shard(comm, &ro, ws, err, errlen);
}

int ghf__weights_check(MPI_Comm comm, const ghf_job *j, const double *w, int64_t nrows, int64_t row0, char *err,
                       size_t errlen)
{
    char lab[1600];
    ghf__weights_label(j, lab, sizeof lab);
    int64_t bad = -1;
    for (int64_t i = 0; i < nrows && bad < 0; i++)
        if (!(w[i] >= 0.0) || !isfinite(w[i])) bad = i;
    int st = 0;
    if (bad >= 0) {
        snprintf(err, errlen, "weights %s: row %lld: weight %g is not a finite non-negative number", lab,
                 (long long)(row0 + bad), w[bad]);
        st = GHF_EXIT_USAGE;
    }
    return ghf_agree(comm, st, err, errlen);
}

void ghf__weights_halflife(MPI_Comm comm, double h, int64_t n_global, int64_t nrows, double *w)
{
    int64_t off = 0;
    MPI_Exscan(&nrows, &off, 1, MPI_INT64_T, MPI_SUM, comm);
    int rank;
    MPI_Comm_rank(comm, &rank);
    if (rank == 0) off = 0; /* MPI_Exscan leaves rank 0's result undefined */
    for (int64_t i = 0; i < nrows; i++) w[i] = exp2(-(double)(n_global - 1 - (off + i)) / h);
}

/* part[0] += w, part[1] += w^2 (one column of weights) */
static void blk_wsum(void *ctx, const double *x, int nb, int d, double *part)
{
    (void)ctx;
    (void)d;
    for (int i = 0; i < nb; i++) {
        part[0] += x[i];
        part[1] += x[i] * x[i];
    }
}

/* The effective-row rule: Kish's n_eff = (sum w)^2 / sum w^2 >= d + 1, as
 * an unweighted fit needs d + 1 rows (n_eff <= the number of rows with a
 * non-zero weight, so that count is >= d + 1 too).  Below it the weighted
 * covariance is singular or rests on a handful of rows and the EM ends at
 * a boundary of no meaning.  0, or 2 with the message. */
static int neff_verdict(const ghf_job *j, double s1, double s2, int64_t n_pos, int d, char *err, size_t errlen)
{
    const double n_eff = s2 > 0.0 ? (s1 / s2) * s1 : 0.0;
    if (n_eff >= (double)d + 1.0 - 1e-9 * ((double)d + 1.0)) return 0;
    char lab[1600], who[1700];
    ghf__weights_label(j, lab, sizeof lab);
    if (j->weights) snprintf(who, sizeof who, "weights %s", lab);
    else snprintf(who, sizeof who, "--halflife %.17g", j->halflife);
    snprintf(err, errlen,
             "%s: %lld row%s with a non-zero weight and an effective sample size (sum w)^2 / sum w^2 = %.4g: at least "
             "d + 1 = %d effective rows are needed for a fit",
             who, (long long)n_pos, n_pos == 1 ? "" : "s", n_eff, d + 1);
    return GHF_EXIT_USAGE;
}

int ghf_halflife_check(const ghf_job *j, int64_t n, int d, char *err, size_t errlen)
{
    if (j->weights || !(j->halflife > 0.0) || n < 1) return 0;
    const double h = j->halflife;
    /* w_k = 2^(-k/H), k = 0 (the last row) .. n-1: positive while k/H < about 1074 */
    double c = ceil(1075.0 * h);
    int64_t n_pos = c < (double)n ? (int64_t)c : n;
    while (n_pos > 0 && !(exp2(-(double)(n_pos - 1) / h) > 0.0)) n_pos--;
    while (n_pos < n && exp2(-(double)n_pos / h) > 0.0) n_pos++;
    /* the sums: terms below 2^-80 of the first change neither */
    const double c80 = ceil(80.0 * h) + 1.0;
    const int64_t m = c80 < (double)n_pos ? (int64_t)c80 : n_pos;
    double s1 = 0.0, s2 = 0.0;
    for (int64_t q = 0; q < m; q++) {
        const double w = exp2(-(double)q / h);
        s1 += w;
        s2 += w * w;
    }
    return neff_verdict(j, s1, s2, n_pos, d, err, errlen);
}

int ghf__weights_sums(MPI_Comm comm, const ghf_job *j, const double *w, int64_t nrows, int d, double *sum,
                      double *sum2, int *unit, char *err, size_t errlen)
{
    double s[2] = {0.0, 0.0};
    if (ghf_xreduce_rows(comm, w, nrows, 1, 2, blk_wsum, NULL, s)) {
        snprintf(err, errlen, "out of memory (summing the weights)");
        return GHF_EXIT_RUNTIME;
    }
    *sum = s[0];
    *sum2 = s[1];
    int ones = 1;
    for (int64_t i = 0; i < nrows && ones; i++) ones = w[i] == 1.0;
    *unit = !ghf_any(comm, !ones);
    if (!(s[0] > 0.0)) {
        char lab[1600];
        ghf__weights_label(j, lab, sizeof lab);
        snprintf(err, errlen, "weights %s: every weight of the fit's rows is 0", lab);
        return GHF_EXIT_USAGE;
    }
    if (!isfinite(s[0]) || !isfinite(s[1])) {
        char lab[1600];
        ghf__weights_label(j, lab, sizeof lab);
        snprintf(err, errlen, "weights %s: the sum of the weights (or of their squares) overflows", lab);
        return GHF_EXIT_USAGE;
    }
    /* The effective-row rule: Kish's n_eff = (sum w)^2 / sum w^2 >= d + 1,
     * as an unweighted fit needs d + 1 rows (n_eff <= the number of rows
     * with a non-zero weight, so that count is >= d + 1 too).  Below it
     * the weighted covariance is singular or rests on a handful of rows
     * and the EM ends at a boundary of no meaning. */
    int64_t pos = 0, n_pos = 0;
    for (int64_t i = 0; i < nrows; i++) pos += w[i] > 0.0;
    MPI_Allreduce(&pos, &n_pos, 1, MPI_INT64_T, MPI_SUM, comm);
    return neff_verdict(j, s[0], s[1], n_pos, d, err, errlen); /* the same on every rank: exact sums */
}
