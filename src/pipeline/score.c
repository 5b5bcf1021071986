/* score.c - `ghfit eval`: a fit of a result file applied to a data set, row
 * by row, with the E-step's own per-row arithmetic (the CPU backend's pass
 * without the statistics: ghf_backend_cpu_score1, one pass, or
 * ghf_backend_cpu_score, two), summed as the E-step sums
 * (rank-independent bits), written by every rank with collective MPI-IO into
 * one file (ghf_h5_write_columns). */
#include "score.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

/* Rank 0's law to every rank (d and the strings first, then the arrays; a
 * mixture's proportions, then each component as a law). */
static int bcast_law(MPI_Comm comm, int rank, ghf_fit_law *law)
{
    int64_t meta[4] = {law->d, law->n_obs, law->symmetric, law->n_components};
    MPI_Bcast(meta, 4, MPI_INT64_T, 0, comm);
    if (meta[3] >= 2) { /* a mixture */
        const int K = (int)meta[3];
        MPI_Bcast(law->name, (int)sizeof law->name, MPI_CHAR, 0, comm);
        MPI_Bcast(law->family, (int)sizeof law->family, MPI_CHAR, 0, comm);
        MPI_Bcast(law->status, (int)sizeof law->status, MPI_CHAR, 0, comm);
        if (rank != 0) {
            law->d = (int)meta[0];
            law->n_obs = meta[1];
            law->symmetric = (int)meta[2];
            law->p = law->a = law->b = NAN;
            law->factors = -1;
            law->prop = calloc((size_t)K, sizeof(double));
            law->comp = calloc((size_t)K, sizeof(ghf_fit_law));
            if (law->prop && law->comp) law->n_components = K;
        }
        if (ghf_any(comm, law->n_components != K)) return 1;
        MPI_Bcast(law->prop, K, MPI_DOUBLE, 0, comm);
        double sc[2] = {law->loglik, law->p_fixed};
        MPI_Bcast(sc, 2, MPI_DOUBLE, 0, comm);
        law->loglik = sc[0];
        law->p_fixed = sc[1];
        for (int k = 0; k < K; k++)
            if (bcast_law(comm, rank, &law->comp[k])) return 1;
        return 0;
    }
    MPI_Bcast(law->name, (int)sizeof law->name, MPI_CHAR, 0, comm);
    MPI_Bcast(law->family, (int)sizeof law->family, MPI_CHAR, 0, comm);
    MPI_Bcast(law->status, (int)sizeof law->status, MPI_CHAR, 0, comm);
    const int d = (int)meta[0];
    int oom = 0;
    if (rank != 0) {
        law->d = d;
        law->n_obs = meta[1];
        law->symmetric = (int)meta[2];
        law->n_components = 1;
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

static int check_one(const char *file, const ghf_fit_law *law, ghf_family *fam, char *err, size_t errlen);

/* Is the law one ghfit can evaluate?  0, or 2 with a message.  A mixture:
 * every component, and its Sigma positive definite (named
 * FILE:/fits/NAME/components/K/params/...). */
int ghf_fit_law_check(const char *file, const ghf_fit_law *law, ghf_family *fam, char *err, size_t errlen)
{
    if (law->n_components < 2) return check_one(file, law, fam, err, errlen);
    int st = 0;
    double *L = malloc((size_t)law->d * (size_t)law->d * sizeof(double));
    if (!L) {
        snprintf(err, errlen, "%s:/fits/%s: out of memory for d = %d", file, law->name, law->d);
        return 1;
    }
    for (int k = 0; !st && k < law->n_components; k++) {
        ghf_fit_law c = law->comp[k];
        snprintf(c.name, sizeof c.name, "%.40s/components/%d", law->name, k);
        st = check_one(file, &c, fam, err, errlen);
        if (!st && ghf_cholesky(law->d, c.sigma, L) != 0) {
            snprintf(err, errlen, "%s:/fits/%s/params/sigma: not positive definite (component %d of the %d-component "
                     "mixture)", file, c.name, k, law->n_components);
            st = 2;
        }
    }
    free(L);
    return st;
}

static int check_law(const char *file, const ghf_fit_law *law, ghf_family *fam, char *err, size_t errlen)
{
    return ghf_fit_law_check(file, law, fam, err, errlen);
}

static int check_one(const char *file, const ghf_fit_law *law, ghf_family *fam, char *err, size_t errlen)
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
    /* (p, a, b) in the family's domain (a GIG law: a, b >= 0, not both 0;
     * the family's own p, b = 0 for vg, a = 0 for t): a file edited by hand
     * or damaged is refused here, naming the parameter, not later as a
     * draw or a density that is not finite */
    char why[200];
    const ghf_model m = {*fam, 0, 0, 0.0};
    if (*fam != GHF_FAMILY_GAUSS && !ghf_model_sub_ok(&m, law->d, law->p, law->a, law->b, why, sizeof why)) {
        snprintf(err, errlen, "%s:/fits/%s: not a valid %s law: %s (status: %s)", file, law->name, law->family, why,
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
    int st = rank == 0 ? ghf_h5_read_fit_any(file, name, law, err, errlen) : 0;
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

int ghf_fit_law_load_local(const char *file, const char *name, ghf_fit_law *law, ghf_family *fam, char *err,
                           size_t errlen)
{
    memset(law, 0, sizeof *law);
    int st = ghf_h5_read_fit_any(file, name, law, err, errlen);
    if (!st) st = check_law(file, law, fam, err, errlen);
    if (st) ghf_fit_law_free(law);
    return st;
}

int ghf_law_dim_check(const char *data, const char *dataset, int d, const ghf_fit_law *law, const char *model_file,
                      char *err, size_t errlen)
{
    if (d == law->d) return 0;
    snprintf(err, errlen, "%.1000s:%.200s: %d columns, but the fit %s of %.1000s has dimension %d", data,
             dataset && *dataset ? dataset : "/X", d, law->name, model_file, law->d);
    return 2;
}

ghf_io_plan ghf_eval_plan(const ghf_eval_opts *o, int n_ranks)
{
    const ghf_io_plan plan = {.data = o->data, .dataset = o->dataset, .win_len = -1, .n_ranks = n_ranks,
                              .out = o->out, .out_kind = GHF_PATH_SCORES, .model = o->model_file};
    return plan;
}

/* ---------------------------------------------------------------------------
 * eval
 * ------------------------------------------------------------------------- */

typedef struct eval_rows {
    int64_t n;                /* this rank's rows */
    double *q, *ll, *ey, *eu; /* q becomes the Mahalanobis distance */
    double *zw;               /* the pass's scratch */
    double *mem;              /* what was allocated for them (ll, ey, eu may lie in the rows' memory) */
    double *blk;              /* one pass (not NULL): the rows' memory; sub-block b (nb rows from r0)
                                 keeps ll, ey, eu (and, d >= 4, the distance) at blk + r0 d, nb each */
    int one;                  /* the one pass (ghf_backend_cpu_score1), the same on every rank */
    int d;
    unsigned char *flag;
    int64_t nblk;             /* sub-blocks of GHF_SCORE_BLOCK rows */
    double *part;             /* [nblk] each sub-block's sum of its finite log-densities */
    int *nok, *nflag;         /* [nblk] its finite rows, its flagged rows */
} eval_rows;

static void rows_free(eval_rows *r)
{
    free(r->mem);
    free(r->flag);
    free(r->part);
    free(r->nok);
    free(r->nflag);
    memset(r, 0, sizeof *r);
}

/* k arrays of n doubles in one allocation, on huge pages where the system
 * offers them (fewer page faults when the pass first writes them). */
static double *rows_mem(size_t n, int k)
{
    const size_t huge = (size_t)2 << 20, bytes = (k * n * sizeof(double) + huge - 1) / huge * huge;
    double *m = aligned_alloc(huge, bytes);
#ifdef MADV_HUGEPAGE
    if (m && bytes >= 2 * huge) (void)madvise(m, bytes, MADV_HUGEPAGE);
#endif
    return m;
}

/* The per-row arrays of n rows, each starting 16-byte aligned.  spare:
 * NULL, or the rows themselves (n x d doubles, no longer needed once the
 * pass calls eval_block): when they have room (d >= 3), ll, ey and eu go
 * there, which spares fresh memory (zeroed pages: an eighth of the pass at
 * d = 10).  The pass's scratch zw when moments.  one (the one pass, with
 * spare): the values stay in sub-blocks of the rows (r->blk), the distance
 * too when d >= 4 (else its own array). */
static int rows_alloc(eval_rows *r, int64_t n, double *spare, int d, int moments, int one)
{
    memset(r, 0, sizeof *r);
    r->n = n;
    r->d = d;
    r->nblk = (n + GHF_SCORE_BLOCK - 1) / GHF_SCORE_BLOCK;
    const size_t m = (size_t)(n > 0 ? n + (n & 1) : 2), mb = (size_t)(r->nblk > 0 ? r->nblk : 1);
    /* one pass: the values go to the block's own rows (the distance too when d >= 4) */
    r->one = one;
    const int own = !(spare && n > 0 && (size_t)n * (size_t)d >= 3 * m);
    if (one) r->blk = spare; /* NULL: no rows */
    r->mem = one ? (d >= 4 ? NULL : rows_mem(m, 1)) : rows_mem(m, 1 + (moments ? 1 : 0) + (own ? 3 : 0));
    if (one) {
        r->q = d >= 4 ? NULL : r->mem;
    } else if (r->mem) {
        double *p = own ? r->mem : spare;
        r->ll = p, r->ey = p + m, r->eu = p + 2 * m;
        r->q = own ? r->mem + 3 * m : r->mem;
        r->zw = moments ? r->q + m : NULL;
    }
    r->flag = calloc(m, 1);
    r->part = malloc(mb * sizeof(double));
    r->nok = malloc(mb * sizeof(int));
    r->nflag = malloc(mb * sizeof(int));
    return (r->mem || (one && d >= 4)) && r->flag && r->part && r->nok && r->nflag ? 0 : -1;
}

/* The pass's parameters.  The Gaussian has no mixing variable: its q comes
 * from the same pass (the quadratic forms only) with a stand-in subordinator
 * (NIG, gamma = 0), its log-density and moments from q (eval_block).  0, or
 * 2 (not a valid law). */
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

typedef struct eval_ctx {
    eval_rows *r;
    int gauss;
    double c0; /* the Gaussian's log-density at q = 0 */
} eval_ctx;

/* The pass's values of one sub-block of rows, finished while in cache (a
 * ghf_score_fn): the Gaussian's log-density and moments from q; q becomes
 * sqrt(q); a flagged row (1: non-finite values) gets NaN values, a row with
 * a non-finite log-density flag 2.  The sub-block's sum of the finite
 * log-densities as the E-step forms its statistics (src/backend/cpu_block.h:
 * eight lanes in row order, then ((0+1)+(2+3))+((4+5)+(6+7))); plain loops
 * over the rows, so that they vectorise.  ll, ey, eu go to the rows' arrays
 * with non-temporal stores (read again only by the writer), or, one pass,
 * stay in the sub-block's rows (the backend's moments kernel wrote them
 * there, else copied), with the distance when d >= 4. */
static void eval_block(void *vctx, const ghf_score_block *b)
{
    const eval_ctx *e = vctx;
    eval_rows *r = e->r;
    const int nb = b->nb;
    double *restrict q = b->q;
    unsigned char *flag = b->flag;
    double gl[GHF_SCORE_BLOCK], one[GHF_SCORE_BLOCK];
    double *ll = b->ll, *ey = b->ey, *eu = b->einvy;
    if (!ll) { /* the Gaussian */
        for (int i = 0; i < nb; i++) {
            gl[i] = e->c0 - 0.5 * q[i];
            one[i] = 1.0;
        }
        ll = gl, ey = eu = one;
    }
    for (int i = 0; i < nb; i++) q[i] = sqrt(q[i]);
    int nflag = 0;
    for (int i = 0; i < nb; i++) nflag += flag[i] != 0;
    if (nflag) /* rare: rows with non-finite values */
        for (int i = 0; i < nb; i++)
            if (flag[i]) ll[i] = q[i] = ey[i] = eu[i] = NAN;
    double t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int nok = 0;
    for (int g = 0; g < nb; g += 8)
        for (int k = 0; k < 8 && g + k < nb; k++) { /* a flagged row's ll is NaN: left out */
            const int ok = fabs(ll[g + k]) <= DBL_MAX;
            t[k] += ok ? ll[g + k] : 0.0;
            nok += ok;
        }
    if (nok + nflag < nb) /* rare: finite rows whose log-density is not */
        for (int i = 0; i < nb; i++)
            if (!flag[i] && !(fabs(ll[i]) <= DBL_MAX)) flag[i] = 2, nflag++;
    r->part[b->bi] = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
    r->nok[b->bi] = nok;
    r->nflag[b->bi] = nflag;
    if (r->blk) { /* one pass: the block's own rows, just read (in cache) */
        double *o = r->blk + (size_t)b->r0 * (size_t)r->d;
        if (ll != o) { /* else the backend wrote them there */
            memcpy(o, ll, (size_t)nb * sizeof(double));
            memcpy(o + nb, ey, (size_t)nb * sizeof(double));
            memcpy(o + 2 * nb, eu, (size_t)nb * sizeof(double));
        }
        if (r->d >= 4)
            memcpy(o + 3 * nb, q, (size_t)nb * sizeof(double));
        else
            ghf__stream_copy(r->q + b->r0, q, nb);
        return;
    }
    ghf__stream_copy(r->ll + b->r0, ll, nb);
    ghf__stream_copy(r->ey + b->r0, ey, nb);
    ghf__stream_copy(r->eu + b->r0, eu, nb);
}

/* This rank's sum of the finite log-densities into *acc, as the E-step adds
 * its statistics: the sub-blocks' sums added in order over each block of
 * GHF_ROW_BLOCK rows, the blocks' sums exactly (shards start at multiples of
 * GHF_ROW_BLOCK: the same bits on any number of ranks and threads).  The
 * numbers of finite and flagged rows into n[0], n[1]. */
static void eval_sums(const eval_rows *r, ghf_xsum *acc, int64_t n[2])
{
    const int64_t per = GHF_ROW_BLOCK / GHF_SCORE_BLOCK;
    ghf_xsum_init(acc);
    n[0] = n[1] = 0;
    for (int64_t b0 = 0; b0 < r->nblk; b0 += per) {
        double s = 0.0;
        for (int64_t b = b0; b < b0 + per && b < r->nblk; b++) {
            s += r->part[b];
            n[0] += r->nok[b];
            n[1] += r->nflag[b];
        }
        ghf_xsum_add(acc, s);
    }
}

/* Collective: one pass (ghf_backend_cpu_score1) when the rows' memory may
 * take the values (spend_x), the law has a mixing variable, 3 <= d <=
 * GHF_SCORE_ONE_PASS_MAX_D and every rank's rows start at a multiple of GHF_SCORE_BLOCK; the same
 * verdict on every rank. */
static int eval_one_pass(MPI_Comm comm, const ghf_shard *sh, int spend_x, ghf_family fam)
{
    const int ok = spend_x && fam != GHF_FAMILY_GAUSS && sh->d >= 3 && sh->d <= GHF_SCORE_ONE_PASS_MAX_D &&
                   sh->row0 >= 0 && sh->row0 % GHF_SCORE_BLOCK == 0;
    return !ghf_any(comm, !ok);
}

/* Collective: the pass over the shard and the global sums.  0, 1 or 2. */
static int eval_rows_compute(MPI_Comm comm, const ghf_fit_law *law, ghf_family fam, const ghf_shard *sh,
                             eval_rows *r, ghf_eval_result *res, char *err, size_t errlen)
{
    const int d = law->d;
    ghf_params t;
    ghf_derived g;
    memset(&t, 0, sizeof t);
    memset(&g, 0, sizeof g);
    int st = ghf_params_alloc(&t, d) || ghf_derived_alloc(&g, d) ? 1 : 0;
    if (st) snprintf(err, errlen, "eval: out of memory for d = %d", d);
    ghf_estep_input in;
    if (!st && eval_input(law, fam, &t, &g, &in) != 0) {
        snprintf(err, errlen, "/fits/%s: not a valid %s law: Sigma is not positive definite (or the law's constants "
                 "are not finite)", law->name, law->family);
        st = 2;
    }
    ghf_backend *be = NULL;
    if ((st = ghf_agree(comm, st, err, errlen)) == 0) {
        be = ghf_backend_cpu_create(comm, sh->x, sh->nrows, d, err, errlen);
        if (!be) st = 1; /* agreed inside */
    }
    const int gauss = fam == GHF_FAMILY_GAUSS;
    eval_ctx e = {r, gauss, st ? 0.0 : -0.5 * (d * GHF_LOG_2PI + g.logdet)};
    if (!st && r->one)
        st = ghf_backend_cpu_score1(be, &in, sh->row0, 1, r->flag, eval_block, &e, err, errlen) ? 1 : 0;
    else if (!st)
        st = ghf_backend_cpu_score(be, &in, sh->row0, r->q, r->zw, r->flag, eval_block, &e, err, errlen) ? 1 : 0;
    if (be) be->destroy(be);
    if (!st) {
        ghf_xsum acc;
        int64_t cnt[2];
        eval_sums(r, &acc, cnt);
        MPI_Allreduce(MPI_IN_PLACE, cnt, 2, MPI_INT64_T, MPI_SUM, comm);
        if (ghf_xsum_allreduce(comm, &acc, 1) != 0) {
            snprintf(err, errlen, "eval: the all-reduce of the log-likelihood failed");
            st = 1;
        }
        res->n_obs = cnt[0];
        res->n_nonfinite = cnt[1];
        res->loglik = ghf_xsum_value(&acc);
    }
    ghf_derived_free(&g);
    ghf_params_free(&t);
    return ghf_agree(comm, st, err, errlen);
}

/* The log-likelihood sums of the combined rows of a mixture (r->ll, r->flag
 * filled): per sub-block the eight lanes of eval_block, then eval_sums and
 * the all-reduce of eval_rows_compute (the same bits on any number of ranks). */
static int mix_sums(MPI_Comm comm, eval_rows *r, ghf_eval_result *res, char *err, size_t errlen)
{
    for (int64_t bi = 0; bi < r->nblk; bi++) {
        const int64_t r0 = bi * GHF_SCORE_BLOCK;
        const int nb = (int)(r->n - r0 < GHF_SCORE_BLOCK ? r->n - r0 : GHF_SCORE_BLOCK);
        const double *ll = r->ll + r0;
        double t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int nok = 0, nflag = 0;
        for (int g = 0; g < nb; g += 8)
            for (int k = 0; k < 8 && g + k < nb; k++) {
                const int ok = r->flag[r0 + g + k] == 0;
                t[k] += ok ? ll[g + k] : 0.0;
                nok += ok;
                nflag += !ok;
            }
        r->part[bi] = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
        r->nok[bi] = nok;
        r->nflag[bi] = nflag;
    }
    ghf_xsum acc;
    int64_t cnt[2];
    eval_sums(r, &acc, cnt);
    MPI_Allreduce(MPI_IN_PLACE, cnt, 2, MPI_INT64_T, MPI_SUM, comm);
    int st = 0;
    if (ghf_xsum_allreduce(comm, &acc, 1) != 0) {
        snprintf(err, errlen, "eval: the all-reduce of the log-likelihood failed");
        st = 1;
    }
    res->n_obs = cnt[0];
    res->n_nonfinite = cnt[1];
    res->loglik = ghf_xsum_value(&acc);
    return ghf_agree(comm, st, err, errlen);
}

/* Collective: a K-component mixture on the shard (its rows kept).  Each
 * component's own pass (eval_rows_compute, two passes into arrays of its
 * own), folded into the rows as it comes: a running log-sum-exp of l_k =
 * log pi_k + log f_k(x) (max in r->ll, the scaled sum in sc), the scaled
 * posterior sums of E[Y|x] and E[1/Y|x] (r->ey, r->eu), the MAP component
 * (cl, first on ties) and its distance (r->q); tau [n][K] holds l_k until
 * the end, then tau_k = exp(l_k - log f(x)).  Every row by the same
 * operations in the same order on any number of ranks.  0, 1 or 2. */
static int eval_mix_compute(MPI_Comm comm, const ghf_fit_law *law, ghf_family fam, const ghf_shard *sh,
                            eval_rows *r, double *tau, int32_t *cl, ghf_eval_result *res, char *err, size_t errlen)
{
    const int K = law->n_components;
    const int64_t n = sh->nrows;
    double *sc = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    int st = ghf_agree(comm, sc ? 0 : 1, err, errlen);
    if (st) {
        snprintf(err, errlen, "eval: out of memory for %lld rows", (long long)n);
        free(sc);
        return st;
    }
    for (int64_t i = 0; i < n; i++) {
        r->ll[i] = -INFINITY;
        sc[i] = r->ey[i] = r->eu[i] = 0.0;
        r->q[i] = NAN;
        cl[i] = -1;
    }
    eval_rows c; /* each component's pass, into the same arrays (flags cleared before each) */
    const int oom = rows_alloc(&c, n, NULL, sh->d, fam != GHF_FAMILY_GAUSS, 0) != 0;
    if (oom) snprintf(err, errlen, "eval: out of memory for %lld rows", (long long)n);
    st = ghf_agree(comm, oom, err, errlen);
    for (int k = 0; !st && k < K; k++) {
        ghf_eval_result rk;
        memset(&rk, 0, sizeof rk);
        memset(c.flag, 0, (size_t)(n > 0 ? n : 1));
        if ((st = eval_rows_compute(comm, &law->comp[k], fam, sh, &c, &rk, err, errlen)) == 2 &&
            err[0] == '/') {
            char e2[1200]; /* name the component */
            snprintf(e2, sizeof e2, "/fits/%s/components/%d: %.1000s", law->name, k, strchr(err, ' ') + 1);
            snprintf(err, errlen, "%s", e2);
        }
        const double lp = log(law->prop[k]);
        for (int64_t i = 0; !st && i < n; i++) {
            if (c.flag[i] == 1) { /* a non-finite row: the same for every component */
                r->flag[i] = 1;
                continue;
            }
            const double l = lp + c.ll[i];
            tau[i * K + k] = l;
            if (isnan(l) || isnan(sc[i])) { /* a component without a density here: the mixture has none */
                sc[i] = NAN;
                continue;
            }
            if (l == -INFINITY) continue;
            const double ey = fam == GHF_FAMILY_GAUSS ? 1.0 : c.ey[i], eu = fam == GHF_FAMILY_GAUSS ? 1.0 : c.eu[i];
            if (l > r->ll[i]) { /* a new maximum: rescale the sums, the MAP moves */
                const double f = r->ll[i] == -INFINITY ? 0.0 : exp(r->ll[i] - l);
                sc[i] = sc[i] * f + 1.0;
                r->ey[i] = r->ey[i] * f + ey;
                r->eu[i] = r->eu[i] * f + eu;
                r->ll[i] = l;
                r->q[i] = c.q[i];
                cl[i] = k;
            } else {
                const double e = exp(l - r->ll[i]);
                sc[i] += e;
                r->ey[i] += e * ey;
                r->eu[i] += e * eu;
            }
        }
    }
    rows_free(&c);
    for (int64_t i = 0; !st && i < n; i++) {
        const double lf = r->ll[i] + log(sc[i]);
        if (r->flag[i] == 0 && fabs(lf) <= DBL_MAX) {
            for (int k = 0; k < K; k++) tau[i * K + k] = exp(tau[i * K + k] - lf);
            r->ey[i] /= sc[i];
            r->eu[i] /= sc[i];
            r->ll[i] = lf;
            continue;
        }
        if (r->flag[i] == 0) r->flag[i] = 2; /* a finite row whose log-density is not */
        r->ll[i] = r->flag[i] == 1 ? NAN : isnan(sc[i]) ? NAN : lf;
        r->ey[i] = r->eu[i] = r->q[i] = NAN;
        for (int k = 0; k < K; k++) tau[i * K + k] = NAN;
        cl[i] = -1;
    }
    free(sc);
    if (!st) st = mix_sums(comm, r, res, err, errlen);
    return st;
}

int ghf_score_loglik(MPI_Comm comm, const ghf_fit_law *law, ghf_family fam, ghf_shard *sh, int spend_x,
                     double *loglik, int64_t *n_obs, char *err, size_t errlen)
{
    eval_rows r;
    ghf_eval_result res;
    memset(&res, 0, sizeof res);
    const int one = eval_one_pass(comm, sh, spend_x, fam);
    const int oom = rows_alloc(&r, sh->nrows, spend_x ? sh->x : NULL, sh->d, fam != GHF_FAMILY_GAUSS, one) != 0;
    if (oom) snprintf(err, errlen, "eval: out of memory for %lld rows", (long long)sh->nrows);
    int st = ghf_agree(comm, oom, err, errlen);
    if (!st) st = eval_rows_compute(comm, law, fam, sh, &r, &res, err, errlen);
    rows_free(&r);
    *loglik = res.loglik;
    *n_obs = res.n_obs;
    return st;
}

/* Collective: the output file (a mixture: tau [n][K] and cl [n] too). */
static int eval_write(MPI_Comm comm, const ghf_eval_opts *o, const ghf_shard *sh, const eval_rows *r,
                      const ghf_eval_result *res, int K, const double *tau, const int32_t *cl, char *err,
                      size_t errlen)
{
    /* one pass: ll, ey, eu (and the distance when d >= 4) in sub-blocks of the rows' memory */
    const int64_t B = r->one ? GHF_SCORE_BLOCK : 0;
    const int qb = r->one && r->d >= 4;
    const int mix = K >= 2;
    const ghf_h5_column cols[] = {
        {"/logpdf", 0, B ? r->blk : r->ll,
         mix ? "log-density of the row under the fitted mixture (natural log)"
             : "log-density of the row under the fitted law (natural log)", B, r->d, 0, 0, 0},
        {"/mahalanobis", 0, qb ? r->blk : r->q,
         mix ? "sqrt((x - mu_c)' Sigma_c^-1 (x - mu_c)) under the row's MAP component c"
             : "sqrt((x - mu)' Sigma^-1 (x - mu)) with the fit's mu and Sigma",
         qb ? B : 0, r->d, qb ? 3 : 0, 0, 0},
        {"/e_y", 0, B ? r->blk : r->ey,
         mix ? "E[Y | x]: posterior mean of the mixing variable over the mixture (sum_k tau_k E_k[Y | x])"
             : "E[Y | x]: posterior mean of the mixing variable", B, r->d, 1, 0, 0},
        {"/e_invy", 0, B ? r->blk : r->eu,
         mix ? "E[1/Y | x]: posterior mean of the inverse mixing variable over the mixture"
             : "E[1/Y | x]: posterior mean of the inverse mixing variable", B, r->d, 2, 0, 0},
        {"/nonfinite", 1, r->flag, "0: finite row; 1: the row holds a non-finite value (its values NaN); "
                                   "2: its log-density is not finite", 0, 0, 0, 0, 0},
        {"/responsibility", 0, tau, "tau_ik = pi_k f_k(x_i) / f(x_i): the posterior probability of component k "
                                    "(NaN for rows flagged 1 or 2)", 0, 0, 0, K, 0},
        {"/cluster", 0, cl, "the MAP component argmax_k tau_ik (0-based, the order of components/); -1 for rows "
                            "flagged 1 or 2", 0, 0, 0, 0, 1}};
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
        {"dim", GHF_H5_ATTR_I64, NULL, 0, res->d},
        {"n_components", GHF_H5_ATTR_I64, NULL, 0, K >= 2 ? K : 1}};
    return ghf_h5_write_columns(comm, o->out, "ghfit_scores_version", res->n_rows, sh->row0, sh->nrows,
                                mix ? 7 : 5, cols, (int)(sizeof root / sizeof root[0]), root, err, errlen);
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
    res->n_components = law.n_components;
    /* the data set (its shape), the output, the lock */
    const ghf_io_plan plan = ghf_eval_plan(o, size);
    int64_t n = 0;
    int d = 0;
    st = ghf_io_check(comm, &plan, &n, &d, err, errlen);
    if (!st) st = ghf_law_dim_check(o->data, o->dataset, d, &law, o->model_file, err, errlen);
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
    const int K = law.n_components;
    double *tau = NULL;
    int32_t *cl = NULL;
    if (!st && K >= 2) { /* a mixture: the components' passes keep the rows; the combined rows, tau, cl */
        const size_t m = (size_t)(sh.nrows > 0 ? sh.nrows : 1);
        tau = malloc(m * (size_t)K * sizeof(double));
        cl = malloc(m * sizeof(int32_t));
        const int oom = rows_alloc(&r, sh.nrows, NULL, sh.d, 0, 0) != 0 || !tau || !cl;
        if (oom) snprintf(err, errlen, "eval: out of memory for %lld rows", (long long)sh.nrows);
        st = ghf_agree(comm, oom, err, errlen);
    } else if (!st) {
        const int one = eval_one_pass(comm, &sh, 1, fam);
        const int oom = rows_alloc(&r, sh.nrows, sh.x, sh.d, fam != GHF_FAMILY_GAUSS, one) != 0; /* the pass destroys sh.x */
        if (oom) snprintf(err, errlen, "eval: out of memory for %lld rows", (long long)sh.nrows);
        st = ghf_agree(comm, oom, err, errlen);
    }
    double t1 = MPI_Wtime();
    if (!st && K >= 2) {
        if ((st = eval_mix_compute(comm, &law, fam, &sh, &r, tau, cl, res, err, errlen)) == 2 && err[0] == '/') {
            char e2[1200];
            snprintf(e2, sizeof e2, "%.500s:%.690s", o->model_file, err);
            snprintf(err, errlen, "%s", e2);
        }
    } else if (!st && (st = eval_rows_compute(comm, &law, fam, &sh, &r, res, err, errlen)) == 2 && err[0] == '/') {
        char e2[1200]; /* "/fits/NAME: not a valid law ..." -> "FILE:/fits/NAME: ..." */
        snprintf(e2, sizeof e2, "%.500s:%.690s", o->model_file, err);
        snprintf(err, errlen, "%s", e2);
    }
    double t2 = MPI_Wtime();
    if (!st) st = eval_write(comm, o, &sh, &r, res, K, tau, cl, err, errlen);
    res->seconds_read = t1 - t0;
    res->seconds_eval = t2 - t1;
    res->seconds_write = MPI_Wtime() - t2;
    rows_free(&r);
    free(tau);
    free(cl);
    ghf_shard_free(&sh);
    ghf_fit_law_free(&law);
    return st;
}
