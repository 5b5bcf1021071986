/* em_mixture.c - EM for a K-component mixture of one family's laws
 * (--components K; docs/math.md 10): the E-step over the rank's rows (the
 * K components' per-row E-step, responsibilities by log-sum-exp, per
 * component the responsibility-weighted statistics of kernels/estep.h),
 * summed exactly (src/dist/xreduce.h) so that every rank count gives the
 * same bits; the M-step: the proportions and K of the single law's M-steps
 * (src/em/mstep.h).  Starts: a distributed k-means++ (Arthur & Vassilvitskii
 * 2007) by an exponential race over the rows (rank-count independent), a
 * few Lloyd steps, then moment starts per cluster; the best of
 * o->n_starts starts by log-likelihood.  No backend: the rows are the
 * host's (as the factor form, em_factor.c). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "agree.h"
#include "bessel.h"
#include "bessel_plan.h"
#include "cpu_block.h"
#include "em_internal.h"
#include "gig.h"
#include "mstep.h"
#include "xreduce.h"

/* Lloyd iterations of the k-means start (fewer when the assignment settles) */
#define MX_LLOYD 10
/* extra slots after the K blocks of statistics: the mixture's log-likelihood,
 * rows without a finite one, sum w log tau_MAP (ICL), sum w */
enum { MX_LL = 0, MX_NBAD = 1, MX_MAP = 2, MX_W = 3, MX_EXTRA = 4 };

typedef struct mx_comp_der {
    double *Linv;  /* [d*d] lower */
    double *wv;    /* [d] L^-1 gamma */
    double logdet;
    ghf_estep_consts c;
} mx_comp_der;

typedef struct mx_ctx {
    MPI_Comm comm;
    const double *x, *w;
    int64_t nrows;
    int d, K, gauss, rank;
    const ghf_em_opts *o;
    ghf_model model;
    ghf_mstep_opts mo;
    int slen, len;
    double *stats;
    mx_comp_der *g;  /* [K] */
    double *logpi;   /* [K] */
    /* per component, the E-step's fixed-order Bessel plan (kernels/bessel_plan.h)
     * when the fit has enough rows (use_plan[k]: built for this E-step) */
    ghf_bessel_plan *plans; /* [K] or NULL */
    int *use_plan;          /* [K] */
    double xmax;            /* the largest |x| over all ranks */
    int plan_avx2;          /* evaluate the plans with ghf_bessel_plan_eval_avx2 (same bits) */
    ghf_bessel_fplan *fplans; /* [K] the plans folded with the per-row log and exps (kernel path), or NULL */
    const ghf_cpu_kernels *kern; /* the CPU backend's block kernels (d <= GHF_CPU_SMALL_D), or NULL */
    double t_estep, t_mstep;
    int n_estep;
} mx_ctx;

/* ---------------------------------------------------------------------------
 * The E-step
 * ------------------------------------------------------------------------- */

/* Quantities of component t for the E-step.  0, or -1 (Sigma not positive
 * definite, or a constant not finite). */
static int mx_derive(const mx_ctx *e, const ghf_params *t, mx_comp_der *g, double *Lscratch)
{
    const int d = e->d;
    if (ghf_cholesky(d, t->sigma, Lscratch) != 0) return -1;
    /* L^-1 by forward substitution, column by column */
    memset(g->Linv, 0, (size_t)d * d * sizeof(double));
    double ld = 0.0;
    for (int i = 0; i < d; i++) {
        g->Linv[i * d + i] = 1.0 / Lscratch[i * d + i];
        ld += 2.0 * log(Lscratch[i * d + i]);
        for (int j = 0; j < i; j++) {
            double s = 0.0;
            for (int k = j; k < i; k++) s -= Lscratch[i * d + k] * g->Linv[k * d + j];
            g->Linv[i * d + j] = s / Lscratch[i * d + i];
        }
    }
    g->logdet = ld;
    if (!isfinite(ld)) return -1;
    double w2 = 0.0;
    for (int i = 0; i < d; i++) {
        double s = 0.0;
        for (int k = 0; k <= i; k++) s += g->Linv[i * d + k] * t->gamma[k];
        g->wv[i] = s;
        w2 += s * s;
    }
    if (e->gauss) return 0;
    return ghf_estep_consts_fill(t, d, ld, w2, &g->c);
}

typedef struct mx_pass {
    const mx_ctx *e;
    const ghf_mixture *m;
} mx_pass;

/* One block's partial sums (ghf_xreduce_rows).  Per component the
 * standardised rows Z = (X - 1 mu') L^-T by one triangular BLAS product,
 * the row quantities (q, zw, the Bessel point) per row; then per row the
 * responsibilities; then per component S4, S5 by matrix-vector products and
 * the lower triangle of S6 = sum w tau u x x' by a rank-nb update of the
 * rows scaled by sqrt(w tau u).  Within a block the order of the sums is
 * fixed, so the block's partials, and the exact sums over blocks, do not
 * depend on the rank count. */
static void mx_block_kern(const mx_pass *P, const double *x, int nb, int d, double *part);

static void mx_block(void *ctx, const double *x, int nb, int d, double *part)
{
    if (((const mx_pass *)ctx)->e->kern) {
        mx_block_kern(ctx, x, nb, d, part);
        return;
    }
    const mx_pass *P = ctx;
    const mx_ctx *e = P->e;
    const ghf_mixture *m = P->m;
    const int K = e->K, slen = e->slen;
    const int64_t i0 = (int64_t)((x - e->x) / d);
    double *ex = part + (size_t)K * slen;
    const size_t nk = (size_t)nb * K, nd = (size_t)nb * d;
    double *buf = malloc((nd + 6 * nk + 2 * (size_t)nb) * sizeof(double));
    if (!buf) {
        ex[MX_NBAD] += nb;
        return;
    }
    double *Z = buf, *lk = Z + nd, *uu = lk + nk, *vv = uu + nk, *ll = vv + nk, *tw = ll + nk, *tu = tw + nk;
    double *wa = tu + nk, *wb = wa + nb;
    unsigned char bad[GHF_ROW_BLOCK];
    for (int r = 0; r < nb; r++) bad[r] = 0;
    for (int k = 0; k < K; k++) {
        const mx_comp_der *g = &e->g[k];
        const ghf_params *t = &m->comp[k];
        const ghf_bessel_plan *pl = e->plans && e->use_plan[k] ? &e->plans[k] : NULL;
        for (int r = 0; r < nb; r++)
            for (int i = 0; i < d; i++) Z[(size_t)r * d + i] = x[(size_t)r * d + i] - t->mu[i];
        /* Z <- Z L^-T: row r becomes L^-1 (x_r - mu) */
        cblas_dtrmm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, nb, d, 1.0, g->Linv, d, Z, d);
        for (int r = 0; r < nb; r++) {
            const double *z = Z + (size_t)r * d;
            double q = 0.0, zw = 0.0;
            for (int i = 0; i < d; i++) {
                q += z[i] * z[i];
                zw += z[i] * g->wv[i];
            }
            ghf_point pt;
            if (e->gauss) {
                pt.u = pt.v = 1.0;
                pt.l = 0.0;
                pt.ll = -0.5 * (d * GHF_LOG_2PI + g->logdet + q);
            } else {
                const double zb = ghf_estep_arg(&g->c, q);
                ghf_bessel_eval bk;
                if (!pl)
                    bk = ghf_bessel_fused(g->c.P, zb);
#ifdef GHF_BESSEL_PLAN_AVX2
                else if (e->plan_avx2) /* the same bits, about twice as fast */
                    bk = ghf_bessel_plan_eval_avx2(pl, zb);
#endif
                else
                    bk = ghf_bessel_plan_eval(pl, zb);
                pt = ghf_estep_point(&g->c, q, zw, bk);
            }
            if (isnan(pt.ll)) bad[r] = 1;
            const size_t o = (size_t)r * K + k;
            uu[o] = pt.u;
            vv[o] = pt.v;
            ll[o] = pt.l;
            lk[o] = e->logpi[k] + pt.ll;
        }
    }
    /* responsibilities: tw = w tau, tu = w tau u (0 for the rows left out) */
    for (int r = 0; r < nb; r++) {
        const double wi = e->w ? e->w[i0 + r] : 1.0;
        double *l = lk + (size_t)r * K;
        double mx = -INFINITY;
        for (int k = 0; k < K; k++)
            if (l[k] > mx) mx = l[k];
        int skip = (e->w && wi == 0.0); /* a row of weight 0 adds exact zeros */
        if (!skip && (bad[r] || !isfinite(mx))) {
            ex[MX_NBAD] += 1.0;
            skip = 1;
        }
        double lse = 0.0;
        int kmap = 0;
        if (!skip) {
            double s = 0.0;
            for (int k = 0; k < K; k++) { /* tw holds exp(l_k - max) for now */
                tw[(size_t)r * K + k] = exp(l[k] - mx);
                s += tw[(size_t)r * K + k];
            }
            lse = mx + log(s);
            const double is = 1.0 / s;
            for (int k = 0; k < K; k++) {
                const size_t o = (size_t)r * K + k;
                const double tau = tw[o] * is;
                if (l[k] > l[kmap]) kmap = k;
                if (tau > 0.0 && (!isfinite(uu[o]) || !isfinite(vv[o]) || !isfinite(ll[o]))) skip = 2;
                tw[o] = wi * tau;
                tu[o] = tau > 0.0 ? wi * tau * uu[o] : 0.0;
            }
            if (skip) ex[MX_NBAD] += 1.0;
        }
        if (skip) {
            for (int k = 0; k < K; k++) tw[(size_t)r * K + k] = tu[(size_t)r * K + k] = 0.0;
            continue;
        }
        ex[MX_LL] += wi * lse;
        ex[MX_MAP] += wi * (l[kmap] - lse);
        ex[MX_W] += wi;
        for (int k = 0; k < K; k++) {
            const size_t o = (size_t)r * K + k;
            if (tw[o] == 0.0) continue;
            double *st = part + (size_t)k * slen;
            st[GHF_ST_N] += tw[o];
            st[GHF_ST_S1] += tu[o];
            st[GHF_ST_S2] += tw[o] * vv[o];
            st[GHF_ST_S3] += tw[o] * ll[o];
        }
    }
    /* per component: S4 = X' tw, S5 = X' tu, S6 += (sqrt(tu) X)' (sqrt(tu) X) (lower) */
    for (int k = 0; k < K; k++) {
        double *st = part + (size_t)k * slen;
        double *s4 = st + GHF_ST_S4, *s5 = s4 + d, *s6 = s5 + d;
        for (int r = 0; r < nb; r++) {
            wa[r] = tw[(size_t)r * K + k];
            wb[r] = tu[(size_t)r * K + k];
            const double sq = sqrt(wb[r]);
            for (int i = 0; i < d; i++) Z[(size_t)r * d + i] = sq * x[(size_t)r * d + i];
        }
        cblas_dgemv(CblasRowMajor, CblasTrans, nb, d, 1.0, x, d, wa, 1, 1.0, s4, 1);
        cblas_dgemv(CblasRowMajor, CblasTrans, nb, d, 1.0, x, d, wb, 1, 1.0, s5, 1);
        cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, d, nb, 1.0, Z, d, 1.0, s6, d);
    }
    free(buf);
}

/* The same with the CPU backend's block kernels (src/backend/cpu_block.h;
 * d <= GHF_CPU_SMALL_D), on sub-blocks of GHF_CPU_BLOCK rows: per component
 * q and zw of the packed rows and the moments (the folded plan where it
 * covers the rows, else ghf_estep_point), then per row the
 * responsibilities, then per component the kernel's s4 (weights w tau), s5
 * and s6 (weights w tau u).  Each row's values come from that row alone and
 * the sums over a sub-block are in a fixed order, so the bits do not depend
 * on the rank count. */
static void mx_block_kern(const mx_pass *P, const double *x, int nb, int d, double *part)
{
    const mx_ctx *e = P->e;
    const ghf_mixture *m = P->m;
    const ghf_cpu_kernels *kn = e->kern;
    const int K = e->K, slen = e->slen, B = GHF_CPU_BLOCK, dp = ghf__cpu_pack_stride(d);
    const int64_t i0 = (int64_t)((x - e->x) / d);
    double *ex = part + (size_t)K * slen;
    const size_t len = (size_t)B * dp + (size_t)K * 8 * B + 2 * (size_t)B + (size_t)ghf__cpu_sums_scratch(d) + 16;
    double *buf = aligned_alloc(64, ((len * sizeof(double)) + 63) & ~(size_t)63);
    if (!buf) {
        ex[MX_NBAD] += nb;
        return;
    }
    double *xP = buf, *q = xP + (size_t)B * dp, *zw = q + B, *U = zw + B, *V = U + (size_t)K * B,
           *Lg = V + (size_t)K * B, *LL = Lg + (size_t)K * B, *TW = LL + (size_t)K * B, *TU = TW + (size_t)K * B,
           *tacc = TU + (size_t)K * B;
    for (int r0 = 0; r0 < nb; r0 += B) {
        const int n = nb - r0 < B ? nb - r0 : B;
        const double *xb = x + (size_t)r0 * d;
        kn->pack(d, xb, n, xP);
        for (int k = 0; k < K; k++) {
            const mx_comp_der *g = &e->g[k];
            double *u = U + (size_t)k * B, *v = V + (size_t)k * B, *l = Lg + (size_t)k * B, *ll = LL + (size_t)k * B;
            kn->qzw(d, xP, n, m->comp[k].mu, g->Linv, g->wv, q, zw, NULL, 0);
            if (e->gauss) {
                for (int r = 0; r < n; r++) {
                    u[r] = v[r] = 1.0;
                    l[r] = 0.0;
                    ll[r] = -0.5 * (d * GHF_LOG_2PI + g->logdet + q[r]);
                }
            } else {
                const int up = e->plans && e->use_plan[k];
                const ghf_cpu_bessel bs = {&g->c, up ? &e->plans[k] : NULL, up && e->fplans ? &e->fplans[k] : NULL,
                                           e->plan_avx2};
                if (bs.fplan) kn->moments_vec(&bs, q, zw, n, u, v, l, ll);
                else kn->moments_ref(&bs, q, zw, n, u, v, l, ll);
            }
        }
        for (int r = 0; r < n; r++) {
            const double wi = e->w ? e->w[i0 + r0 + r] : 1.0;
            double mx = -INFINITY;
            int skip = (e->w && wi == 0.0), bad = 0;
            for (int k = 0; k < K; k++) {
                const double lk = e->logpi[k] + LL[(size_t)k * B + r];
                if (isnan(lk)) bad = 1;
                if (lk > mx) mx = lk;
            }
            if (!skip && (bad || !isfinite(mx))) {
                ex[MX_NBAD] += 1.0;
                skip = 1;
            }
            double s = 0.0, lmap = -INFINITY;
            if (!skip) {
                for (int k = 0; k < K; k++) {
                    const double lk = e->logpi[k] + LL[(size_t)k * B + r];
                    TW[(size_t)k * B + r] = exp(lk - mx);
                    s += TW[(size_t)k * B + r];
                    if (lk > lmap) lmap = lk;
                }
                const double is = 1.0 / s;
                for (int k = 0; k < K; k++) {
                    const size_t o = (size_t)k * B + r;
                    const double tau = TW[o] * is;
                    if (tau > 0.0 && (!isfinite(U[o]) || !isfinite(V[o]) || !isfinite(Lg[o]))) skip = 2;
                    TW[o] = wi * tau;
                    TU[o] = tau > 0.0 ? wi * tau * U[o] : 0.0;
                }
                if (skip) ex[MX_NBAD] += 1.0;
            }
            if (skip) {
                for (int k = 0; k < K; k++) TW[(size_t)k * B + r] = TU[(size_t)k * B + r] = 0.0;
                continue;
            }
            const double lse = mx + log(s);
            ex[MX_LL] += wi * lse;
            ex[MX_MAP] += wi * (lmap - lse);
            ex[MX_W] += wi;
            for (int k = 0; k < K; k++) {
                const size_t o = (size_t)k * B + r;
                if (TW[o] == 0.0) continue;
                double *st = part + (size_t)k * slen;
                st[GHF_ST_N] += TW[o];
                st[GHF_ST_S1] += TU[o];
                st[GHF_ST_S2] += TW[o] * V[o];
                st[GHF_ST_S3] += TW[o] * Lg[o];
            }
        }
        for (int k = 0; k < K; k++) {
            double *tw = TW + (size_t)k * B, *tu = TU + (size_t)k * B;
            for (int r = n; r % 8; r++) tw[r] = tu[r] = 0.0; /* the padding rows of the last group */
            double *st = part + (size_t)k * slen;
            kn->sums(d, xP, n, tu, tw, st + GHF_ST_S4, st + ghf_stats_s5(d), st + ghf_stats_s6(d), tacc);
        }
    }
    free(buf);
}

/* rows above which the E-step evaluates the Bessel functions through plans */
#define MX_PLAN_MIN_ROWS 2048

/* e->plans[k] for component k's order over [sqrt(A b), sqrt(A (b + q_bound))],
 * q_bound = |L^-1|_F^2 d (max|x| + max|mu|)^2 >= every row's q (at most the
 * top 30 octaves; rows outside use the fused evaluator).  Built from global
 * quantities only, so every rank builds the same; a piece's coefficients
 * depend only on the order and the piece. */
static void mx_plan(mx_ctx *e, const ghf_params *t, int k)
{
    e->use_plan[k] = 0;
    const mx_comp_der *g = &e->g[k];
    if (!e->plans || e->gauss || !(g->c.A > 0.0)) return;
    const int d = e->d;
    double mu_max = 0.0, fro = 0.0;
    for (int i = 0; i < d; i++) {
        mu_max = fmax(mu_max, fabs(t->mu[i]));
        for (int j = 0; j <= i; j++) fro += g->Linv[i * d + j] * g->Linv[i * d + j];
    }
    const double qb = fro * d * (e->xmax + mu_max) * (e->xmax + mu_max);
    const double zhi = sqrt(g->c.A * (g->c.b + qb));
    double zlo = sqrt(g->c.A * g->c.b);
    if (!(zlo > zhi * 0x1p-30)) zlo = zhi * 0x1p-30;
    if (!isfinite(zhi) || !(zhi > zlo) || !(zlo > 0x1p-1000)) return;
    ghf_bessel_plan *pl = &e->plans[k];
    if (ghf_bessel_plan_setup(pl, g->c.P, zlo, zhi) != 0) return;
    const int nn = ghf_bessel_plan_num_nodes(pl), np = ghf_bessel_plan_num_pieces(pl);
    if (e->fplans) ghf_bessel_fplan_setup(&e->fplans[k], pl);
    for (int i = 0; i < nn; i++) ghf_bessel_plan_node(pl, i);
    for (int i = 0; i < np; i++) {
        if (e->fplans) ghf_bessel_fplan_fold(&e->fplans[k], pl, i); /* reads the node values */
        ghf_bessel_plan_finish_piece(pl, i);
    }
    e->use_plan[k] = 1;
}

/* Collective E-step at m: 0, -1 (a component's Sigma is not positive
 * definite or its constants are not finite: every rank agrees, no
 * collective call; *kbad names it), or 1 (run-time error). */
static int mx_estep(mx_ctx *e, const ghf_mixture *m, double *Lscratch, int *kbad, char *err, size_t errlen)
{
    for (int k = 0; k < e->K; k++) {
        if (mx_derive(e, &m->comp[k], &e->g[k], Lscratch) != 0) {
            *kbad = k;
            return -1;
        }
        e->logpi[k] = log(m->prop[k]);
        mx_plan(e, &m->comp[k], k);
    }
    if (e->o->beat) e->o->beat(e->o->beat_arg);
    const double t0 = MPI_Wtime();
    mx_pass P = {e, m};
    const int rc = ghf_xreduce_rows(e->comm, e->x, e->nrows, e->d, e->len, mx_block, &P, e->stats);
    int stop = e->o->stop_flag ? (*e->o->stop_flag != 0) : 0, any = 0;
    MPI_Allreduce(&stop, &any, 1, MPI_INT, MPI_MAX, e->comm);
    e->stats[GHF_ST_STOP] = any;
    e->t_estep += MPI_Wtime() - t0;
    e->n_estep++;
    if (rc) {
        snprintf(err, errlen, "mixture E-step: out of memory or MPI failure");
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * The M-step
 * ------------------------------------------------------------------------- */

enum { MX_OK = 0, MX_COLLAPSE = 1, MX_BOUNDARY = 2, MX_FAILED = 3 };

/* From the statistics at cur into nx.  MX_COLLAPSE: component *kbad has
 * fewer than d + 1 effective rows or a Sigma that is not positive definite;
 * MX_BOUNDARY / MX_FAILED: a component's M-step says so (why). */
static int mx_mstep(mx_ctx *e, const ghf_mixture *cur, ghf_mixture *nx, double *Lscratch, int *kbad, char *why,
                    size_t whylen)
{
    const int d = e->d, K = e->K;
    const double ntot = e->stats[(size_t)K * e->slen + MX_W];
    for (int k = 0; k < K; k++) {
        const double *st = e->stats + (size_t)k * e->slen;
        const double nk = st[GHF_ST_N];
        if (!(nk >= d + 1)) {
            *kbad = k;
            return MX_COLLAPSE;
        }
        nx->prop[k] = nk / ntot;
        ghf_params *t = &nx->comp[k];
        char w2[256];
        if (e->gauss) {
            ghf_params_copy(t, &cur->comp[k]);
            const double *S4 = st + GHF_ST_S4, *S6 = S4 + 2 * d;
            for (int i = 0; i < d; i++) {
                t->mu[i] = S4[i] / nk;
                t->gamma[i] = 0.0;
            }
            for (int i = 0; i < d; i++)
                for (int j = 0; j <= i; j++) {
                    const double v = S6[i * d + j] / nk - t->mu[i] * t->mu[j];
                    t->sigma[i * d + j] = t->sigma[j * d + i] = v;
                }
        } else {
            const ghf_mstep_status ms = ghf_mstep(&e->model, &e->mo, st, &cur->comp[k], t, w2, sizeof w2);
            if (ms == GHF_MSTEP_FAILED) {
                snprintf(why, whylen, "failed: component %d: %s", k, w2);
                *kbad = k;
                return MX_FAILED;
            }
            if (ms != GHF_MSTEP_OK) {
                snprintf(why, whylen, "%s (component %d)", w2, k);
                *kbad = k;
                return MX_BOUNDARY;
            }
        }
        if (mx_derive(e, t, &e->g[k], Lscratch) != 0) {
            *kbad = k;
            return MX_COLLAPSE;
        }
        if (!e->gauss) {
            ghf_params_normalize(t, e->g[k].logdet);
            if (sqrt(t->a) * sqrt(t->b) > GHF_OMEGA_MAX) {
                snprintf(why, whylen, "boundary: sqrt(ab) -> infinity in component %d (the Gaussian limit: its mixing variable degenerates)", k);
                *kbad = k;
                return MX_BOUNDARY;
            }
        }
        if (!ghf_params_finite(t) && !e->gauss) {
            snprintf(why, whylen, "failed: non-finite parameters of component %d after the M-step", k);
            *kbad = k;
            return MX_FAILED;
        }
    }
    return MX_OK;
}

/* the largest relative change between two mixtures (the convergence test) */
static double mx_change(const mx_ctx *e, const ghf_mixture *a, const ghf_mixture *b)
{
    double c = 0.0;
    for (int k = 0; k < e->K; k++) {
        c = fmax(c, fabs(a->prop[k] - b->prop[k]) / b->prop[k]);
        if (e->gauss) {
            ghf_params ta = a->comp[k], tb = b->comp[k];
            ta.p = tb.p = 1.0;
            ta.a = tb.a = ta.b = tb.b = 0.0;
            c = fmax(c, ghf_param_change(&ta, &tb));
        } else {
            c = fmax(c, ghf_param_change(&a->comp[k], &b->comp[k]));
        }
    }
    return isfinite(c) ? c : INFINITY;
}

static void mx_copy(ghf_mixture *dst, const ghf_mixture *src)
{
    memcpy(dst->prop, src->prop, (size_t)src->K * sizeof(double));
    for (int k = 0; k < src->K; k++) ghf_params_copy(&dst->comp[k], &src->comp[k]);
}

/* ---------------------------------------------------------------------------
 * The start: k-means++ by an exponential race, Lloyd steps, moment starts
 * ------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* uniform in (0, 1) from (seed, draw, global row) */
static double mx_unif(uint64_t seed, uint64_t draw, int64_t row)
{
    const uint64_t h = splitmix(splitmix(seed ^ splitmix(draw)) ^ (uint64_t)row);
    return ((double)(h >> 11) + 0.5) * 0x1p-53;
}

typedef struct km_pass {
    const mx_ctx *e;
    const double *cent; /* [K*d] */
    const double *scl;  /* [d] 1 / column SD */
    int moments;        /* 0: sums w, w x; 1: also w x x' (lower) */
} km_pass;

static int km_nearest(const km_pass *P, const double *xi)
{
    const int d = P->e->d, K = P->e->K;
    int best = 0;
    double bd = INFINITY;
    for (int k = 0; k < K; k++) {
        double s = 0.0;
        for (int i = 0; i < d; i++) {
            const double t = (xi[i] - P->cent[k * d + i]) * P->scl[i];
            s += t * t;
        }
        if (s < bd) {
            bd = s;
            best = k;
        }
    }
    return best;
}

static int km_len(int d, int moments) { return 1 + d + (moments ? d * d : 0); }

static void km_block(void *ctx, const double *x, int nb, int d, double *part)
{
    const km_pass *P = ctx;
    const mx_ctx *e = P->e;
    const int64_t i0 = (int64_t)((x - e->x) / d);
    const int L = km_len(d, P->moments);
    for (int r = 0; r < nb; r++) {
        const double *xi = x + (size_t)r * d;
        const double wi = e->w ? e->w[i0 + r] : 1.0;
        if (e->w && wi == 0.0) continue;
        double *s = part + (size_t)km_nearest(P, xi) * L;
        s[0] += wi;
        for (int i = 0; i < d; i++) {
            s[1 + i] += wi * xi[i];
            if (P->moments)
                for (int j = 0; j <= i; j++) s[1 + d + i * d + j] += wi * xi[i] * xi[j];
        }
    }
}

/* Collective: K centres by k-means++ (D^2 sampling, each draw an
 * exponential race: the row with the least E_i / (w_i D_i^2), E_i ~ Exp(1)
 * from (seed, draw, global row), wins, so the choice does not depend on the
 * rank count), then up to MX_LLOYD Lloyd steps.  0, -1 (fewer than K
 * distinct rows: every rank agrees), 1 (out of memory, agreed). */
static int km_centres(mx_ctx *e, uint64_t seed, const double *scl, double *cent, char *err, size_t errlen)
{
    const int d = e->d, K = e->K;
    int64_t off = 0;
    MPI_Exscan(&e->nrows, &off, 1, MPI_INT64_T, MPI_SUM, e->comm);
    if (e->rank == 0) off = 0;
    double *D2 = malloc((size_t)(e->nrows > 0 ? e->nrows : 1) * sizeof(double));
    double *row = malloc((size_t)d * sizeof(double));
    double *sums = malloc((size_t)K * km_len(d, 0) * sizeof(double));
    int fail = !D2 || !row || !sums;
    if (ghf_any(e->comm, fail)) {
        free(D2);
        free(row);
        free(sums);
        snprintf(err, errlen, "out of memory (mixture start)");
        return 1;
    }
    for (int64_t i = 0; i < e->nrows; i++) D2[i] = INFINITY;
    int rc = 0;
    for (int c = 0; c < K && rc == 0; c++) {
        double kmin = INFINITY;
        int64_t imin = INT64_MAX;
        for (int64_t i = 0; i < e->nrows; i++) {
            const double wi = e->w ? e->w[i] : 1.0;
            const double wt = c == 0 ? wi : wi * D2[i];
            if (!(wt > 0.0)) continue;
            const double key = -log(mx_unif(seed, (uint64_t)c, off + i)) / wt;
            if (key < kmin) { /* rows in increasing order: the first of equal keys */
                kmin = key;
                imin = off + i;
            }
        }
        double gmin;
        MPI_Allreduce(&kmin, &gmin, 1, MPI_DOUBLE, MPI_MIN, e->comm);
        if (!isfinite(gmin)) {
            rc = -1;
            break;
        }
        int64_t mine = kmin == gmin ? imin : INT64_MAX, gi;
        MPI_Allreduce(&mine, &gi, 1, MPI_INT64_T, MPI_MIN, e->comm);
        for (int i = 0; i < d; i++) row[i] = 0.0;
        if (gi >= off && gi < off + e->nrows) memcpy(row, e->x + (size_t)(gi - off) * d, (size_t)d * sizeof(double));
        MPI_Allreduce(row, cent + (size_t)c * d, d, MPI_DOUBLE, MPI_SUM, e->comm); /* one non-zero term each */
        for (int64_t i = 0; i < e->nrows; i++) {
            double s = 0.0;
            for (int j = 0; j < d; j++) {
                const double t = (e->x[(size_t)i * d + j] - cent[(size_t)c * d + j]) * scl[j];
                s += t * t;
            }
            if (s < D2[i]) D2[i] = s;
        }
    }
    /* Lloyd */
    const int L = km_len(d, 0);
    for (int it = 0; it < MX_LLOYD && rc == 0; it++) {
        km_pass P = {e, cent, scl, 0};
        if (ghf_xreduce_rows(e->comm, e->x, e->nrows, d, K * L, km_block, &P, sums) != 0) {
            snprintf(err, errlen, "out of memory (mixture start)");
            rc = 1;
            break;
        }
        int moved = 0;
        for (int k = 0; k < K; k++) {
            const double *s = sums + (size_t)k * L;
            if (!(s[0] > 0.0)) continue; /* an empty cluster keeps its centre */
            for (int i = 0; i < d; i++) {
                const double v = s[1 + i] / s[0];
                if (v != cent[k * d + i]) moved = 1;
                cent[k * d + i] = v;
            }
        }
        if (!moved) break;
    }
    free(D2);
    free(row);
    free(sums);
    return rc;
}

/* The start of one initialisation into m: cluster proportions, means and
 * covariances (the data's covariance for a cluster with fewer than d + 1
 * rows or a singular one); Sigma = cov / E[Y] at the family's first start
 * subordinator, gamma = 0.  0, -1 (no K distinct rows), 1 (error). */
static int mx_start(mx_ctx *e, uint64_t seed, ghf_mixture *m, double *Lscratch, char *err, size_t errlen)
{
    const int d = e->d, K = e->K;
    const int L = km_len(d, 1);
    double *cent = malloc((size_t)K * d * sizeof(double)), *scl = malloc((size_t)d * sizeof(double));
    double *sums = malloc((size_t)K * L * sizeof(double));
    if (ghf_any(e->comm, !cent || !scl || !sums)) {
        free(cent);
        free(scl);
        free(sums);
        snprintf(err, errlen, "out of memory (mixture start)");
        return 1;
    }
    for (int i = 0; i < d; i++) {
        const double v = e->o->data_cov ? e->o->data_cov[i * d + i] : 1.0;
        scl[i] = v > 0.0 && isfinite(v) ? 1.0 / sqrt(v) : 1.0;
    }
    int rc = km_centres(e, seed, scl, cent, err, errlen);
    if (rc == 0) {
        km_pass P = {e, cent, scl, 1};
        if (ghf_xreduce_rows(e->comm, e->x, e->nrows, d, K * L, km_block, &P, sums) != 0) {
            snprintf(err, errlen, "out of memory (mixture start)");
            rc = 1;
        }
    }
    if (rc == 0) {
        double ntot = 0.0;
        for (int k = 0; k < K; k++) ntot += sums[(size_t)k * L];
        double cand[16][3] = {{0}};
        double sub[3] = {NAN, NAN, NAN}, ey = 1.0;
        if (!e->gauss) {
            ghf_model_starts(&e->model, d, 1, e->o->seed, cand);
            memcpy(sub, cand[0], sizeof sub);
            const double fp = ghf_model_fixed_p(&e->model, d);
            if (!isnan(fp)) sub[0] = fp;
            const ghf_gig_moments gm = ghf_gig_moments_eval(sub[0], sub[1], sub[2]);
            if (isfinite(gm.e_y) && gm.e_y > 0) ey = gm.e_y;
            else if (isfinite(gm.e_inv) && gm.e_inv > 0) ey = 1.0 / gm.e_inv;
        }
        for (int k = 0; k < K; k++) {
            const double *s = sums + (size_t)k * L;
            const double nk = s[0];
            ghf_params *t = &m->comp[k];
            m->prop[k] = fmax(nk, 1.0) / fmax(ntot, 1.0);
            int ok = nk >= d + 1;
            for (int i = 0; i < d; i++) {
                t->mu[i] = nk > 0.0 ? s[1 + i] / nk : cent[k * d + i];
                t->gamma[i] = 0.0;
            }
            if (ok) {
                for (int i = 0; i < d; i++)
                    for (int j = 0; j <= i; j++)
                        t->sigma[i * d + j] = t->sigma[j * d + i] = s[1 + d + i * d + j] / nk - t->mu[i] * t->mu[j];
                ok = ghf_cholesky(d, t->sigma, Lscratch) == 0;
            }
            if (!ok) memcpy(t->sigma, e->o->data_cov, (size_t)d * d * sizeof(double));
            for (int i = 0; i < d * d; i++) t->sigma[i] /= ey;
            t->p = sub[0];
            t->a = sub[1];
            t->b = sub[2];
            if (!e->gauss && mx_derive(e, t, &e->g[k], Lscratch) == 0) ghf_params_normalize(t, e->g[k].logdet);
        }
        double ps = 0.0;
        for (int k = 0; k < K; k++) ps += m->prop[k];
        for (int k = 0; k < K; k++) m->prop[k] /= ps;
    }
    free(cent);
    free(scl);
    free(sums);
    return rc;
}

/* ---------------------------------------------------------------------------
 * One start's EM, the fit
 * ------------------------------------------------------------------------- */

typedef struct mx_run {
    ghf_mixture th;      /* the parameters the run ends at */
    double ll, map_ll;
    int n_iter, outcome, collapsed, n_decrease;
    char status[320];
    double *trace;
    int n_trace;
} mx_run;

/* ---- SQUAREM (Varadhan and Roland 2008, scheme S3) over the mixture:
 * one step length for all coordinates: per component mu, gamma, Sigma
 * (lower), p, log a, log b (a face held at 0), and log pi_k. */

#define MX_SQ_MAX_STEP 64.0

static int mx_sq_len(const mx_ctx *e)
{
    const int d = e->d;
    return e->K * (1 + 2 * d + d * (d + 1) / 2 + 3);
}

static void mx_sq_pack(const mx_ctx *e, const ghf_mixture *m, double *v)
{
    const int d = e->d;
    int n = 0;
    for (int k = 0; k < e->K; k++) {
        const ghf_params *t = &m->comp[k];
        v[n++] = log(m->prop[k]);
        for (int i = 0; i < d; i++) v[n++] = t->mu[i];
        for (int i = 0; i < d; i++) v[n++] = t->gamma[i];
        for (int i = 0; i < d; i++)
            for (int j = 0; j <= i; j++) v[n++] = t->sigma[i * d + j];
        v[n++] = e->gauss ? 0.0 : t->p;
        v[n++] = !e->gauss && t->a > 0.0 ? log(t->a) : 0.0;
        v[n++] = !e->gauss && t->b > 0.0 ? log(t->b) : 0.0;
    }
}

/* theta' = t0 - 2 alpha r + alpha^2 v into out (proportions renormalised,
 * every component back in the |Sigma| = 1 gauge).  0, or -1 if unusable. */
static int mx_sq_point(mx_ctx *e, const ghf_mixture *t0, const ghf_mixture *t1, const ghf_mixture *t2, double *buf,
                       double *Lscratch, ghf_mixture *out)
{
    const int d = e->d, n = mx_sq_len(e);
    double *x0 = buf, *x1 = buf + n, *x2 = buf + 2 * n;
    for (int k = 0; k < e->K && !e->gauss; k++) /* no extrapolation across a face */
        for (int w = 0; w < 2; w++) {
            const int z = (w ? t0->comp[k].b : t0->comp[k].a) == 0.0;
            if (z != ((w ? t1->comp[k].b : t1->comp[k].a) == 0.0) || z != ((w ? t2->comp[k].b : t2->comp[k].a) == 0.0))
                return -1;
        }
    mx_sq_pack(e, t0, x0);
    mx_sq_pack(e, t1, x1);
    mx_sq_pack(e, t2, x2);
    double rr = 0.0, vv = 0.0;
    for (int i = 0; i < n; i++) {
        const double r = x1[i] - x0[i], v = x2[i] - 2.0 * x1[i] + x0[i];
        rr += r * r;
        vv += v * v;
    }
    if (!(vv > 0.0) || !isfinite(rr) || !isfinite(vv)) return -1;
    double alpha = -sqrt(rr / vv);
    if (alpha > -1.0) alpha = -1.0;
    if (alpha < -MX_SQ_MAX_STEP) alpha = -MX_SQ_MAX_STEP;
    for (int i = 0; i < n; i++) {
        const double r = x1[i] - x0[i], v = x2[i] - 2.0 * x1[i] + x0[i];
        x2[i] = x0[i] - 2.0 * alpha * r + alpha * alpha * v;
    }
    const double fp = ghf_model_fixed_p(&e->model, d);
    double lmax = -INFINITY, ps = 0.0;
    for (int k = 0; k < e->K; k++) lmax = fmax(lmax, x2[(size_t)k * (n / e->K)]);
    int q = 0;
    for (int k = 0; k < e->K; k++) {
        ghf_params *t = &out->comp[k];
        const ghf_params *c0 = &t0->comp[k];
        out->prop[k] = exp(x2[q++] - lmax);
        ps += out->prop[k];
        for (int i = 0; i < d; i++) t->mu[i] = x2[q++];
        for (int i = 0; i < d; i++) t->gamma[i] = x2[q++];
        for (int i = 0; i < d; i++)
            for (int j = 0; j <= i; j++) {
                t->sigma[i * d + j] = t->sigma[j * d + i] = x2[q];
                q++;
            }
        if (e->gauss) {
            t->p = t->a = t->b = NAN;
            q += 3;
        } else {
            t->p = isnan(fp) ? x2[q] : fp;
            t->a = c0->a == 0.0 ? 0.0 : exp(x2[q + 1]);
            t->b = c0->b == 0.0 ? 0.0 : exp(x2[q + 2]);
            q += 3;
            if (e->model.symmetric)
                for (int i = 0; i < d; i++) t->gamma[i] = 0.0;
            if (!isfinite(t->p) || fabs(t->p) > 50.0 + fabs(isnan(fp) ? 0.0 : fp) || (t->a == 0.0 && !(t->p < 0)) ||
                (t->b == 0.0 && !(t->p > 0)))
                return -1;
        }
        if (mx_derive(e, t, &e->g[k], Lscratch) != 0) return -1;
        if (!e->gauss) ghf_params_normalize(t, e->g[k].logdet);
    }
    for (int k = 0; k < e->K; k++) {
        out->prop[k] /= ps;
        if (!(out->prop[k] > 0.0) || !isfinite(out->prop[k])) return -1;
    }
    return 0;
}

/* the run ends collapsed: component k (stats of the last E-step) */
static void mx_collapsed(const mx_ctx *e, mx_run *R, int kbad, int it, int not_pd)
{
    const double nk = kbad >= 0 ? e->stats[(size_t)kbad * e->slen + GHF_ST_N] : NAN;
    if (not_pd && nk >= e->d + 1)
        snprintf(R->status, sizeof R->status,
                 "boundary: component %d collapsed onto %.1f rows at iteration %d (its Sigma is not positive definite)",
                 kbad, nk, it);
    else
        snprintf(R->status, sizeof R->status, "boundary: component %d collapsed onto %.1f rows at iteration %d", kbad,
                 nk, it);
    R->collapsed = 1;
    R->outcome = GHF_EM_BOUNDARY;
}

/* The E-step at m and its checks.  0: stats usable, ll in *ll; 2: the run
 * ended (R's status set); 1: run-time error. */
static int mx_estep_checked(mx_ctx *e, const ghf_mixture *m, double *Lscratch, mx_run *R, double *ll, char *err,
                            size_t errlen)
{
    int kbad = -1;
    const int it = R->n_trace;
    const int erc = mx_estep(e, m, Lscratch, &kbad, err, errlen);
    if (erc == 1) return 1;
    if (erc == -1) {
        snprintf(R->status, sizeof R->status,
                 "boundary: component %d collapsed (its Sigma is not positive definite) at iteration %d", kbad, it);
        R->collapsed = 1;
        R->outcome = GHF_EM_BOUNDARY;
        return 2;
    }
    if (e->stats[GHF_ST_STOP] > 0) {
        snprintf(R->status, sizeof R->status, "interrupted: stop requested (signal)");
        R->outcome = GHF_EM_INTERRUPTED;
        R->collapsed = 1;
        return 2;
    }
    const double *ex = e->stats + (size_t)e->K * e->slen;
    *ll = ex[MX_LL];
    if (ex[MX_NBAD] > 0 || !isfinite(*ll)) {
        snprintf(R->status, sizeof R->status,
                 "boundary: the mixture log-density is not finite at %.0f rows at iteration %d (a component collapses)",
                 ex[MX_NBAD], it);
        R->collapsed = 1;
        R->outcome = GHF_EM_BOUNDARY;
        return 2;
    }
    return 0;
}

/* Records the E-step just done at m (log-likelihood ll) as the next
 * iterate, then the convergence test against prev (NULL: the first) and the
 * iteration limit.  1: the run ends at m (R->th holds it). */
static int mx_record(mx_ctx *e, mx_run *R, const ghf_mixture *m, const ghf_mixture *prev, double ll)
{
    const ghf_em_opts *o = e->o;
    const int it = R->n_trace;
    const int max_iter = o->max_iter < 0 ? 0 : o->max_iter;
    R->trace[it] = ll;
    R->n_trace = it + 1;
    R->n_iter = it;
    R->ll = ll;
    R->map_ll = e->stats[(size_t)e->K * e->slen + MX_MAP];
    int done = 0;
    if (prev) {
        const double pl = R->trace[it - 1];
        if (ll < pl - 1e-12 * fabs(ll)) R->n_decrease++;
        const double dll = (ll - pl) / fabs(ll);
        if (mx_change(e, m, prev) < o->tol || (dll >= 0.0 && dll < o->tol)) {
            snprintf(R->status, sizeof R->status, "converged");
            R->outcome = GHF_EM_CONVERGED;
            done = 1;
        }
    }
    if (!done && it >= max_iter) {
        snprintf(R->status, sizeof R->status, "max_iter: %d iterations without convergence", max_iter);
        R->outcome = GHF_EM_MAX_ITER;
        done = 1;
    }
    if (done) mx_copy(&R->th, m);
    return done;
}

/* The M-step from m into nx; 0, or 2 when the run ends (at m: R->th holds it). */
static int mx_mstep_checked(mx_ctx *e, mx_run *R, const ghf_mixture *m, ghf_mixture *nx, double *Lscratch)
{
    int kbad = -1;
    char why[300];
    const double t0 = MPI_Wtime();
    const int ms = mx_mstep(e, m, nx, Lscratch, &kbad, why, sizeof why);
    e->t_mstep += MPI_Wtime() - t0;
    if (ms == MX_OK) return 0;
    const int it = R->n_trace - 1;
    if (ms == MX_COLLAPSE) {
        mx_collapsed(e, R, kbad, it, 1);
    } else {
        snprintf(R->status, sizeof R->status, "%.280s at iteration %d", why, it);
        R->outcome = ms == MX_FAILED ? GHF_EM_FAILED : GHF_EM_BOUNDARY;
        R->collapsed = ms == MX_FAILED;
    }
    mx_copy(&R->th, m);
    return 2;
}

/* EM from the start in R->th (collective), with SQUAREM unless o->accel is
 * 0: a cycle takes the plain steps theta -> theta1 -> theta2, extrapolates
 * theta' and keeps it when its log-likelihood is at least theta1's (less
 * 1e-13 relative), else goes on from theta2; the recorded iterates never
 * lose likelihood beyond that.  pool: 4 spare mixtures.  0, or 1 (run-time error). */
static int mx_em(mx_ctx *e, mx_run *R, ghf_mixture *pool, double *Lscratch, double *sqbuf, char *err, size_t errlen)
{
    R->n_decrease = 0;
    R->collapsed = 0;
    R->n_trace = 0;
    R->n_iter = 0;
    ghf_mixture *th = &pool[0], *t1 = &pool[1], *t2 = &pool[2], *tx = &pool[3], *tmp;
    mx_copy(th, &R->th);
    const ghf_mixture *prev = NULL;
    int have_stats = 0;
    double ll = NAN;
    for (;;) {
        if (!have_stats) {
            const int rc = mx_estep_checked(e, th, Lscratch, R, &ll, err, errlen);
            if (rc == 1) return 1;
            if (rc == 2) {
                mx_copy(&R->th, th);
                return 0;
            }
            if (mx_record(e, R, th, prev, ll)) return 0;
        }
        have_stats = 0;
        if (mx_mstep_checked(e, R, th, t1, Lscratch)) return 0;
        if (!e->o->accel) {
            mx_copy(tx, th); /* the previous iterate, for the change test */
            prev = tx;
            tmp = th;
            th = t1;
            t1 = tmp;
            continue;
        }
        double ll1;
        int rc = mx_estep_checked(e, t1, Lscratch, R, &ll1, err, errlen);
        if (rc == 1) return 1;
        if (rc == 2) {
            mx_copy(&R->th, t1);
            return 0;
        }
        if (mx_record(e, R, t1, th, ll1)) return 0;
        if (mx_mstep_checked(e, R, t1, t2, Lscratch)) return 0;
        /* theta' from (th, t1, t2); the E-step there (no collective when unusable: every rank agrees) */
        int kbad = -1, accepted = 0;
        double llx = NAN;
        if (mx_sq_point(e, th, t1, t2, sqbuf, Lscratch, tx) == 0) {
            const int xrc = mx_estep(e, tx, Lscratch, &kbad, err, errlen);
            if (xrc == 1) return 1;
            const double *ex = e->stats + (size_t)e->K * e->slen;
            if (xrc == 0 && e->stats[GHF_ST_STOP] == 0 && ex[MX_NBAD] == 0 && isfinite(ex[MX_LL]) &&
                ex[MX_LL] >= ll1 - GHF_LL_MARGIN * fmax(1.0, fabs(ll1))) {
                accepted = 1;
                llx = ex[MX_LL];
            }
        }
        if (accepted) {
            /* th <- theta' (its statistics are in e->stats), prev <- t1 */
            tmp = th;
            th = tx;
            tx = tmp;
            mx_copy(tx, t1);
            prev = tx;
            if (mx_record(e, R, th, prev, llx)) return 0;
            have_stats = 1;
        } else {
            /* the cycle ends at theta2: its E-step at the top */
            mx_copy(tx, t1);
            prev = tx;
            tmp = th;
            th = t2;
            t2 = tmp;
        }
    }
}

/* the mean's first coordinate of a component, for the order (mu's when it has none) */
static double mx_first_mean(const ghf_params *t, double *mean, double *cov)
{
    if (ghf_params_gaussian(t)) return t->mu[0];
    ghf_params_moments(t, mean, cov, NULL, 0);
    return isfinite(mean[0]) ? mean[0] : t->mu[0];
}

/* order the components by decreasing proportion, ties by the first
 * coordinate of the mean (ascending) */
static int mx_order(ghf_mixture *m)
{
    const int K = m->K, d = m->d;
    double *key = malloc((size_t)K * sizeof(double)), *mean = malloc((size_t)d * sizeof(double)),
           *cov = malloc((size_t)d * d * sizeof(double));
    if (!key || !mean || !cov) {
        free(key);
        free(mean);
        free(cov);
        return -1;
    }
    for (int k = 0; k < K; k++) key[k] = mx_first_mean(&m->comp[k], mean, cov);
    for (int a = 1; a < K; a++) /* insertion sort: K is small */
        for (int b = a; b > 0; b--) {
            const int swap = m->prop[b] > m->prop[b - 1] || (m->prop[b] == m->prop[b - 1] && key[b] < key[b - 1]);
            if (!swap) break;
            double tp = m->prop[b];
            m->prop[b] = m->prop[b - 1];
            m->prop[b - 1] = tp;
            tp = key[b];
            key[b] = key[b - 1];
            key[b - 1] = tp;
            ghf_params tc = m->comp[b];
            m->comp[b] = m->comp[b - 1];
            m->comp[b - 1] = tc;
        }
    free(key);
    free(mean);
    free(cov);
    return 0;
}

void ghf_em_mix_free(ghf_em_mix *mx)
{
    ghf_mixture_free(&mx->m);
    free(mx->start_ll);
    free(mx->start_iter);
    free(mx->start_conv);
    memset(mx, 0, sizeof *mx);
}

int ghf_em_fit_mixture(MPI_Comm comm, const double *x, const double *w, int64_t nrows, int d, int K,
                       const ghf_em_opts *o, ghf_em_result *r, ghf_em_mix *mx, char *err, size_t errlen)
{
    const double t_start = MPI_Wtime();
    memset(r, 0, sizeof *r);
    memset(mx, 0, sizeof *mx);
    mx_ctx e;
    memset(&e, 0, sizeof e);
    e.comm = comm;
    e.x = x;
    e.w = w;
    e.nrows = nrows;
    e.d = d;
    e.K = K;
    e.o = o;
    e.gauss = ghf_family_get(o->family)->sub == GHF_SUB_NONE;
    e.model.family = o->family;
    e.model.symmetric = o->symmetric || e.gauss;
    e.model.fix_p = o->fix_p;
    e.model.p = o->p_fixed;
    e.slen = ghf_stats_len(d);
    e.len = K * e.slen + MX_EXTRA;
    MPI_Comm_rank(comm, &e.rank);
    const int max_iter = o->max_iter < 0 ? 0 : o->max_iter;
    const int S = o->n_starts < 1 ? 1 : o->n_starts;
    const int print = !o->quiet && e.rank == 0;
    const char *lab = o->label ? o->label : "";
    mx_run R, B;
    memset(&R, 0, sizeof R);
    memset(&B, 0, sizeof B);
    ghf_mixture pool[4];
    memset(pool, 0, sizeof pool);
    double *sqbuf = NULL;
    double *Lscratch = malloc((size_t)d * d * sizeof(double));
    e.stats = calloc((size_t)e.len, sizeof(double));
    e.g = calloc((size_t)K, sizeof(mx_comp_der));
    e.logpi = calloc((size_t)K, sizeof(double));
    R.trace = calloc((size_t)max_iter + 2, sizeof(double));
    B.trace = calloc((size_t)max_iter + 2, sizeof(double));
    r->trace = calloc((size_t)max_iter + 2, sizeof(double));
    mx->start_ll = calloc((size_t)S, sizeof(double));
    mx->start_iter = calloc((size_t)S, sizeof(int));
    mx->start_conv = calloc((size_t)S, sizeof(int));
    int fail = !Lscratch || !e.stats || !e.g || !e.logpi || !R.trace || !B.trace || !r->trace || !mx->start_ll ||
               !mx->start_iter || !mx->start_conv || ghf_mixture_alloc(&R.th, K, d) || ghf_mixture_alloc(&B.th, K, d) ||
               ghf_mixture_alloc(&mx->m, K, d) || ghf_params_alloc(&r->params, d) || !o->data_cov;
    for (int i = 0; i < 4 && !fail; i++) fail = ghf_mixture_alloc(&pool[i], K, d) != 0;
    if (!fail) {
        sqbuf = malloc(3 * (size_t)mx_sq_len(&e) * sizeof(double));
        fail = !sqbuf;
    }
    for (int k = 0; k < K && !fail && e.g; k++) {
        e.g[k].Linv = malloc((size_t)d * d * sizeof(double));
        e.g[k].wv = malloc((size_t)d * sizeof(double));
        fail = !e.g[k].Linv || !e.g[k].wv;
    }
    {
        int64_t ng = nrows;
        double xm = 0.0;
        for (int64_t i = 0; i < nrows * d; i++) xm = fmax(xm, fabs(x[i]));
        MPI_Allreduce(MPI_IN_PLACE, &ng, 1, MPI_INT64_T, MPI_SUM, comm);
        MPI_Allreduce(MPI_IN_PLACE, &xm, 1, MPI_DOUBLE, MPI_MAX, comm);
        e.xmax = xm;
#ifdef GHF_BESSEL_PLAN_AVX2
        e.plan_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
        e.use_plan = calloc((size_t)K, sizeof(int));
        fail |= !e.use_plan;
        /* the block kernels up to GHF_CPU_SMALL_D (test hook GHFIT_TEST_MIXTURE_BLAS=1: the BLAS path at any d) */
        const char *tb = getenv("GHFIT_TEST_MIXTURE_BLAS");
        if (d <= GHF_CPU_SMALL_D && !(tb && !strcmp(tb, "1"))) e.kern = ghf__cpu_kernels();
        if (!fail && ng >= MX_PLAN_MIN_ROWS && !e.gauss) { /* the same choice on every rank */
            e.plans = malloc((size_t)K * sizeof *e.plans);
            e.fplans = e.kern ? malloc((size_t)K * sizeof *e.fplans) : NULL;
            fail = !e.plans || (e.kern && !e.fplans);
        }
    }
    if (fail) snprintf(err, errlen, "out of memory (mixture EM state, d = %d, K = %d)", d, K);
    if (ghf_test_fail("alloc", err, errlen)) fail = 1;
    int rc = 0;
    if (ghf_agree(comm, fail, err, errlen)) {
        rc = 1;
        goto out;
    }
    mx->n_starts = S;
    int best = -1;
    for (int s = 0; s < S && rc == 0; s++) {
        const double t0 = MPI_Wtime();
        const uint64_t seed = splitmix((uint64_t)o->seed * 0x100000001b3ULL + (uint64_t)s);
        const int src = mx_start(&e, seed, &R.th, Lscratch, err, errlen);
        if (src == 1) {
            rc = 1;
            break;
        }
        if (src == -1) {
            snprintf(R.status, sizeof R.status, "boundary: the data have fewer than %d distinct rows (no start)", K);
            R.collapsed = 1;
            R.outcome = GHF_EM_BOUNDARY;
            R.ll = NAN;
            R.n_iter = 0;
            R.n_trace = 0;
        } else {
            if (mx_em(&e, &R, pool, Lscratch, sqbuf, err, errlen) != 0) {
                rc = 1;
                break;
            }
        }
        if (R.outcome == GHF_EM_INTERRUPTED) {
            snprintf(r->status, sizeof r->status, "%s", R.status);
            r->outcome = GHF_EM_INTERRUPTED;
            r->n_iter = R.n_iter;
            goto out;
        }
        mx->start_ll[s] = R.collapsed ? NAN : R.ll;
        mx->start_iter[s] = R.n_iter;
        mx->start_conv[s] = R.outcome == GHF_EM_CONVERGED;
        if (print) {
            printf("%sstart %d/%d: loglik % .12e  %d iterations  %.3f s  %s\n", lab, s + 1, S,
                   R.collapsed ? NAN : R.ll, R.n_iter, MPI_Wtime() - t0, R.status);
            fflush(stdout);
        }
        /* the best healthy start; a collapsed one only while no healthy one exists (for its status) */
        const int better = best < 0 || (B.collapsed && !R.collapsed) ||
                           (!R.collapsed && !B.collapsed && R.ll > B.ll);
        if (better) {
            mx_run t = B;
            B = R;
            R = t;
            best = s;
        }
    }
    if (rc) goto out;
    r->n_estep = e.n_estep;
    if (B.collapsed) {
        r->outcome = GHF_EM_FAILED;
        r->n_iter = B.n_iter;
        r->loglik = NAN;
        r->n_trace = 0;
        snprintf(r->status, sizeof r->status, "failed: every start of the %d-component mixture collapsed (start %d: %.200s)",
                 K, best + 1, B.status);
        goto out;
    }
    mx_copy(&mx->m, &B.th);
    if (mx_order(&mx->m) != 0) {
        snprintf(err, errlen, "out of memory");
        rc = 1;
    }
    if (ghf_any(comm, rc)) {
        rc = 1;
        goto out;
    }
    mx->map_ll = B.map_ll;
    mx->best = best;
    ghf_params_copy(&r->params, &mx->m.comp[0]);
    r->loglik = B.ll;
    r->n_iter = B.n_iter;
    r->outcome = B.outcome;
    r->converged = B.outcome == GHF_EM_CONVERGED;
    snprintf(r->status, sizeof r->status, "%s", B.status);
    r->n_trace = B.n_trace;
    memcpy(r->trace, B.trace, (size_t)B.n_trace * sizeof(double));
    r->n_decrease = B.n_decrease;
out:
    r->t_estep = e.t_estep;
    r->t_mstep = e.t_mstep;
    r->t_total = MPI_Wtime() - t_start;
    r->t_init = r->t_total - e.t_estep - e.t_mstep;
    if (e.g)
        for (int k = 0; k < K; k++) {
            free(e.g[k].Linv);
            free(e.g[k].wv);
        }
    free(e.g);
    free(e.logpi);
    free(e.plans);
    free(e.fplans);
    free(e.use_plan);
    free(e.stats);
    free(Lscratch);
    free(R.trace);
    free(B.trace);
    ghf_mixture_free(&R.th);
    ghf_mixture_free(&B.th);
    for (int i = 0; i < 4; i++) ghf_mixture_free(&pool[i]);
    free(sqbuf);
    return rc;
}

int ghf_em_mixture_loglik(MPI_Comm comm, const double *x, int64_t nrows, const ghf_mixture *m, ghf_family family,
                          double *ll, char *err, size_t errlen)
{
    const int d = m->d, K = m->K;
    ghf_em_opts o;
    ghf_em_opts_defaults(&o);
    mx_ctx e;
    memset(&e, 0, sizeof e);
    e.comm = comm;
    e.x = x;
    e.nrows = nrows;
    e.d = d;
    e.K = K;
    e.o = &o;
    e.gauss = ghf_family_get(family)->sub == GHF_SUB_NONE;
    e.slen = ghf_stats_len(d);
    e.len = K * e.slen + MX_EXTRA;
    double *Lscratch = malloc((size_t)d * d * sizeof(double));
    e.stats = calloc((size_t)e.len, sizeof(double));
    e.g = calloc((size_t)K, sizeof(mx_comp_der));
    e.logpi = calloc((size_t)K, sizeof(double));
    e.use_plan = calloc((size_t)K, sizeof(int));
    int fail = !Lscratch || !e.stats || !e.g || !e.logpi || !e.use_plan;
    for (int k = 0; k < K && !fail; k++) {
        e.g[k].Linv = malloc((size_t)d * d * sizeof(double));
        e.g[k].wv = malloc((size_t)d * sizeof(double));
        fail = !e.g[k].Linv || !e.g[k].wv;
    }
    int rc = 0;
    if (ghf_any(comm, fail)) {
        snprintf(err, errlen, "out of memory");
        rc = 1;
    } else {
        int kbad = -1;
        rc = mx_estep(&e, m, Lscratch, &kbad, err, errlen);
        *ll = rc == 0 ? e.stats[(size_t)K * e.slen + MX_LL] : NAN;
        if (rc == 0 && e.stats[(size_t)K * e.slen + MX_NBAD] > 0) *ll = NAN;
    }
    if (e.g)
        for (int k = 0; k < K; k++) {
            free(e.g[k].Linv);
            free(e.g[k].wv);
        }
    free(e.g);
    free(e.logpi);
    free(e.use_plan);
    free(e.stats);
    free(Lscratch);
    return rc;
}
