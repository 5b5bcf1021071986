/* em_factor.c - EM for a factor-structured dispersion Sigma = B B' + D
 * (--sigma factor:R; --sigma diag is R = 0): the E-step per row in O(d R)
 * by the Woodbury identity and the matrix determinant lemma, statistics
 * that hold x x' only through products with the current B (never a d x d
 * matrix), and the AECM M-step of factor analysers under a normal
 * variance-mean mixture (docs/math.md 9). */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "agree.h"
#include "bessel.h"
#include "bessel_plan.h"
#include "em_internal.h"
#include "gig.h"
#include "mstep.h"
#include "xreduce.h"

/* Statistics (summed over rows, threads and ranks exactly, src/dist/xreduce.h):
 * GHF_ST_N .. GHF_ST_ZWABS as kernels/estep.h, then
 *   s4 [d]  sum w x          s5 [d]  sum w u x
 *   q6 [d]  sum w u x*x (the diagonal of s6)
 *   T  [d*R] sum w u x (beta x)'   with beta = B' Sigma^-1 = M^-1 B' D^-1 at
 *            the E-step's parameters (M = I + B' D^-1 B), i.e. s6 beta'. */
static int fx_len(int d, int r) { return GHF_ST_S4 + 3 * d + d * r; }

/* What one E-step needs from the parameters. */
typedef struct fx_der {
    int d, r;
    double *Dinv; /* [d] */
    double *G;    /* [r*d] B' D^-1 (row j: column j of B over D) */
    double *Lm;   /* [r*r] lower Cholesky factor of M = I + B' D^-1 B */
    double *Minv; /* [r*r] M^-1 */
    double *gw;   /* [r] Lm^-1 G gamma */
    double *Gmu;  /* [r] G mu */
    double logdet, w2;
    ghf_estep_consts c;
} fx_der;

static void fx_der_free(fx_der *g)
{
    free(g->Dinv);
    free(g->G);
    free(g->Lm);
    free(g->Minv);
    free(g->gw);
    free(g->Gmu);
    memset(g, 0, sizeof *g);
}

static int fx_der_alloc(fx_der *g, int d, int r)
{
    memset(g, 0, sizeof *g);
    g->d = d;
    g->r = r;
    const size_t rr = (size_t)(r > 0 ? r : 1);
    g->Dinv = malloc((size_t)d * sizeof(double));
    g->G = malloc(rr * (size_t)d * sizeof(double));
    g->Lm = malloc(rr * rr * sizeof(double));
    g->Minv = malloc(rr * rr * sizeof(double));
    g->gw = malloc(rr * sizeof(double));
    g->Gmu = malloc(rr * sizeof(double));
    if (!g->Dinv || !g->G || !g->Lm || !g->Minv || !g->gw || !g->Gmu) {
        fx_der_free(g);
        return -1;
    }
    return 0;
}

/* forward substitution L z = c (L lower, r x r) */
static void fx_lsolve(int r, const double *L, const double *c, double *z)
{
    for (int i = 0; i < r; i++) {
        double s = c[i];
        for (int k = 0; k < i; k++) s -= L[i * r + k] * z[k];
        z[i] = s / L[i * r + i];
    }
}

/* The E-step's quantities at t; gauss: no subordinator constants.  0, or -1
 * if D is not positive, M not positive definite or a constant not finite. */
static int fx_derive(const ghf_params *t, int gauss, fx_der *g)
{
    const int d = g->d, r = g->r;
    double ld = 0.0, gdg = 0.0;
    for (int i = 0; i < d; i++) {
        if (!(t->D[i] > 0.0) || !isfinite(t->D[i])) return -1;
        g->Dinv[i] = 1.0 / t->D[i];
        ld += log(t->D[i]);
        gdg += t->gamma[i] * t->gamma[i] * g->Dinv[i];
    }
    double w2 = gdg;
    if (r > 0) {
        for (int j = 0; j < r; j++)
            for (int i = 0; i < d; i++) g->G[j * d + i] = t->B[i * r + j] * g->Dinv[i];
        double *M = g->Minv; /* scratch: M, then its inverse */
        for (int a = 0; a < r; a++)
            for (int b = 0; b <= a; b++) {
                double s = a == b ? 1.0 : 0.0;
                for (int i = 0; i < d; i++) s += g->G[a * d + i] * t->B[i * r + b];
                M[a * r + b] = M[b * r + a] = s;
            }
        if (ghf_cholesky(r, M, g->Lm) != 0) return -1;
        for (int a = 0; a < r; a++) ld += 2.0 * log(g->Lm[a * r + a]);
        /* M^-1 = Lm^-T Lm^-1, column by column */
        double *e = malloc(2 * (size_t)r * sizeof(double));
        if (!e) return -1;
        for (int c = 0; c < r; c++) {
            for (int a = 0; a < r; a++) e[a] = a == c ? 1.0 : 0.0;
            fx_lsolve(r, g->Lm, e, e + r);
            for (int a = r - 1; a >= 0; a--) { /* Lm^T y = z */
                double s = e[r + a];
                for (int k = a + 1; k < r; k++) s -= g->Lm[k * r + a] * e[k];
                e[a] = s / g->Lm[a * r + a];
            }
            for (int a = 0; a < r; a++) g->Minv[a * r + c] = e[a];
        }
        free(e);
        double gg[r > 0 ? r : 1];
        for (int j = 0; j < r; j++) {
            double s = 0.0, sm = 0.0;
            for (int i = 0; i < d; i++) {
                s += g->G[j * d + i] * t->gamma[i];
                sm += g->G[j * d + i] * t->mu[i];
            }
            gg[j] = s;
            g->Gmu[j] = sm;
        }
        fx_lsolve(r, g->Lm, gg, g->gw);
        for (int j = 0; j < r; j++) w2 -= g->gw[j] * g->gw[j];
        if (w2 < 0.0) w2 = 0.0;
    }
    g->logdet = ld;
    g->w2 = w2;
    if (!isfinite(ld)) return -1;
    if (gauss) return 0;
    return ghf_estep_consts_fill(t, d, ld, w2, &g->c);
}

typedef struct fx_pass {
    const fx_der *g;
    const ghf_params *t;
    const double *x0, *w;
    int gauss;
    const ghf_bessel_plan *plan; /* the iteration's fixed-order plan, or NULL: the fused evaluator */
} fx_pass;

/* One block's partial sums (ghf_xreduce_rows): O(d R) per row, the two
 * d x R products of the block by BLAS (C = X G', T += X' H). */
static void fx_block(void *ctx, const double *x, int nb, int d, double *part)
{
    const fx_pass *P = ctx;
    const fx_der *g = P->g;
    const ghf_params *t = P->t;
    const int r = g->r;
    const int64_t i0 = (int64_t)((x - P->x0) / d);
    double zc[r > 0 ? r : 1];
    double *s4 = part + GHF_ST_S4, *s5 = s4 + d, *q6 = s5 + d, *T = q6 + d;
    double *C = NULL, *Hw = NULL;
    if (r > 0) {
        C = malloc(2 * (size_t)nb * r * sizeof(double));
        if (!C) { /* counted as rows without a finite result: the fit stops there */
            part[GHF_ST_NBAD] += nb;
            return;
        }
        Hw = C + (size_t)nb * r;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb, r, d, 1.0, x, d, g->G, d, 0.0, C, r);
    }
    for (int k = 0; k < nb; k++) {
        const double *xi = x + (size_t)k * d;
        double *hk = Hw ? Hw + (size_t)k * r : NULL;
        for (int j = 0; j < r; j++) hk[j] = 0.0;
        const double wi = P->w ? P->w[i0 + k] : 1.0;
        if (P->w && wi == 0.0) continue; /* a row of weight 0 adds exact zeros */
        double qd = 0.0, zd = 0.0;
        for (int m = 0; m < d; m++) {
            const double tm = (xi[m] - t->mu[m]) * g->Dinv[m];
            qd += tm * (xi[m] - t->mu[m]);
            zd += tm * t->gamma[m];
        }
        double q = qd, zw = zd;
        if (r > 0) {
            double *ck = C + (size_t)k * r;
            for (int j = 0; j < r; j++) ck[j] -= g->Gmu[j]; /* c = G (x - mu) */
            fx_lsolve(r, g->Lm, ck, zc);
            for (int j = 0; j < r; j++) {
                q -= zc[j] * zc[j];
                zw -= zc[j] * g->gw[j];
            }
            if (q < 0.0) q = 0.0; /* rounding: q = (x-mu)' Sigma^-1 (x-mu) >= 0 */
        }
        ghf_point pt;
        if (P->gauss) {
            pt.u = pt.v = 1.0;
            pt.l = 0.0;
            pt.ll = -0.5 * (d * GHF_LOG_2PI + g->logdet + q);
        } else {
            const double z = ghf_estep_arg(&g->c, q);
            pt = ghf_estep_point(&g->c, q, zw, P->plan ? ghf_bessel_plan_eval(P->plan, z) : ghf_bessel_fused(g->c.P, z));
        }
        if (!isfinite(pt.u) || !isfinite(pt.v) || !isfinite(pt.l) || !isfinite(pt.ll)) {
            part[GHF_ST_NBAD] += 1.0;
            continue;
        }
        const double wu = wi * pt.u;
        part[GHF_ST_N] += wi;
        part[GHF_ST_S1] += wu;
        part[GHF_ST_S2] += wi * pt.v;
        part[GHF_ST_S3] += wi * pt.l;
        part[GHF_ST_LL] += wi * pt.ll;
        part[GHF_ST_ZWABS] += wi * fabs(zw);
        /* h = w u beta x = w u M^-1 G x = w u M^-1 (c + G mu) */
        const double *ck = C ? C + (size_t)k * r : NULL;
        for (int j = 0; j < r; j++) {
            double sj = 0.0;
            for (int a = 0; a < r; a++) sj += g->Minv[j * r + a] * (ck[a] + g->Gmu[a]);
            hk[j] = wu * sj;
        }
        for (int m = 0; m < d; m++) {
            const double xm = xi[m];
            s4[m] += wi * xm;
            s5[m] += wu * xm;
            q6[m] += wu * xm * xm;
        }
    }
    if (r > 0) cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, r, nb, 1.0, x, d, Hw, r, 1.0, T, r);
    free(C);
}

/* ---------------------------------------------------------------------------
 * One fit
 * ------------------------------------------------------------------------- */

typedef struct fx_ctx {
    MPI_Comm comm;
    const double *x, *w;
    int64_t nrows;
    int d, r, gauss, rank;
    const ghf_em_opts *o;
    ghf_model model;
    ghf_mstep_opts mo;
    int len;
    double *stats, *stats1;
    fx_der g;
    double t_estep;
    int n_estep;
    /* the Bessel plan (kernels/bessel_plan.h) when the fit has enough rows;
     * its range from global quantities only, so every rank builds the same */
    ghf_bessel_plan *plan;
    double xmax; /* the largest |x| over all ranks */
    /* --missing em: Bessel plans of the incomplete rows, one per number of
     * observed coordinates |O| (posterior order p - |O|/2) that enough rows
     * share (over all ranks: every rank builds the same) */
    int *mslot;             /* [d + 1] the plan of |O|, -1: none */
    int64_t *mrows;         /* [d + 1] rows with |O| observed coordinates, all ranks */
    ghf_bessel_plan *mplan; /* [number of slots] */
    int *muse;              /* [d + 1] built for this E-step */
    double xmax_miss;       /* the largest |x_O| of the incomplete rows, all ranks */
} fx_ctx;

/* rows above which the E-step evaluates the Bessel functions through a plan */
#define FX_PLAN_MIN_ROWS 2048

/* Collective: the plans' slots of the incomplete rows (e->mslot, mrows,
 * mplan, muse) from their numbers of observed coordinates and largest
 * |x_O| over all ranks (an order gets a slot with at least 64 rows).  0, or
 * -1 out of memory (on every rank for the slots; the plans' block: this
 * rank, the caller agrees). */
static int fx_miss_plans_alloc(fx_ctx *e)
{
    const int d = e->d, npat = ghf_missing_npat(e->o->missing);
    e->mslot = malloc((size_t)(d + 1) * sizeof(int));
    e->muse = calloc((size_t)(d + 1), sizeof(int));
    e->mrows = calloc((size_t)(d + 1), sizeof(int64_t));
    double xm = 0.0;
    for (int k = 0; e->mrows && k < npat; k++) {
        const double *x, *w;
        int64_t cnt;
        int no, nm;
        const int *io, *im;
        ghf_missing_pattern(e->o->missing, k, &x, &w, &cnt, &no, &io, &nm, &im);
        e->mrows[no] += cnt;
        for (int64_t i = 0; i < cnt; i++)
            for (int a = 0; a < no; a++) xm = fmax(xm, fabs(x[(size_t)i * d + io[a]]));
    }
    if (ghf_any(e->comm, !e->mslot || !e->muse || !e->mrows)) return -1; /* every rank: no plans */
    MPI_Allreduce(MPI_IN_PLACE, e->mrows, d + 1, MPI_INT64_T, MPI_SUM, e->comm);
    MPI_Allreduce(MPI_IN_PLACE, &xm, 1, MPI_DOUBLE, MPI_MAX, e->comm);
    e->xmax_miss = xm;
    int ns = 0;
    for (int o = 0; o <= d; o++) e->mslot[o] = o > 0 && e->mrows[o] >= 64 ? ns++ : -1;
    e->mplan = malloc((size_t)(ns > 0 ? ns : 1) * sizeof(ghf_bessel_plan));
    return e->mplan ? 0 : -1;
}

/* e->plan for t's order over [sqrt(A b), sqrt(A (b + q_bound))], q_bound =
 * (max|x| + max|mu|)^2 sum 1/D_j >= every row's q (at most the top 30
 * octaves: rows below use the fused evaluator, as outside the plan). 1 if built. */
static int fx_plan(fx_ctx *e, const ghf_params *t)
{
    if (!e->plan || e->gauss || !(e->g.c.A > 0.0)) return 0;
    double mu_max = 0.0, sdi = 0.0;
    for (int i = 0; i < e->d; i++) {
        mu_max = fmax(mu_max, fabs(t->mu[i]));
        sdi += e->g.Dinv[i];
    }
    const double qb = (e->xmax + mu_max) * (e->xmax + mu_max) * sdi;
    const double zhi = sqrt(e->g.c.A * (e->g.c.b + qb));
    double zlo = sqrt(e->g.c.A * e->g.c.b);
    if (!(zlo > zhi * 0x1p-30)) zlo = zhi * 0x1p-30;
    if (!isfinite(zhi) || !(zhi > zlo) || !(zlo > 0x1p-1000)) return 0;
    ghf_bessel_plan_build(e->plan, e->g.c.P, zlo, zhi);
    return 1;
}

/* ---------------------------------------------------------------------------
 * Rows with missing coordinates (--missing em; docs/math.md 9.4)
 * ------------------------------------------------------------------------- */

/* The inverse of an r x r matrix from its lower Cholesky factor L into Mi */
static void fx_chol_inverse(int r, const double *L, double *Mi)
{
    double e[2 * (r > 0 ? r : 1)];
    for (int c = 0; c < r; c++) {
        for (int a = 0; a < r; a++) e[a] = a == c ? 1.0 : 0.0;
        fx_lsolve(r, L, e, e + r);
        for (int a = r - 1; a >= 0; a--) {
            double s = e[r + a];
            for (int k = a + 1; k < r; k++) s -= L[k * r + a] * e[k];
            e[a] = s / L[a * r + a];
        }
        for (int a = 0; a < r; a++) Mi[a * r + c] = e[a];
    }
}

/* rows of one pattern per work unit: its partial sums (row order) are added exactly */
#define FX_MISS_CHUNK 256
/* doubles of a unit's scratch: Xh [chunk][d], Hw [chunk][r], G_O [r][d], sum w xh [d] */
#define FX_MISS_SCRATCH(d, r) ((size_t)FX_MISS_CHUNK * ((d) + ((r) > 0 ? (r) : 1)) + (size_t)(d) * ((r) > 0 ? (r) : 1) + (size_t)(d))

/* One work unit: nb rows of one pattern (observed io[no], missing im[nm];
 * weights wt or NULL) at t, into acc[len] (zeroed by the caller).  With O
 * the observed, M the missing coordinates: Sigma_OO = B_O B_O' + D_O, M_O =
 * I + B_O' D_O^-1 B_O, and given Y = y and x_O, X_M ~ N(xh_M + e y, y C) with
 * xh_M = mu_M + B_M M_O^-1 G_O (x_O - mu_O), e = gamma_M - B_M M_O^-1 G_O
 * gamma_O, C = B_M M_O^-1 B_M' + D_M (math.md 9.4).  acc may hold other
 * units' sums (a batch): the unit reads none of it.  sc: scratch [d]. */
static void fx_miss_unit(const fx_ctx *e, const ghf_params *t, double lognorm, const ghf_bessel_plan *plan, const double *xs,
                         const double *wt, int nb, int no, const int *io, int nm, const int *im, double *acc, double *sc)
{
    const fx_der *g = &e->g;
    const int d = e->d, r = e->r;
    const int rr = r > 0 ? r : 1;
    double MO[rr * rr], LO[rr * rr], MiO[rr * rr], ggO[rr], gwO[rr], hO[rr], be[rr], W[rr * rr], P[rr * rr];
    double zc[rr], cO[rr], f[rr], gx[rr], swbx[rr];
    /* the pattern's marginal law */
    double ld = 0.0, w2 = 0.0;
    for (int a = 0; a < no; a++) {
        const int j = io[a];
        ld += log(t->D[j]);
        w2 += t->gamma[j] * t->gamma[j] * g->Dinv[j];
    }
    for (int a = 0; a < r; a++)
        for (int b = 0; b <= a; b++) {
            double v = a == b ? 1.0 : 0.0;
            for (int q = 0; q < no; q++) v += g->G[a * d + io[q]] * t->B[io[q] * r + b];
            MO[a * r + b] = MO[b * r + a] = v;
        }
    if (r > 0 && ghf_cholesky(r, MO, LO) != 0) {
        acc[GHF_ST_NBAD] += nb;
        return;
    }
    for (int a = 0; a < r; a++) ld += 2.0 * log(LO[a * r + a]);
    fx_chol_inverse(r, LO, MiO);
    for (int a = 0; a < r; a++) {
        double v = 0.0;
        for (int q = 0; q < no; q++) v += g->G[a * d + io[q]] * t->gamma[io[q]];
        ggO[a] = v;
    }
    fx_lsolve(r, LO, ggO, gwO);
    for (int a = 0; a < r; a++) w2 -= gwO[a] * gwO[a];
    if (w2 < 0.0) w2 = 0.0;
    /* the constants of ghf_estep_consts_fill at dimension |O|, with the
     * prior's log-normaliser of the E-step (lognorm: one evaluation per E-step) */
    ghf_estep_consts cst = g->c;
    if (!e->gauss) {
        cst.P = t->p - 0.5 * no;
        cst.A = t->a + w2;
        cst.log_A = log(cst.A);
        cst.w2 = w2;
        cst.ll_const = -0.5 * no * GHF_LOG_2PI - 0.5 * ld - lognorm + GHF_LN2;
        if (!isfinite(cst.ll_const) || !(cst.A >= 0.0) || (cst.A == 0.0 && !(t->a == 0.0 && cst.P < 0.0)) ||
            (cst.A > 0.0 && !isfinite(cst.log_A))) {
            acc[GHF_ST_NBAD] += nb;
            return;
        }
    }
    /* hO = M_O^-1 G_O gamma_O; e (in xh's missing slots, used below), beta e^ */
    for (int a = 0; a < r; a++) {
        double v = 0.0;
        for (int b = 0; b < r; b++) v += MiO[a * r + b] * ggO[b];
        hO[a] = v;
    }
    double ev[nm > 0 ? nm : 1], dC[nm > 0 ? nm : 1];
    for (int m = 0; m < nm; m++) {
        const int j = im[m];
        double v = t->gamma[j];
        for (int a = 0; a < r; a++) v -= t->B[j * r + a] * hO[a];
        ev[m] = v;
        double c = t->D[j]; /* diag C = B_j M_O^-1 B_j' + D_j */
        for (int a = 0; a < r; a++)
            for (int b = 0; b < r; b++) c += t->B[j * r + a] * MiO[a * r + b] * t->B[j * r + b];
        dC[m] = c;
    }
    /* beta = M^-1 G (the full E-step's); beta e^ = M^-1 G_M e; W = sum_{j in M} B_j' (beta_j)' */
    for (int a = 0; a < r; a++) {
        double v = 0.0;
        for (int m = 0; m < nm; m++) v += g->G[a * d + im[m]] * ev[m];
        gx[a] = v;
    }
    for (int a = 0; a < r; a++) {
        double v = 0.0;
        for (int b = 0; b < r; b++) v += g->Minv[a * r + b] * gx[b];
        be[a] = v;
    }
    double *bM = malloc((size_t)(nm > 0 ? nm : 1) * rr * sizeof(double)); /* beta's missing columns, [nm][r] */
    if (!bM) {
        acc[GHF_ST_NBAD] += nb;
        return;
    }
    for (int m = 0; m < nm; m++)
        for (int a = 0; a < r; a++) {
            double v = 0.0;
            for (int b = 0; b < r; b++) v += g->Minv[a * r + b] * g->G[b * d + im[m]];
            bM[m * r + a] = v;
        }
    for (int a = 0; a < r; a++)
        for (int b = 0; b < r; b++) {
            double v = 0.0;
            for (int m = 0; m < nm; m++) v += t->B[im[m] * r + a] * bM[m * r + b];
            W[a * r + b] = v;
        }
    for (int a = 0; a < r; a++) /* P = M_O^-1 W */
        for (int b = 0; b < r; b++) {
            double v = 0.0;
            for (int c = 0; c < r; c++) v += MiO[a * r + c] * W[c * r + b];
            P[a * r + b] = v;
        }
    /* per pattern: G_O gathered (GO [r][no]), G mu, G_M B_M (so that G xh =
     * c_O + G mu + G_M B_M f costs O(R^2) per row) */
    double *GO = sc + (size_t)FX_MISS_CHUNK * (d + rr), gmu[rr], GMB[rr * rr];
    for (int a = 0; a < r; a++) {
        double v = 0.0;
        for (int q = 0; q < no; q++) GO[a * no + q] = g->G[a * d + io[q]];
        for (int j = 0; j < d; j++) v += g->G[a * d + j] * t->mu[j];
        gmu[a] = v;
        for (int b = 0; b < r; b++) {
            double u = 0.0;
            for (int m = 0; m < nm; m++) u += g->G[a * d + im[m]] * t->B[im[m] * r + b];
            GMB[a * r + b] = u;
        }
    }
    /* the rows: q, zw, the moments, the completed rows Xh [nb][d] and
     * Hw [nb][r] = w u beta xh (T += Xh' Hw by BLAS after the loop) */
    double *Xh = sc, *Hw = sc + (size_t)FX_MISS_CHUNK * d, *sxh = GO + (size_t)d * rr; /* sxh: sum w xh */
    double *s4 = acc + GHF_ST_S4, *s5 = s4 + d, *q6 = s5 + d, *T = q6 + d;
    memset(sxh, 0, (size_t)d * sizeof(double));
    double sw = 0.0, swv = 0.0, tO[no > 0 ? no : 1];
    for (int a = 0; a < r; a++) swbx[a] = 0.0;
    for (int i = 0; i < nb; i++) {
        const double *xi = xs + (size_t)i * d;
        double *xh = Xh + (size_t)i * d, *hw = Hw + (size_t)i * rr;
        const double wi = wt ? wt[i] : 1.0;
        for (int a = 0; a < r; a++) hw[a] = 0.0;
        if (wt && wi == 0.0) { /* a row of weight 0 adds exact zeros */
            memset(xh, 0, (size_t)d * sizeof(double));
            continue;
        }
        double qd = 0.0, zd = 0.0;
        for (int a = 0; a < no; a++) {
            const int j = io[a];
            tO[a] = xi[j] - t->mu[j];
            const double tj = tO[a] * g->Dinv[j];
            qd += tj * tO[a];
            zd += tj * t->gamma[j];
        }
        for (int a = 0; a < r; a++) {
            const double *ga = GO + (size_t)a * no;
            double v = 0.0;
            for (int q = 0; q < no; q++) v += ga[q] * tO[q];
            cO[a] = v;
        }
        fx_lsolve(r, LO, cO, zc);
        double q = qd, zw = zd;
        for (int a = 0; a < r; a++) {
            q -= zc[a] * zc[a];
            zw -= zc[a] * gwO[a];
        }
        if (q < 0.0) q = 0.0;
        ghf_point pt;
        if (e->gauss) {
            pt.u = pt.v = 1.0;
            pt.l = 0.0;
            pt.ll = -0.5 * (no * GHF_LOG_2PI + ld + q);
        } else {
            const double z = ghf_estep_arg(&cst, q);
            pt = ghf_estep_point(&cst, q, zw, plan ? ghf_bessel_plan_eval(plan, z) : ghf_bessel_fused(cst.P, z));
        }
        if (!isfinite(pt.u) || !isfinite(pt.v) || !isfinite(pt.l) || !isfinite(pt.ll)) {
            acc[GHF_ST_NBAD] += 1.0;
            memset(xh, 0, (size_t)d * sizeof(double));
            continue;
        }
        const double wu = wi * pt.u;
        acc[GHF_ST_N] += wi;
        acc[GHF_ST_S1] += wu;
        acc[GHF_ST_S2] += wi * pt.v;
        acc[GHF_ST_S3] += wi * pt.l;
        acc[GHF_ST_LL] += wi * pt.ll;
        acc[GHF_ST_ZWABS] += wi * fabs(zw);
        sw += wi;
        swv += wi * pt.v;
        /* f = M_O^-1 c_O; xh = (x_O, mu_M + B_M f) */
        for (int a = 0; a < r; a++) {
            double v = 0.0;
            for (int b = 0; b < r; b++) v += MiO[a * r + b] * cO[b];
            f[a] = v;
        }
        for (int a = 0; a < no; a++) xh[io[a]] = xi[io[a]];
        for (int m = 0; m < nm; m++) {
            const int j = im[m];
            double v = t->mu[j];
            for (int a = 0; a < r; a++) v += t->B[j * r + a] * f[a];
            xh[j] = v;
        }
        /* beta xh = M^-1 G xh, G xh = c_O + G mu + G_M B_M f */
        for (int a = 0; a < r; a++) {
            double v = cO[a] + gmu[a];
            for (int b = 0; b < r; b++) v += GMB[a * r + b] * f[b];
            gx[a] = v;
        }
        for (int a = 0; a < r; a++) {
            double v = 0.0;
            for (int b = 0; b < r; b++) v += g->Minv[a * r + b] * gx[b];
            swbx[a] += wi * v;
            hw[a] = wu * v;
        }
        for (int j = 0; j < d; j++) {
            const double xj = xh[j];
            sxh[j] += wi * xj;
            s5[j] += wu * xj;
            q6[j] += wu * xj * xj;
        }
    }
    if (r > 0 && nb > 0) cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, r, nb, 1.0, Xh, d, Hw, rr, 1.0, T, r);
    /* the terms in e and C, once per unit from its sums (sum w xh = sxh):
     *   s4 += e^ sum w v,  s5 += e^ sum w,  q6 += 2 e^ o sum w xh + e^2 sum w v + diag(C) sum w,
     *   T += (sum w xh) (beta e^)' + e^ (sum w beta xh)' + e^ (beta e^)' sum w v + (C beta_M') sum w */
    for (int j = 0; j < d; j++) {
        double *Tj = T + (size_t)j * r;
        for (int a = 0; a < r; a++) Tj[a] += sxh[j] * be[a];
    }
    for (int m = 0; m < nm; m++) {
        const int j = im[m];
        const double ej = ev[m];
        q6[j] += 2.0 * ej * sxh[j] + ej * ej * swv + dC[m] * sw;
        s5[j] += ej * sw;
        double *Tj = T + (size_t)j * r;
        for (int a = 0; a < r; a++) {
            double cb = t->D[j] * bM[m * r + a]; /* (C beta_M')_j = B_j P + D_j beta_j' */
            for (int b = 0; b < r; b++) cb += t->B[j * r + b] * P[b * r + a];
            Tj[a] += ej * swbx[a] + ej * be[a] * swv + cb * sw;
        }
    }
    for (int j = 0; j < d; j++) s4[j] += sxh[j];
    for (int m = 0; m < nm; m++) s4[im[m]] += ev[m] * swv;
    free(bM);
}

/* The plans of the incomplete rows' orders for this E-step (e->muse), over
 * a range every pattern's rows lie in: A_O = a + w2_O is in [a, a + w2]
 * (the marginal's gamma_O' Sigma_OO^-1 gamma_O <= gamma' Sigma^-1 gamma)
 * and q_O <= t_O' D_O^-1 t_O <= (max|x| + max|mu|)^2 sum 1/D_j; from global
 * quantities only (the same plans on every rank).  As the full form's
 * (em_missing.c): where at least 4 rows per node share the order. */
static void fx_miss_plans(fx_ctx *e, const ghf_params *t, int nt)
{
    const int d = e->d;
    if (!e->mplan) return;
    for (int o = 0; o <= d; o++) e->muse[o] = 0;
    if (!(e->g.c.A > 0.0) || !(t->a >= 0.0)) return; /* no Bessel function (the symmetric t) */
    double mu_max = 0.0, sdi = 0.0;
    for (int i = 0; i < d; i++) {
        mu_max = fmax(mu_max, fabs(t->mu[i]));
        sdi += e->g.Dinv[i];
    }
    const double xm = fmax(e->xmax, e->xmax_miss);
    const double zhi = sqrt(e->g.c.A * (t->b + (xm + mu_max) * (xm + mu_max) * sdi));
    double zlo = sqrt(t->a * t->b);
    if (!(zlo > zhi * 0x1p-30)) zlo = zhi * 0x1p-30;
    if (!isfinite(zhi) || !(zhi > zlo) || !(zlo > 0x1p-1000)) return;
    for (int o = 1; o <= d; o++) {
        if (e->mslot[o] < 0) continue;
        ghf_bessel_plan *pl = &e->mplan[e->mslot[o]];
        if (ghf_bessel_plan_setup(pl, t->p - 0.5 * o, zlo, zhi) != 0) continue;
        const int nn = ghf_bessel_plan_num_nodes(pl), np = ghf_bessel_plan_num_pieces(pl);
        if ((int64_t)nn * 4 > e->mrows[o]) continue;
#pragma omp parallel num_threads(nt)
        {
#pragma omp for schedule(dynamic, 4)
            for (int i = 0; i < nn; i++) ghf_bessel_plan_node(pl, i);
#pragma omp for schedule(static)
            for (int i = 0; i < np; i++) ghf_bessel_plan_finish_piece(pl, i);
        }
        e->muse[o] = 1;
    }
}

/* Collective: the statistics of the rows with missing coordinates at t
 * (e->g holds the E-step's quantities at t), added to e->stats; weighted by
 * the rows' weights when weighted is set.  0, or 1 (out of memory or MPI
 * failure, agreed). */
static int fx_missing_estep(fx_ctx *e, const ghf_params *t, int weighted)
{
    const ghf_missing *m = e->o->missing;
    const int d = e->d, len = e->len, npat = ghf_missing_npat(m);
    /* work units (pattern, first row: up to FX_MISS_CHUNK rows of one
     * pattern), grouped in batches of consecutive units of at least
     * FX_MISS_CHUNK rows (many patterns hold a few rows): one batch is one
     * thread's sums in unit order, added exactly once, so the result does not
     * depend on the number of threads */
    int64_t nu = 0;
    for (int k = 0; k < npat; k++) {
        const double *x, *w;
        int64_t cnt;
        int no, nm;
        const int *io, *im;
        ghf_missing_pattern(m, k, &x, &w, &cnt, &no, &io, &nm, &im);
        nu += (cnt + FX_MISS_CHUNK - 1) / FX_MISS_CHUNK;
    }
    const int nt = omp_get_max_threads() > 0 ? omp_get_max_threads() : 1;
    int64_t *unit = malloc((size_t)(nu > 0 ? nu : 1) * 2 * sizeof(int64_t));
    int64_t *batch = malloc((size_t)(nu + 1) * sizeof(int64_t));
    ghf_xsum *xs = malloc((size_t)nt * len * sizeof(ghf_xsum));
    const size_t tl = (size_t)len + FX_MISS_SCRATCH(d, e->r);
    double *acc = malloc((size_t)nt * tl * sizeof(double));
    int fail = !unit || !batch || !xs || !acc;
    if (ghf_any(e->comm, fail)) {
        free(unit), free(batch), free(xs), free(acc);
        return 1;
    }
    nu = 0;
    int64_t nbatch = 0, rows = 0;
    for (int k = 0; k < npat; k++) {
        const double *x, *w;
        int64_t cnt;
        int no, nm;
        const int *io, *im;
        ghf_missing_pattern(m, k, &x, &w, &cnt, &no, &io, &nm, &im);
        for (int64_t r0 = 0; r0 < cnt; r0 += FX_MISS_CHUNK, nu++) {
            if (rows == 0) batch[nbatch++] = nu;
            unit[2 * nu] = k;
            unit[2 * nu + 1] = r0;
            rows += cnt - r0 < FX_MISS_CHUNK ? cnt - r0 : FX_MISS_CHUNK;
            if (rows >= FX_MISS_CHUNK) rows = 0;
        }
    }
    batch[nbatch] = nu;
    fx_miss_plans(e, t, nt);
    const double lognorm = e->gauss ? 0.0 : ghf_gig_log_norm_s(t->p, t->a, t->b);
    for (int i = 0; i < nt * len; i++) ghf_xsum_init(&xs[i]);
#pragma omp parallel num_threads(nt)
    {
        const int tid = omp_get_thread_num();
        double *a = acc + (size_t)tid * tl;
        ghf_xsum *ts = xs + (size_t)tid * len;
#pragma omp for schedule(dynamic, 1)
        for (int64_t b = 0; b < nbatch; b++) {
            memset(a, 0, (size_t)len * sizeof(double));
            for (int64_t q = batch[b]; q < batch[b + 1]; q++) {
                const double *x, *w;
                int64_t cnt;
                int no, nm;
                const int *io, *im;
                ghf_missing_pattern(m, (int)unit[2 * q], &x, &w, &cnt, &no, &io, &nm, &im);
                const int64_t r0 = unit[2 * q + 1];
                const int nb = (int)(cnt - r0 < FX_MISS_CHUNK ? cnt - r0 : FX_MISS_CHUNK);
                    const ghf_bessel_plan *pl = e->muse && e->muse[no] ? &e->mplan[e->mslot[no]] : NULL;
                fx_miss_unit(e, t, lognorm, pl, x + (size_t)r0 * d, weighted && w ? w + r0 : NULL, nb, no, io, nm, im, a,
                             a + len);
            }
            for (int i = 0; i < len; i++) ghf_xsum_add(&ts[i], a[i]);
        }
    }
    for (int th = 1; th < nt; th++)
        for (int i = 0; i < len; i++) ghf_xsum_merge(&xs[i], &xs[(size_t)th * len + i]);
    const int rc = ghf_xsum_allreduce(e->comm, xs, len);
    for (int i = 0; i < len; i++)
        if (i != GHF_ST_STOP) e->stats[i] += ghf_xsum_value(&xs[i]);
    free(unit), free(batch), free(xs), free(acc);
    return rc ? 1 : 0;
}

/* Collective E-step at t: 0, -1 (t unusable: every rank agrees, no
 * collective call), or 1 (run-time error). */
static int fx_estep(fx_ctx *e, const ghf_params *t, char *err, size_t errlen)
{
    if (fx_derive(t, e->gauss, &e->g) != 0) return -1;
    if (e->o->beat) e->o->beat(e->o->beat_arg);
    const double t0 = MPI_Wtime();
    fx_pass P = {&e->g, t, e->x, e->w, e->gauss, NULL};
    if (fx_plan(e, t)) P.plan = e->plan;
    int rc = ghf_xreduce_rows(e->comm, e->x, e->nrows, e->d, e->len, fx_block, &P, e->stats);
    if (!rc && e->o->has_missing) rc = fx_missing_estep(e, t, e->w != NULL);
    int stop = e->o->stop_flag ? (*e->o->stop_flag != 0) : 0, any = 0;
    MPI_Allreduce(&stop, &any, 1, MPI_INT, MPI_MAX, e->comm);
    e->stats[GHF_ST_STOP] = any;
    e->t_estep += MPI_Wtime() - t0;
    e->n_estep++;
    if (rc) {
        snprintf(err, errlen, "factor E-step: out of memory or MPI failure");
        return 1;
    }
    return 0;
}

static int fx_ok(const fx_ctx *e) { return e->stats[GHF_ST_NBAD] == 0 && isfinite(e->stats[GHF_ST_LL]); }

/* The AECM M-step from cur (statistics of the E-step at cur in e->stats and
 * its quantities in e->g): CM-step 1 mu, gamma and the subordinator (exact,
 * as for a full Sigma: they do not depend on Sigma); CM-step 2 one EM step
 * of the factor-analysis model for B, D with U ~ N(0, I_R) as latent data
 * (math.md 9.3), then the |Sigma| = 1 gauge.  Status as ghf_mstep. */
static int fx_mstep(fx_ctx *e, const ghf_params *cur, ghf_params *nx, char *why, size_t whylen)
{
    const int d = e->d, r = e->r;
    const double *st = e->stats;
    const double n = st[GHF_ST_N];
    ghf_params_copy(nx, cur);
    if (!(n > 0)) {
        snprintf(why, whylen, "no observations");
        return GHF_MSTEP_FAILED;
    }
    const double s1 = st[GHF_ST_S1] / n, s2 = st[GHF_ST_S2] / n, s3 = st[GHF_ST_S3] / n;
    if (!isfinite(s1) || !isfinite(s2) || !isfinite(s3)) {
        snprintf(why, whylen, "boundary: the posterior moments overflow (E[1/Y]=%g, E[Y]=%g)", s1, s2);
        return GHF_MSTEP_BOUNDARY;
    }
    const double *S4 = st + GHF_ST_S4, *S5 = S4 + d, *Q6 = S5 + d, *T = Q6 + d;
    /* CM 1: mu, gamma (math.md 3.1) */
    const int ls = ghf_mstep_location(e->gauss || e->model.symmetric, d, n, s1, s2, S4, S5, nx->mu, nx->gamma, why,
                                      whylen);
    if (ls != GHF_MSTEP_OK) return ls;
    if (!e->gauss) {
        const int ms = ghf_mstep_sub(&e->model, &e->mo, d, s1, s2, s3, cur, nx, why, whylen);
        if (ms != GHF_MSTEP_OK) return ms;
    }
    /* CM 2: S = (1/n) sum u (x - mu)(x - mu)' - (x - mu) gamma' - gamma (x - mu)' + v gamma gamma'
     * at the new mu, gamma, only through diag S and S beta' (d x R) */
    const double *mu = nx->mu, *ga = nx->gamma;
    const fx_der *g = &e->g;
    double *SB = NULL, *Th = NULL, *Lt = NULL;
    double bm[r > 0 ? r : 1], bg[r > 0 ? r : 1], b5[r > 0 ? r : 1], b4[r > 0 ? r : 1], tmp[r > 0 ? r : 1];
    int rc = GHF_MSTEP_OK;
    if (r > 0) {
        SB = malloc((size_t)d * r * sizeof(double));
        Th = malloc(2 * (size_t)r * r * sizeof(double));
        if (!SB || !Th) {
            free(SB), free(Th);
            snprintf(why, whylen, "out of memory (factor M-step)");
            return GHF_MSTEP_FAILED;
        }
        Lt = Th + r * r;
        /* beta v = M^-1 G v for v = mu, gamma, s5', s4' */
        const double *vs[4] = {mu, ga, S5, S4};
        double *outs[4] = {bm, bg, b5, b4};
        for (int q = 0; q < 4; q++) {
            const double sc = q >= 2 ? 1.0 / n : 1.0;
            for (int j = 0; j < r; j++) {
                double s = 0.0;
                for (int i = 0; i < d; i++) s += g->G[j * d + i] * vs[q][i];
                tmp[j] = s * sc;
            }
            for (int j = 0; j < r; j++) {
                double s = 0.0;
                for (int a = 0; a < r; a++) s += g->Minv[j * r + a] * tmp[a];
                outs[q][j] = s;
            }
        }
        for (int k = 0; k < d; k++) {
            const double a5 = S5[k] / n, a4 = S4[k] / n;
            for (int j = 0; j < r; j++)
                SB[k * r + j] = T[k * r + j] / n - a5 * bm[j] - mu[k] * b5[j] + s1 * mu[k] * bm[j] -
                                (a4 - mu[k]) * bg[j] - ga[k] * (b4[j] - bm[j]) + s2 * ga[k] * bg[j];
        }
        /* Theta = I - beta B + beta S beta' = M^-1 + M^-1 G (S beta') */
        for (int a = 0; a < r; a++)
            for (int b = 0; b < r; b++) {
                double s = 0.0;
                for (int i = 0; i < d; i++) s += g->G[a * d + i] * SB[i * r + b];
                tmp[b] = s;
                (void)tmp;
                Lt[a * r + b] = s; /* G S beta' */
            }
        for (int a = 0; a < r; a++)
            for (int b = 0; b < r; b++) {
                double s = g->Minv[a * r + b];
                for (int c = 0; c < r; c++) s += g->Minv[a * r + c] * Lt[c * r + b];
                Th[a * r + b] = s;
            }
        for (int a = 0; a < r; a++) /* symmetric up to rounding */
            for (int b = 0; b < a; b++) Th[a * r + b] = Th[b * r + a] = 0.5 * (Th[a * r + b] + Th[b * r + a]);
        if (ghf_cholesky(r, Th, Lt) != 0) {
            snprintf(why, whylen, "boundary: the factor update is singular (a factor loses its variance)");
            rc = GHF_MSTEP_BOUNDARY;
        }
        /* B_new = S beta' Theta^-1: row k solves Theta b = (S beta')_k */
        for (int k = 0; rc == GHF_MSTEP_OK && k < d; k++) {
            fx_lsolve(r, Lt, SB + (size_t)k * r, tmp);
            double *bk = nx->B + (size_t)k * r;
            for (int a = r - 1; a >= 0; a--) {
                double s = tmp[a];
                for (int c = a + 1; c < r; c++) s -= Lt[c * r + a] * bk[c];
                bk[a] = s / Lt[a * r + a];
            }
        }
    }
    /* D_new = diag(S - B_new beta S) */
    for (int k = 0; rc == GHF_MSTEP_OK && k < d; k++) {
        const double a5 = S5[k] / n, a4 = S4[k] / n;
        const double sk = Q6[k] / n - 2.0 * a5 * mu[k] + s1 * mu[k] * mu[k] - 2.0 * (a4 - mu[k]) * ga[k] +
                          s2 * ga[k] * ga[k];
        double bsb = 0.0;
        for (int j = 0; j < r; j++) bsb += nx->B[k * r + j] * SB[k * r + j];
        const double dk = sk - bsb;
        const double mag = fabs(Q6[k] / n) + 2.0 * fabs(a5 * mu[k]) + s1 * mu[k] * mu[k] + 2.0 * fabs((a4 - mu[k]) * ga[k]) +
                           s2 * ga[k] * ga[k];
        if (!(dk > 1e-8 * mag)) {
            snprintf(why, whylen, "boundary: the specific variance D of column %d vanishes (a Heywood case: the factors explain that column exactly, or a few observations dominate)", k);
            rc = GHF_MSTEP_BOUNDARY;
        }
        nx->D[k] = dk;
    }
    free(SB);
    free(Th);
    if (rc != GHF_MSTEP_OK) return rc;
    if (!e->gauss) {
        const double ld = ghf_factor_logdet(d, r, nx->B, nx->D);
        if (!isfinite(ld)) {
            snprintf(why, whylen, "boundary: Sigma = B B' + D is no longer positive definite");
            return GHF_MSTEP_BOUNDARY;
        }
        ghf_params_normalize(nx, ld);
        if (sqrt(nx->a) * sqrt(nx->b) > GHF_OMEGA_MAX) {
            snprintf(why, whylen, "boundary: sqrt(ab) -> infinity (the Gaussian limit: the mixing variable degenerates)");
            return GHF_MSTEP_GAUSS;
        }
    }
    for (int i = 0; i < d * (r + 3); i++) {
        const double v = i < d ? nx->mu[i] : i < 2 * d ? nx->gamma[i - d] : i < 3 * d ? nx->D[i - 2 * d] : nx->B[i - 3 * d];
        if (!isfinite(v)) {
            snprintf(why, whylen, "non-finite parameters after the M-step");
            return GHF_MSTEP_FAILED;
        }
    }
    return GHF_MSTEP_OK;
}

/* Largest relative change (the convergence test): mu, gamma against their
 * norm plus the data scale, B B' and D in Frobenius norm, p, a, b as
 * ghf_param_change. */
static double fx_change(const ghf_params *a, const ghf_params *b)
{
    const int d = a->d, r = a->nf;
    double tr = 0.0, nb = 0.0, db = 0.0, nd = 0.0, dd = 0.0;
    for (int i = 0; i < d; i++) {
        tr += b->D[i];
        nd += b->D[i] * b->D[i];
        dd += (a->D[i] - b->D[i]) * (a->D[i] - b->D[i]);
    }
    for (int i = 0; i < d * r; i++) tr += b->B[i] * b->B[i];
    if (r > 0) {
        /* B is identified up to rotations B -> B Q only: compare B B'.  With
         * E = a.B - b.B, a.B a.B' - b.B b.B' = U V' for U = [E, b.B + E] and
         * V = [b.B, E], so its squared Frobenius norm is tr(U'U V'V), every
         * term O(|E|^2) (no cancellation of |B|^4 terms); |b.B b.B'|_F^2 =
         * tr((b.B' b.B)^2). */
        const int r2 = 2 * r;
        double *UU = calloc(2 * (size_t)r2 * r2, sizeof(double));
        if (!UU) return INFINITY;
        double *VV = UU + r2 * r2;
        for (int i = 0; i < d; i++) {
            double u[r2], v[r2];
            for (int k = 0; k < r; k++) {
                const double e = a->B[i * r + k] - b->B[i * r + k];
                u[k] = e, u[r + k] = b->B[i * r + k] + e;
                v[k] = b->B[i * r + k], v[r + k] = e;
            }
            for (int p = 0; p < r2; p++)
                for (int q = 0; q < r2; q++) {
                    UU[p * r2 + q] += u[p] * u[q];
                    VV[p * r2 + q] += v[p] * v[q];
                }
        }
        for (int p = 0; p < r2; p++)
            for (int q = 0; q < r2; q++) db += UU[p * r2 + q] * VV[q * r2 + p];
        for (int p = 0; p < r; p++)
            for (int q = 0; q < r; q++) nb += VV[p * r2 + q] * VV[q * r2 + p];
        free(UU);
        if (db < 0.0) db = 0.0;
    }
    const double scale = sqrt(fabs(tr) / d);
    double m2 = 0, dm = 0, g2 = 0, dg = 0;
    for (int i = 0; i < d; i++) {
        m2 += b->mu[i] * b->mu[i];
        dm += (a->mu[i] - b->mu[i]) * (a->mu[i] - b->mu[i]);
        g2 += b->gamma[i] * b->gamma[i];
        dg += (a->gamma[i] - b->gamma[i]) * (a->gamma[i] - b->gamma[i]);
    }
    double c = fmax(sqrt(dm) / (sqrt(m2) + scale), sqrt(dg) / (sqrt(g2) + scale));
    c = fmax(c, sqrt(dd / nd));
    if (r > 0) c = fmax(c, sqrt(db / nb));
    if (isfinite(b->p)) c = fmax(c, fabs(a->p - b->p) / fmax(1.0, fabs(b->p)));
    const double da = fmax(fabs(a->a), fabs(b->a)), dbb = fmax(fabs(a->b), fabs(b->b));
    if (da > 0) c = fmax(c, fabs(a->a - b->a) / da);
    if (dbb > 0) c = fmax(c, fabs(a->b - b->b) / dbb);
    return isfinite(c) ? c : INFINITY;
}

/* SQUAREM point (Varadhan and Roland 2008, S3) in the coordinates
 * (mu, gamma, B, log D, p, log a, log b); 0, or -1 if unusable. */
static int fx_squarem(const fx_ctx *e, const ghf_params *t0, const ghf_params *t1, const ghf_params *t2,
                      ghf_params *out)
{
    const int d = e->d, r = e->r;
    const int n = d * (3 + r);
    double rr = 0.0, vv = 0.0;
#define FX_CO(t, i)                                                                                                   \
    ((i) < d ? (t)->mu[i] : (i) < 2 * d ? (t)->gamma[(i) - d] : (i) < 3 * d ? log((t)->D[(i) - 2 * d]) : (t)->B[(i) - 3 * d])
    for (int i = 0; i < n; i++) {
        const double x0 = FX_CO(t0, i), x1 = FX_CO(t1, i), x2 = FX_CO(t2, i);
        rr += (x1 - x0) * (x1 - x0);
        vv += (x2 - 2.0 * x1 + x0) * (x2 - 2.0 * x1 + x0);
    }
    double sub[3][3] = {{t0->p, t0->a, t0->b}, {t1->p, t1->a, t1->b}, {t2->p, t2->a, t2->b}};
    int face[3] = {0, 0, 0}, fixed[3] = {0, 0, 0};
    if (!e->gauss) {
        fixed[0] = sub[0][0] == sub[1][0] && sub[1][0] == sub[2][0];
        for (int q = 1; q < 3; q++) {
            const int z = (sub[0][q] == 0.0) + (sub[1][q] == 0.0) + (sub[2][q] == 0.0);
            if (z != 0 && z != 3) return -1; /* no extrapolation across a face */
            face[q] = z == 3;
        }
        for (int q = 0; q < 3; q++) {
            if (fixed[q] || face[q]) continue;
            double y[3];
            for (int k = 0; k < 3; k++) y[k] = q ? log(sub[k][q]) : sub[k][q];
            rr += (y[1] - y[0]) * (y[1] - y[0]);
            vv += (y[2] - 2.0 * y[1] + y[0]) * (y[2] - 2.0 * y[1] + y[0]);
        }
    }
    if (!(vv > 0.0) || !isfinite(rr) || !isfinite(vv)) return -1;
    double al = -sqrt(rr / vv);
    if (al > -1.0) al = -1.0;
    if (al < -64.0) al = -64.0;
    for (int i = 0; i < n; i++) {
        const double x0 = FX_CO(t0, i), x1 = FX_CO(t1, i), x2 = FX_CO(t2, i);
        const double v = x0 - 2.0 * al * (x1 - x0) + al * al * (x2 - 2.0 * x1 + x0);
        if (i < d) out->mu[i] = v;
        else if (i < 2 * d) out->gamma[i - d] = v;
        else if (i < 3 * d) out->D[i - 2 * d] = exp(v);
        else out->B[i - 3 * d] = v;
    }
#undef FX_CO
    out->p = t2->p, out->a = t2->a, out->b = t2->b;
    if (!e->gauss) {
        double res[3];
        for (int q = 0; q < 3; q++) {
            if (fixed[q] || face[q]) {
                res[q] = sub[2][q];
                continue;
            }
            double y[3];
            for (int k = 0; k < 3; k++) y[k] = q ? log(sub[k][q]) : sub[k][q];
            const double v = y[0] - 2.0 * al * (y[1] - y[0]) + al * al * (y[2] - 2.0 * y[1] + y[0]);
            res[q] = q ? exp(v) : v;
        }
        out->p = res[0], out->a = res[1], out->b = res[2];
        if (!isfinite(out->p) || fabs(out->p) > ghf_family_get(e->model.family)->p_max) return -1;
        if ((face[1] && !(out->p < 0)) || (face[2] && !(out->p > 0))) return -1;
        const double ld = ghf_factor_logdet(d, r, out->B, out->D);
        if (!isfinite(ld)) return -1;
        ghf_params_normalize(out, ld);
    }
    return 0;
}

static void fx_start_point(const fx_ctx *e, const double *B0, const double *D0, double ey, const double sub[3],
                           ghf_params *t)
{
    const int d = e->d, r = e->r;
    for (int i = 0; i < d; i++) {
        t->mu[i] = e->o->data_mean ? e->o->data_mean[i] : 0.0;
        t->gamma[i] = 0.0;
        t->D[i] = D0[i] / ey;
    }
    for (int i = 0; i < d * r; i++) t->B[i] = B0[i] / sqrt(ey);
    t->p = sub[0], t->a = sub[1], t->b = sub[2];
    if (!e->gauss) {
        const double ld = ghf_factor_logdet(d, r, t->B, t->D);
        if (isfinite(ld)) ghf_params_normalize(t, ld);
    }
}

/* The loadings of the start: the principal components of the data's
 * correlation matrix (subspace iteration, R columns, 60 sweeps), B0 =
 * diag(cov)^1/2 V (Lambda - s2)^1/2 with s2 the mean of the other
 * eigenvalues (probabilistic PCA), D0 = diag(cov) - diag(B0 B0') floored
 * at 5% of diag(cov).  Deterministic: the same on every rank. */
static int fx_pca_start(const fx_ctx *e, double *B0, double *D0)
{
    const int d = e->d, r = e->r;
    const double *C = e->o->data_cov;
    double *sd = malloc((size_t)d * sizeof(double));
    if (!sd) return -1;
    for (int i = 0; i < d; i++) {
        sd[i] = sqrt(fmax(C[(size_t)i * d + i], 1e-300));
        D0[i] = sd[i] * sd[i];
    }
    if (r == 0) {
        free(sd);
        return 0;
    }
    double *V = malloc((size_t)d * r * sizeof(double)), *W = malloc((size_t)d * r * sizeof(double));
    double lam[r];
    if (!V || !W) {
        free(V), free(W), free(sd);
        return -1;
    }
    for (int i = 0; i < d; i++) /* a fixed, generic start */
        for (int j = 0; j < r; j++) V[i * r + j] = cos(1.0 + 0.7 * i * (j + 1) + 0.3 * j);
    for (int it = 0; it < 60; it++) {
        for (int j = 0; j < r; j++) { /* Gram-Schmidt of V's columns */
            for (int k = 0; k < j; k++) {
                double s = 0.0;
                for (int i = 0; i < d; i++) s += V[i * r + j] * V[i * r + k];
                for (int i = 0; i < d; i++) V[i * r + j] -= s * V[i * r + k];
            }
            double s = 0.0;
            for (int i = 0; i < d; i++) s += V[i * r + j] * V[i * r + j];
            s = s > 0 ? 1.0 / sqrt(s) : 0.0;
            for (int i = 0; i < d; i++) V[i * r + j] *= s;
        }
        if (it == 59) break;
        memset(W, 0, (size_t)d * r * sizeof(double));
        for (int i = 0; i < d; i++)
            for (int k = 0; k < d; k++) {
                const double c = C[(size_t)i * d + k] / (sd[i] * sd[k]);
                for (int j = 0; j < r; j++) W[i * r + j] += c * V[k * r + j];
            }
        memcpy(V, W, (size_t)d * r * sizeof(double));
    }
    double tr = d, top = 0.0;
    for (int j = 0; j < r; j++) { /* Rayleigh quotients */
        double s = 0.0;
        for (int i = 0; i < d; i++) {
            double cv = 0.0;
            for (int k = 0; k < d; k++) cv += C[(size_t)i * d + k] / (sd[i] * sd[k]) * V[k * r + j];
            s += V[i * r + j] * cv;
        }
        lam[j] = s;
        top += s;
    }
    const double s2 = fmax((tr - top) / (d - r), 1e-3);
    for (int i = 0; i < d; i++) {
        double h = 0.0;
        for (int j = 0; j < r; j++) {
            const double b = V[i * r + j] * sqrt(fmax(lam[j] - s2, 1e-3 * s2));
            B0[i * r + j] = sd[i] * b;
            h += b * b;
        }
        D0[i] = sd[i] * sd[i] * fmax(1.0 - h, 0.05);
    }
    free(V), free(W), free(sd);
    return 0;
}

/* One EM update from cur (E-step done at cur: its statistics in e->stats,
 * log-likelihood ll): nx and its E-step (statistics in e->stats, *llnx).
 * With SQUAREM: theta1 = M(cur), theta2 = M(theta1), the extrapolated
 * theta' kept when its log-likelihood is at least theta1's (less 1e-13
 * relative), else theta1.  Returns 0 (nx valid), 2 (the M-step from cur
 * ended the fit: why), or 1 (run-time error). */
static int fx_update(fx_ctx *e, const ghf_params *cur, ghf_params *nx, ghf_params *t2, ghf_params *tx, double *llnx,
                     int accel, int *accepted, char *why, size_t whylen, int *mstat, char *err, size_t errlen)
{
    *accepted = 0;
    const int ms = fx_mstep(e, cur, nx, why, whylen);
    if (ms != GHF_MSTEP_OK) {
        *mstat = ms;
        return 2;
    }
    int erc = fx_estep(e, nx, err, errlen);
    if (erc == 1) return 1;
    if (erc != 0 || !fx_ok(e)) {
        snprintf(why, whylen, "boundary: the log-density became non-finite at %.0f observations", erc ? 0.0 : e->stats[GHF_ST_NBAD]);
        *mstat = GHF_MSTEP_BOUNDARY;
        return 2;
    }
    *llnx = e->stats[GHF_ST_LL];
    if (!accel) return 0;
    memcpy(e->stats1, e->stats, (size_t)e->len * sizeof(double));
    fx_der keep = e->g; /* the E-step quantities at theta1, for M(theta1) */
    char w2[320];
    if (fx_mstep(e, nx, t2, w2, sizeof w2) != GHF_MSTEP_OK) return 0;
    e->g = keep;
    if (fx_squarem(e, cur, nx, t2, tx) != 0) return 0;
    erc = fx_estep(e, tx, err, errlen);
    if (erc == 1) return 1;
    const double ll1 = *llnx;
    if (erc == 0 && fx_ok(e) && e->stats[GHF_ST_LL] >= ll1 - GHF_LL_MARGIN * fmax(1.0, fabs(ll1))) {
        *accepted = 1;
        *llnx = e->stats[GHF_ST_LL];
        ghf_params_copy(nx, tx);
        return 0;
    }
    /* rejected: back to theta1 and its E-step */
    memcpy(e->stats, e->stats1, (size_t)e->len * sizeof(double));
    if (fx_derive(nx, e->gauss, &e->g) != 0) return 1;
    return 0;
}

int ghf_em_fit_factor(MPI_Comm comm, const double *x, const double *w, int64_t nrows, int d, int nf,
                      const ghf_em_opts *o, ghf_em_result *r, char *err, size_t errlen)
{
    const double t_start = MPI_Wtime();
    memset(r, 0, sizeof *r);
    fx_ctx e;
    memset(&e, 0, sizeof e);
    e.comm = comm;
    e.x = x;
    e.w = w;
    e.nrows = nrows;
    e.d = d;
    e.r = nf;
    e.o = o;
    e.gauss = ghf_family_get(o->family)->sub == GHF_SUB_NONE;
    e.model.family = o->family;
    e.model.symmetric = o->symmetric;
    e.model.fix_p = o->fix_p;
    e.model.p = o->p_fixed;
    e.len = fx_len(d, nf);
    MPI_Comm_rank(comm, &e.rank);
    const int max_iter = o->max_iter < 0 ? 0 : o->max_iter;
    const int print = !o->quiet && e.rank == 0;
    const char *lab = o->label ? o->label : "";
    ghf_params cur, prev, nx, t2, tx, best;
    memset(&cur, 0, sizeof cur), memset(&prev, 0, sizeof prev), memset(&nx, 0, sizeof nx);
    memset(&t2, 0, sizeof t2), memset(&tx, 0, sizeof tx), memset(&best, 0, sizeof best);
    double *B0 = malloc((size_t)d * (nf > 0 ? nf : 1) * sizeof(double)), *D0 = malloc((size_t)d * sizeof(double));
    e.stats = calloc((size_t)e.len, sizeof(double));
    e.stats1 = calloc((size_t)e.len, sizeof(double));
    r->trace = calloc((size_t)max_iter + 2, sizeof(double));
    int fail = !B0 || !D0 || !e.stats || !e.stats1 || !r->trace || fx_der_alloc(&e.g, d, nf) ||
               ghf_params_alloc_factor(&cur, d, nf, 0) || ghf_params_alloc_factor(&prev, d, nf, 0) ||
               ghf_params_alloc_factor(&nx, d, nf, 0) || ghf_params_alloc_factor(&t2, d, nf, 0) ||
               ghf_params_alloc_factor(&tx, d, nf, 0) || ghf_params_alloc_factor(&best, d, nf, 0) ||
               ghf_params_alloc_factor(&r->params, d, nf, 1) || !o->data_cov;
    if (!fail) fail = fx_pca_start(&e, B0, D0) != 0;
    {
        int64_t ng = nrows;
        double xm = 0.0;
        for (int64_t i = 0; i < nrows * d; i++) xm = fmax(xm, fabs(x[i]));
        MPI_Allreduce(MPI_IN_PLACE, &ng, 1, MPI_INT64_T, MPI_SUM, comm);
        MPI_Allreduce(MPI_IN_PLACE, &xm, 1, MPI_DOUBLE, MPI_MAX, comm);
        e.xmax = xm;
        if (!fail && ng >= FX_PLAN_MIN_ROWS && !e.gauss) { /* the same choice on every rank */
            e.plan = malloc(sizeof *e.plan);
            fail = !e.plan;
        }
        if (o->has_missing && !e.gauss) /* collective: every rank (has_missing is agreed) */
            fail |= fx_miss_plans_alloc(&e) != 0;
    }
    if (fail) snprintf(err, errlen, "out of memory (factor EM state, d = %d, %d factors)", d, nf);
    if (ghf_test_fail("alloc", err, errlen)) fail = 1;
    int rc = 0;
    if (ghf_agree(comm, fail, err, errlen)) {
        rc = 1;
        goto out;
    }
    /* the starts: the family's subordinator candidates, start_iters EM steps each */
    double cand[16][3];
    int ncand = 1;
    /* a checkpoint's state (of this form: the caller checks): no starts */
    const ghf_em_state *rs = o->resume && o->resume->cur.D && o->resume->cur.nf == nf ? o->resume : NULL;
    if (rs) ncand = 0;
    else if (e.gauss) cand[0][0] = cand[0][1] = cand[0][2] = NAN;
    else if (o->init) {
        cand[0][0] = o->init->p, cand[0][1] = o->init->a, cand[0][2] = o->init->b;
    } else
        ncand = ghf_model_starts(&e.model, d, o->n_starts, o->seed, cand);
    double ll_best = -INFINITY;
    int have = 0;
    for (int c = 0; c < ncand; c++) {
        double ey = 1.0;
        if (!e.gauss) {
            const ghf_gig_moments m = ghf_gig_moments_eval(cand[c][0], cand[c][1], cand[c][2]);
            ey = isfinite(m.e_y) && m.e_y > 0 ? m.e_y : 1.0;
        }
        fx_start_point(&e, B0, D0, ey, cand[c], &cur);
        if (o->init && o->init->D && o->init->nf == nf) ghf_params_copy(&cur, o->init);
        const int nit = ncand > 1 ? (o->start_iters > 0 ? o->start_iters : GHF_DEFAULT_START_ITERS) : 0;
        int erc = fx_estep(&e, &cur, err, errlen);
        if (erc == 1) {
            rc = 1;
            goto out;
        }
        double ll = erc == 0 && fx_ok(&e) ? e.stats[GHF_ST_LL] : -INFINITY;
        for (int it = 0; it < nit && isfinite(ll); it++) {
            char why[320];
            int acc, ms;
            double l2;
            const int u = fx_update(&e, &cur, &nx, &t2, &tx, &l2, 0, &acc, why, sizeof why, &ms, err, errlen);
            if (u == 1) {
                rc = 1;
                goto out;
            }
            if (u == 2) break;
            ghf_params_copy(&cur, &nx);
            ll = l2;
        }
        if (isfinite(ll) && (!have || ll > ll_best + GHF_LL_MARGIN * fabs(ll_best))) {
            ghf_params_copy(&best, &cur);
            ll_best = ll;
            have = 1;
        }
    }
    int k = 0;
    if (rs) {
        k = rs->iter < max_iter ? rs->iter : max_iter;
        ghf_params_copy(&cur, &rs->cur);
        if (k > 0) ghf_params_copy(&prev, &rs->prev);
        memcpy(r->trace, rs->trace, (size_t)k * sizeof(double));
        have = 1;
    } else
        ghf_params_copy(&cur, &best);
    r->t_init = MPI_Wtime() - t_start;
    const double te0 = e.t_estep;
    int erc = have ? fx_estep(&e, &cur, err, errlen) : -1;
    if (erc == 1) {
        rc = 1;
        goto out;
    }
    if (erc != 0 || !fx_ok(&e)) {
        ghf__em_finish(r, &cur, -INFINITY, 0, r->trace, GHF_EM_FAILED,
                       "failed: the log-density is not finite at the starting point of the factor fit");
        goto done;
    }
    double ll = e.stats[GHF_ST_LL];
    r->trace[k] = ll;
    /* the resumable state at the top of each iteration (theta_k, theta_{k-1},
     * the trace before k): the E-step at theta_k is a function of theta_k
     * alone, so a run resumed from it repeats the same arithmetic */
    ghf_em_state st;
    memset(&st, 0, sizeof st);
    st.trace = r->trace;
    st.trace_cap = max_iter + 2;
    for (;;) {
        const double t_it = MPI_Wtime();
        st.iter = k;
        st.cur = cur; /* shallow: the loop's own parameters */
        st.prev = k > 0 ? prev : cur;
        const int stopping = e.stats[GHF_ST_STOP] > 0;
        if (o->on_state && o->on_state(o->on_state_ctx, &st, stopping) != 0) {
            snprintf(err, errlen, "writing the checkpoint failed");
            rc = 1;
            goto out;
        }
        if (stopping) {
            ghf__em_finish(r, &cur, ll, k, r->trace, GHF_EM_INTERRUPTED, "interrupted: stop requested (signal)");
            break;
        }
        if (k > 0 && 4.0 * DBL_EPSILON * e.stats[GHF_ST_ZWABS] > 1e-12 * fmax(1.0, fabs(ll))) {
            ghf__em_finish(r, &prev, r->trace[k - 1], k - 1, r->trace, GHF_EM_BOUNDARY, ghf__em_precision_status);
            break;
        }
        double dll = 0.0, dpar = INFINITY;
        if (k > 0) {
            dll = (ll - r->trace[k - 1]) / fmax(1.0, fabs(ll));
            dpar = fx_change(&cur, &prev);
            if (dll < -1e-12) r->n_decrease++;
        }
        if (print) {
            printf("%siter %5d  loglik % .15e  dll % .3e  dpar %.3e  %.4f s\n", lab, k, ll, dll, k > 0 ? dpar : 0.0,
                   MPI_Wtime() - t_it);
            fflush(stdout);
        }
        if (k > 0 && fabs(dll) < o->tol) {
            int flat = k >= 20 && fabs(ll - r->trace[k - 20]) < o->tol * fmax(1.0, fabs(ll));
            if (dpar < o->tol || flat) {
                ghf__em_finish(r, &cur, ll, k, r->trace, GHF_EM_CONVERGED,
                               dpar < o->tol || e.gauss ? (e.gauss ? "converged" : ghf__em_converged_status(&e.model, &cur))
                                                        : ghf__em_flat_status);
                break;
            }
        }
        if (k >= max_iter) {
            ghf__em_finish(r, &cur, ll, k, r->trace, GHF_EM_MAX_ITER,
                           max_iter == 0 ? "max_iter: no iterations requested" : "max_iter: iteration limit reached before convergence");
            break;
        }
        char why[320];
        int acc = 0, ms = 0;
        double llnx;
        const double tm = MPI_Wtime();
        const int u = fx_update(&e, &cur, &nx, &t2, &tx, &llnx, o->accel && !e.gauss ? 1 : o->accel, &acc, why,
                                sizeof why, &ms, err, errlen);
        r->t_mstep += MPI_Wtime() - tm;
        if (u == 1) {
            rc = 1;
            goto out;
        }
        if (u == 2) {
            ghf__em_finish(r, &cur, ll, k, r->trace, ms == GHF_MSTEP_FAILED ? GHF_EM_FAILED : GHF_EM_BOUNDARY,
                           ms == GHF_MSTEP_GAUSS ? ghf__em_gauss_limit_status : why);
            break;
        }
        if (acc) r->n_accel_accepted++;
        else if (o->accel) r->n_accel_rejected++;
        ghf_params_copy(&prev, &cur);
        ghf_params_copy(&cur, &nx);
        ll = llnx;
        k++;
        r->trace[k] = ll;
    }
done:
    r->n_gig_kept = e.mo.n_kept;
    r->t_estep = e.t_estep - te0;
    /* the result: Sigma = B B' + D formed once */
    ghf_params_factor_sigma(&r->params);
out:
    r->n_estep = e.n_estep;
    r->t_total = MPI_Wtime() - t_start;
    free(B0), free(D0), free(e.stats), free(e.stats1), free(e.plan);
    free(e.mslot), free(e.mrows), free(e.mplan), free(e.muse);
    fx_der_free(&e.g);
    ghf_params_free(&cur), ghf_params_free(&prev), ghf_params_free(&nx);
    ghf_params_free(&t2), ghf_params_free(&tx), ghf_params_free(&best);
    return rc;
}

int ghf_em_factor_loglik(MPI_Comm comm, const double *x, int64_t nrows, const ghf_missing *miss, int has_missing,
                         const ghf_params *t, double *ll, char *err, size_t errlen)
{
    fx_ctx e;
    memset(&e, 0, sizeof e);
    ghf_em_opts o;
    ghf_em_opts_defaults(&o);
    o.missing = miss;
    o.has_missing = has_missing;
    e.comm = comm;
    e.x = x;
    e.nrows = nrows;
    e.d = t->d;
    e.r = t->nf;
    e.o = &o;
    e.gauss = ghf_params_gaussian(t);
    e.len = fx_len(t->d, t->nf);
    e.stats = calloc((size_t)e.len, sizeof(double));
    int fail = !e.stats || fx_der_alloc(&e.g, t->d, t->nf);
    if (fail) snprintf(err, errlen, "out of memory");
    int rc = ghf_agree(comm, fail, err, errlen) ? 1 : 0;
    if (!rc) {
        rc = fx_estep(&e, t, err, errlen);
        *ll = rc == 0 && fx_ok(&e) ? e.stats[GHF_ST_LL] : NAN;
    }
    free(e.stats);
    fx_der_free(&e.g);
    return rc;
}
