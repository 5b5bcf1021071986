/* score.c - `ghfit eval`: a fit of a result file applied to a data set, row
 * by row, with the E-step's own per-row arithmetic (the CPU backend's pass,
 * ghf_backend_cpu_rows), summed exactly (rank-independent bits), written
 * by every rank with collective MPI-IO into one file (ghf_h5_write_columns). */
#include "score.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "backend.h"
#include "iocheck.h"
#include "util.h"
#include "xreduce.h"

int ghf_model_ref_parse(const char *ref, char *file, size_t file_len, char *name, size_t name_len, char *err,
                        size_t errlen)
{
    name[0] = file[0] = '\0';
    if (!ref || !*ref) {
        snprintf(err, errlen, "--model: no result file given (R.h5 or R.h5:/fits/NAME)");
        return 2;
    }
    const char *sep = NULL;
    for (const char *s = strstr(ref, ":/fits/"); s; s = strstr(s + 1, ":/fits/")) sep = s;
    const size_t flen = sep ? (size_t)(sep - ref) : strlen(ref);
    const char *nm = sep ? sep + 7 : "";
    if (flen == 0 || flen >= file_len || strlen(nm) >= name_len || (sep && (!*nm || strchr(nm, '/')))) {
        snprintf(err, errlen, "--model: '%s' is not R.h5 or R.h5:/fits/NAME", ref);
        return 2;
    }
    memcpy(file, ref, flen);
    file[flen] = '\0';
    snprintf(name, name_len, "%s", nm);
    return 0;
}

/* Rank 0's law to every rank (d and the strings first, then the arrays). */
static int bcast_law(MPI_Comm comm, int rank, ghf_fit_law *law)
{
    int64_t meta[3] = {law->d, law->n_obs, law->symmetric};
    MPI_Bcast(meta, 3, MPI_INT64_T, 0, comm);
    MPI_Bcast(law->name, (int)sizeof law->name, MPI_CHAR, 0, comm);
    MPI_Bcast(law->family, (int)sizeof law->family, MPI_CHAR, 0, comm);
    MPI_Bcast(law->status, (int)sizeof law->status, MPI_CHAR, 0, comm);
    const int d = (int)meta[0];
    int oom = 0;
    if (rank != 0) {
        law->d = d;
        law->n_obs = meta[1];
        law->symmetric = (int)meta[2];
        law->mu = calloc((size_t)d, sizeof(double));
        law->gamma = calloc((size_t)d, sizeof(double));
        law->sigma = calloc((size_t)d * (size_t)d, sizeof(double));
        oom = !law->mu || !law->gamma || !law->sigma;
    }
    if (ghf_any(comm, oom)) return 1;
    MPI_Bcast(law->mu, d, MPI_DOUBLE, 0, comm);
    MPI_Bcast(law->gamma, d, MPI_DOUBLE, 0, comm);
    MPI_Bcast(law->sigma, d * d, MPI_DOUBLE, 0, comm);
    double sc[5] = {law->p, law->a, law->b, law->loglik, law->p_fixed};
    MPI_Bcast(sc, 5, MPI_DOUBLE, 0, comm);
    law->p = sc[0];
    law->a = sc[1];
    law->b = sc[2];
    law->loglik = sc[3];
    law->p_fixed = sc[4];
    return 0;
}

/* Is the law one ghfit can evaluate?  0, or 2 with a message. */
static int check_law(const char *file, const ghf_fit_law *law, ghf_family *fam, char *err, size_t errlen)
{
    if (ghf_family_parse(law->family, fam) != 0) {
        snprintf(err, errlen, "%s:/fits/%s: unknown family '%s' (expected %s)", file, law->name, law->family,
                 ghf_family_list());
        return 2;
    }
    int ok = 1;
    for (int i = 0; i < law->d; i++) ok &= isfinite(law->mu[i]) && isfinite(law->gamma[i]);
    for (int i = 0; i < law->d * law->d; i++) ok &= isfinite(law->sigma[i]);
    if (*fam != GHF_FAMILY_GAUSS) ok &= isfinite(law->p) && isfinite(law->a) && isfinite(law->b);
    if (!ok) {
        snprintf(err, errlen, "%s:/fits/%s: the fit has no finite parameters (status: %s)", file, law->name,
                 law->status[0] ? law->status : "unknown");
        return 2;
    }
    return 0;
}

int ghf_fit_law_load(MPI_Comm comm, const char *file, const char *name, ghf_fit_law *law, ghf_family *fam,
                     char *err, size_t errlen)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    memset(law, 0, sizeof *law);
    int st = rank == 0 ? ghf_h5_read_fit_law(file, name, law, err, errlen) : 0;
    if ((st = ghf_agree(comm, st, err, errlen)) != 0) {
        ghf_fit_law_free(law);
        return st;
    }
    if (bcast_law(comm, rank, law)) {
        snprintf(err, errlen, "%s:/fits/%s: out of memory for the fit's parameters", file, law->name);
        ghf_fit_law_free(law);
        return 1;
    }
    st = check_law(file, law, fam, err, errlen); /* the same verdict on every rank */
    if (st) ghf_fit_law_free(law);
    return st;
}

/* ---------------------------------------------------------------------------
 * eval
 * ------------------------------------------------------------------------- */

typedef struct eval_rows {
    int64_t n;          /* this rank's rows */
    double *q, *ll, *ey, *eu, *maha;
    unsigned char *flag;
} eval_rows;

static void rows_free(eval_rows *r)
{
    free(r->q);
    free(r->ll);
    free(r->ey);
    free(r->eu);
    free(r->maha);
    free(r->flag);
    memset(r, 0, sizeof *r);
}

static int rows_alloc(eval_rows *r, int64_t n)
{
    memset(r, 0, sizeof *r);
    r->n = n;
    const size_t m = (size_t)(n > 0 ? n : 1);
    r->q = malloc(m * sizeof(double));
    r->ll = malloc(m * sizeof(double));
    r->ey = malloc(m * sizeof(double));
    r->eu = malloc(m * sizeof(double));
    r->maha = malloc(m * sizeof(double));
    r->flag = calloc(m, 1);
    return r->q && r->ll && r->ey && r->eu && r->maha && r->flag ? 0 : -1;
}

/* Flags the rows holding a non-finite value (1) and puts mu in their place
 * (so that the pass computes something harmless there). */
static void flag_nonfinite(ghf_shard *sh, const double *mu, unsigned char *flag)
{
    const int d = sh->d;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < sh->nrows; i++) {
        double *xi = sh->x + i * d;
        int ok = 1;
        for (int j = 0; j < d; j++) ok &= isfinite(xi[j]) ? 1 : 0;
        if (!ok) {
            flag[i] = 1;
            memcpy(xi, mu, (size_t)d * sizeof(double));
        }
    }
}

/* The pass's parameters.  The Gaussian has no mixing variable: its q comes
 * from the same pass run with a stand-in subordinator (NIG, gamma = 0), its
 * log-density and moments from q below.  0, or 2 (not a valid law). */
static int eval_input(const ghf_fit_law *law, ghf_family fam, ghf_params *t, ghf_derived *g, ghf_estep_input *in)
{
    const int d = law->d;
    memcpy(t->mu, law->mu, (size_t)d * sizeof(double));
    memcpy(t->sigma, law->sigma, (size_t)d * d * sizeof(double));
    if (fam == GHF_FAMILY_GAUSS) {
        memset(t->gamma, 0, (size_t)d * sizeof(double));
        t->p = -0.5;
        t->a = t->b = 1.0;
    } else {
        memcpy(t->gamma, law->gamma, (size_t)d * sizeof(double));
        t->p = law->p;
        t->a = law->a;
        t->b = law->b;
    }
    if (ghf_derive(t, g) != 0) return 2;
    in->d = d;
    in->mu = t->mu;
    in->linv = g->Linv;
    in->w = g->w;
    in->c = g->c;
    in->stop_request = 0;
    return 0;
}

/* Per-row values from the pass; the exact sum of the finite log-densities
 * into *acc and their number into *n_obs (this rank's). */
static void eval_finish(eval_rows *r, int gauss, int d, double logdet, ghf_xsum *acc, int64_t *n_obs)
{
    const double c0 = -0.5 * (d * GHF_LOG_2PI + logdet);
    int64_t k = 0;
    ghf_xsum_init(acc);
    for (int64_t i = 0; i < r->n; i++) {
        if (r->flag[i]) {
            r->ll[i] = r->maha[i] = r->ey[i] = r->eu[i] = NAN;
            continue;
        }
        if (gauss) {
            r->ll[i] = c0 - 0.5 * r->q[i];
            r->ey[i] = r->eu[i] = 1.0;
        }
        r->maha[i] = sqrt(r->q[i]);
        if (!isfinite(r->ll[i])) {
            r->flag[i] = 2;
            continue;
        }
        ghf_xsum_add(acc, r->ll[i]);
        k++;
    }
    *n_obs = k;
}

/* Collective: the pass over the shard and the global sums.  0, 1 or 2. */
static int eval_rows_compute(MPI_Comm comm, const ghf_fit_law *law, ghf_family fam, ghf_shard *sh, eval_rows *r,
                             ghf_eval_result *res, char *err, size_t errlen)
{
    const int d = law->d;
    ghf_params t;
    ghf_derived g;
    memset(&t, 0, sizeof t);
    memset(&g, 0, sizeof g);
    int st = ghf_params_alloc(&t, d) || ghf_derived_alloc(&g, d) ? 1 : 0;
    double *stats = st ? NULL : malloc((size_t)ghf_stats_len(d) * sizeof(double));
    if (st || !stats) snprintf(err, errlen, "eval: out of memory for d = %d", d), st = 1;
    ghf_estep_input in;
    if (!st && eval_input(law, fam, &t, &g, &in) != 0) {
        snprintf(err, errlen, "%s: the fit's parameters are not a valid law (Sigma not positive definite?)",
                 law->name);
        st = 2;
    }
    ghf_backend *be = NULL;
    if ((st = ghf_agree(comm, st, err, errlen)) == 0) {
        be = ghf_backend_cpu_create(comm, sh->x, sh->nrows, d, err, errlen);
        if (!be) st = 1; /* agreed inside */
    }
    if (!st) st = ghf_backend_cpu_rows(be, &in, r->q, r->ll, r->ey, r->eu, stats, err, errlen) ? 1 : 0;
    if (be) be->destroy(be);
    if (!st) {
        ghf_xsum acc;
        int64_t k = 0;
        eval_finish(r, fam == GHF_FAMILY_GAUSS, d, g.logdet, &acc, &k);
        int64_t cnt[2] = {k, 0};
        for (int64_t i = 0; i < r->n; i++) cnt[1] += r->flag[i] != 0;
        MPI_Allreduce(MPI_IN_PLACE, cnt, 2, MPI_INT64_T, MPI_SUM, comm);
        if (ghf_xsum_allreduce(comm, &acc, 1) != 0) {
            snprintf(err, errlen, "eval: the all-reduce of the log-likelihood failed");
            st = 1;
        }
        res->n_obs = cnt[0];
        res->n_nonfinite = cnt[1];
        res->loglik = ghf_xsum_value(&acc);
    }
    free(stats);
    ghf_derived_free(&g);
    ghf_params_free(&t);
    return ghf_agree(comm, st, err, errlen);
}

int ghf_score_loglik(MPI_Comm comm, const ghf_fit_law *law, ghf_family fam, ghf_shard *sh, double *loglik,
                     int64_t *n_obs, char *err, size_t errlen)
{
    eval_rows r;
    ghf_eval_result res;
    memset(&res, 0, sizeof res);
    const int oom = rows_alloc(&r, sh->nrows) != 0;
    if (oom) snprintf(err, errlen, "eval: out of memory for %lld rows", (long long)sh->nrows);
    int st = ghf_agree(comm, oom, err, errlen);
    if (!st) {
        flag_nonfinite(sh, law->mu, r.flag);
        st = eval_rows_compute(comm, law, fam, sh, &r, &res, err, errlen);
    }
    rows_free(&r);
    *loglik = res.loglik;
    *n_obs = res.n_obs;
    return st;
}

/* Collective: the output file. */
static int eval_write(MPI_Comm comm, const ghf_eval_opts *o, const ghf_shard *sh, const eval_rows *r,
                      const ghf_eval_result *res, char *err, size_t errlen)
{
    const ghf_h5_column cols[] = {
        {"/logpdf", 0, r->ll, "log-density of the row under the fitted law (natural log)"},
        {"/mahalanobis", 0, r->maha, "sqrt((x - mu)' Sigma^-1 (x - mu)) with the fit's mu and Sigma"},
        {"/e_y", 0, r->ey, "E[Y | x]: posterior mean of the mixing variable"},
        {"/e_invy", 0, r->eu, "E[1/Y | x]: posterior mean of the inverse mixing variable"},
        {"/nonfinite", 1, r->flag, "0: finite row; 1: the row holds a non-finite value (its values NaN); "
                                   "2: its log-density is not finite"}};
    const double mean = res->n_obs > 0 ? res->loglik / (double)res->n_obs : NAN;
    const ghf_h5_attr root[] = {
        {"loglik", GHF_H5_ATTR_F64, NULL, res->loglik, 0},
        {"mean_loglik", GHF_H5_ATTR_F64, NULL, mean, 0},
        {"n_obs", GHF_H5_ATTR_I64, NULL, 0, res->n_obs},
        {"n_rows", GHF_H5_ATTR_I64, NULL, 0, res->n_rows},
        {"n_nonfinite", GHF_H5_ATTR_I64, NULL, 0, res->n_nonfinite},
        {"model_file", GHF_H5_ATTR_STR, o->model_file, 0, 0},
        {"fit_name", GHF_H5_ATTR_STR, res->fit_name, 0, 0},
        {"family", GHF_H5_ATTR_STR, res->family, 0, 0},
        {"data_file", GHF_H5_ATTR_STR, o->data, 0, 0},
        {"dataset", GHF_H5_ATTR_STR, o->dataset && *o->dataset ? o->dataset : "/X", 0, 0},
        {"dim", GHF_H5_ATTR_I64, NULL, 0, res->d}};
    return ghf_h5_write_columns(comm, o->out, "ghfit_scores_version", res->n_rows, sh->row0, sh->nrows, 5, cols,
                                (int)(sizeof root / sizeof root[0]), root, err, errlen);
}

int ghf_eval_run(MPI_Comm comm, const ghf_eval_opts *o, ghf_eval_result *res, char *err, size_t errlen)
{
    int size;
    MPI_Comm_size(comm, &size);
    memset(res, 0, sizeof *res);
    ghf_fit_law law;
    ghf_family fam;
    int st = ghf_fit_law_load(comm, o->model_file, o->fit_name, &law, &fam, err, errlen);
    if (st) return st;
    snprintf(res->fit_name, sizeof res->fit_name, "%s", law.name);
    snprintf(res->family, sizeof res->family, "%s", law.family);
    res->d = law.d;
    /* the data set (its shape), the output, the lock */
    const ghf_io_plan plan = {.data = o->data, .dataset = o->dataset, .win_len = -1, .n_ranks = size,
                              .out = o->out, .out_kind = GHF_PATH_SCORES, .model = o->model_file};
    int64_t n = 0;
    int d = 0;
    st = ghf_io_check(comm, &plan, &n, &d, err, errlen);
    if (!st && d != law.d) {
        snprintf(err, errlen, "%s:%s: %d columns, but the fit %s of %s has dimension %d", o->data,
                 o->dataset && *o->dataset ? o->dataset : "/X", d, law.name, o->model_file, law.d);
        st = 2;
    }
    res->n_rows = n;
    ghf_shard sh;
    memset(&sh, 0, sizeof sh);
    eval_rows r;
    memset(&r, 0, sizeof r);
    double t0 = MPI_Wtime();
    if (!st) {
        const ghf_read_opts ro = {.path = o->data, .dataset = o->dataset, .win_len = -1, .drop_nonfinite = 2,
                                  .granule = GHF_ROW_BLOCK};
        st = ghf_h5_read_shard(comm, &ro, &sh, err, errlen);
    }
    if (!st) {
        const int oom = rows_alloc(&r, sh.nrows) != 0;
        if (oom) snprintf(err, errlen, "eval: out of memory for %lld rows", (long long)sh.nrows);
        st = ghf_agree(comm, oom, err, errlen);
    }
    double t1 = MPI_Wtime();
    if (!st) {
        flag_nonfinite(&sh, law.mu, r.flag);
        st = eval_rows_compute(comm, &law, fam, &sh, &r, res, err, errlen);
    }
    double t2 = MPI_Wtime();
    if (!st) st = eval_write(comm, o, &sh, &r, res, err, errlen);
    res->seconds_read = t1 - t0;
    res->seconds_eval = t2 - t1;
    res->seconds_write = MPI_Wtime() - t2;
    rows_free(&r);
    ghf_shard_free(&sh);
    ghf_fit_law_free(&law);
    return st;
}
