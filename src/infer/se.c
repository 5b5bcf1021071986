/* se.c - standard errors of a fit (se.h): the checks that decide whether
 * there are any, the choice of the full or the subset method, the gauge-fixed
 * inverse of the full information (LAPACK), the map back to the data's
 * coordinates, the delta method for the gauge-free moments, and the
 * result's names and layout. */
#include "se.h"

#include <lapacke.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "se_int.h"

/* a condition number beyond this (scaled information) is treated as singular */
#define SE_COND_MAX 1e12

const char *ghf_se_mode_name(ghf_se_mode m)
{
    switch (m) {
    case GHF_SE_OFF: return "off";
    case GHF_SE_AUTO: return "auto";
    case GHF_SE_FULL: return "full";
    case GHF_SE_SUBSET: return "subset";
    }
    return "?";
}

int ghf_se_mode_parse(const char *s, ghf_se_mode *m)
{
    static const ghf_se_mode all[] = {GHF_SE_OFF, GHF_SE_AUTO, GHF_SE_FULL, GHF_SE_SUBSET};
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, ghf_se_mode_name(all[i]))) {
            *m = all[i];
            return 0;
        }
    return -1;
}

void ghf_se_free(ghf_se *s)
{
    free(s->mem);
    free(s->names);
    memset(s, 0, sizeof *s);
}

static void set_reason(ghf_se *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_reason(ghf_se *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->reason, sizeof o->reason, fmt, ap);
    va_end(ap);
}

/* the result's arrays: mu gamma mean [3d] | sigma cov [2 d*d] | param_cov [k*k] */
static int se_alloc(int d, int k, ghf_se *o)
{
    const size_t dd = (size_t)d * d;
    o->mem = malloc((3 * (size_t)d + 2 * dd + (size_t)k * k + 1) * sizeof(double));
    if (!o->mem) return -1;
    double *m = o->mem;
    ghf_fit_se *v = &o->v;
    v->d = d;
    v->mu = m;
    v->gamma = m + d;
    v->mean = m + 2 * d;
    v->sigma = m + 3 * d;
    v->cov = v->sigma + dd;
    v->param_cov = k > 0 ? v->cov + dd : NULL;
    v->n_cov = k;
    for (size_t i = 0; i < 3 * (size_t)d + 2 * dd; i++) m[i] = NAN;
    v->p = v->a = v->b = v->sqrt_ab = NAN;
    v->cond = v->newton_decrement = NAN;
    v->method = o->method;
    v->reason = o->reason;
    return 0;
}

int ghf_se_nan(int d, const char *method, const char *reason, ghf_se *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->method, sizeof out->method, "%s", method);
    snprintf(out->reason, sizeof out->reason, "%s", reason);
    return se_alloc(d, 0, out);
}

/* Why a fit has no standard errors at all ("" if it has). */
static void no_se_reason(const ghf_se_input *in, char *why, size_t len)
{
    const ghf_params *t = in->theta;
    const ghf_family_def *fd = ghf_family_get(in->model.family);
    why[0] = '\0';
    if (in->boundary || !strncmp(in->status ? in->status : "", "boundary", 8))
        snprintf(why, len, "the fit ended at a boundary of the parameter space, where the likelihood has no regular "
                 "maximum: no standard errors (status: %s)", in->status ? in->status : "boundary");
    else if (!ghf_params_finite(t) && !(fd && fd->sub == GHF_SUB_NONE))
        snprintf(why, len, "the fitted parameters are not finite");
    else if (fd && fd->sub == GHF_SUB_GIG && !(sqrt(t->a * t->b) >= GHF_SE_FACE_OMEGA))
        snprintf(why, len, "the fit is on the face %s = 0 of %s (sqrt(ab) = %.3g < %g), a limit of the family (the "
                 "%s law) rather than a point of it: no standard errors", t->a < t->b ? "a" : "b", fd->name,
                 sqrt(t->a * t->b), GHF_SE_FACE_OMEGA, t->a < t->b ? "skewed t" : "variance-gamma");
}

/* ---------------------------------------------------------------------------
 * Full method: the gauge-fixed inverse of the information (rank 0)
 * ------------------------------------------------------------------------- */

static inline int b_full_idx(const ghf__se_ctx *c, int i)
{
    return i < c->d ? i : (i < c->d + c->kS ? i + c->d : c->ib);
}

/* I = -(row part + structured part), free parameters, column-major (symmetric) */
static int build_info(const ghf__se_ctx *c, const double *heavy, double *Im)
{
    const int k = c->nfree, kB = c->kB, kf = c->kfull, d = c->d;
    memset(Im, 0, (size_t)k * k * sizeof(double));
    for (int i = 0; i < kB; i++) {
        const int fi = c->fidx[b_full_idx(c, i)];
        if (fi < 0) continue;
        for (int j = 0; j <= i; j++) {
            const int fj = c->fidx[b_full_idx(c, j)];
            if (fj < 0) continue;
            Im[(size_t)fi * k + fj] = Im[(size_t)fj * k + fi] = -heavy[(size_t)i * kB + j];
        }
    }
    int fail = 0;
    const int nt = c->nthreads;
#pragma omp parallel num_threads(nt)
    {
        double *x = calloc((size_t)2 * kf + 2 * (size_t)d * d, sizeof(double));
        if (!x) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(dynamic, 8)
        for (int jf = 0; jf < k; jf++) {
            if (!x) continue;
            double *y = x + kf, *scr = y + kf;
            memset(y, 0, (size_t)kf * sizeof(double));
            x[c->full_of[jf]] = 1.0;
            ghf__se_struct_apply(c, x, y, scr);
            x[c->full_of[jf]] = 0.0;
            for (int i = 0; i < k; i++) Im[(size_t)jf * k + i] -= y[c->full_of[i]];
        }
        free(x);
    }
    if (fail) return -1;
    for (int j = 0; j < k; j++) /* symmetric up to rounding: average */
        for (int i = 0; i < j; i++) {
            const double v = 0.5 * (Im[(size_t)j * k + i] + Im[(size_t)i * k + j]);
            Im[(size_t)j * k + i] = Im[(size_t)i * k + j] = v;
        }
    return 0;
}

static void swap_rc(double *A, int k, int i, int j)
{
    if (i == j) return;
    for (int r = 0; r < k; r++) {
        const double t = A[(size_t)r * k + i];
        A[(size_t)r * k + i] = A[(size_t)r * k + j];
        A[(size_t)r * k + j] = t;
    }
    for (int r = 0; r < k; r++) {
        const double t = A[(size_t)i * k + r];
        A[(size_t)i * k + r] = A[(size_t)j * k + r];
        A[(size_t)j * k + r] = t;
    }
}

/* V = the covariance of the free parameters in the |Sigma| = 1 gauge, from
 * the information I (overwritten; column-major, symmetric).  The gauge
 * d log|Sigma| = tr(E) = 0 (whitened frame) is solved for the last diagonal
 * entry e_pp = -sum of the other free diagonal entries of E: with T that
 * elimination (k x (k-1)),
 *     V = T (T^T I T)^-1 T^T,
 * which needs no exact null vector (the score at the reported point is not
 * exactly 0) and gives c^T V = 0 exactly.  T^T I T is scaled to a unit
 * diagonal; its condition number (LAPACK dpocon) is reported.  The
 * Gaussian has no orbit: V = I^-1.  0, or -1 with why. */
static int gauge_inverse(const ghf__se_ctx *c, double *Im, double *cond, char *why, size_t len)
{
    const int k = c->nfree, d = c->d;
    const int pv = c->has_sub ? c->fidx[2 * d + ghf__se_tri(d - 1, d - 1)] : -1;
    const int m = pv >= 0 ? k - 1 : k;
    double *D = malloc((size_t)2 * k * sizeof(double));
    if (!D) {
        snprintf(why, len, "out of memory for the information matrix");
        return -1;
    }
    double *cr = D + k; /* the gauge's coefficients of the kept coordinates (1 on E's diagonal) */
    for (int i = 0; i < k; i++) {
        const int f = c->full_of[i];
        int j = 0, l = 1;
        if (f >= 2 * d && f < c->ip) ghf__se_tri_inv(f - 2 * d, &j, &l);
        cr[i] = pv >= 0 && j == l ? 1.0 : 0.0;
    }
    if (pv >= 0) { /* the pivot last; T^T I T on the leading m x m block */
        swap_rc(Im, k, pv, k - 1);
        const double t = cr[pv];
        cr[pv] = cr[k - 1];
        cr[k - 1] = t;
        const double ipp = Im[(size_t)(k - 1) * k + k - 1];
        for (int j = 0; j < m; j++)
            for (int i = 0; i < m; i++)
                Im[(size_t)j * k + i] += -Im[(size_t)(k - 1) * k + i] * cr[j] - cr[i] * Im[(size_t)(k - 1) * k + j] +
                                         ipp * cr[i] * cr[j];
    }
    int rc = 0;
    for (int i = 0; i < m && !rc; i++) {
        const double v = Im[(size_t)i * k + i];
        if (!(v > 0.0) || !isfinite(v)) {
            snprintf(why, len, "the observed information is not positive definite (a diagonal entry is %.3g): the "
                     "point is not a maximum of the likelihood", v);
            rc = -1;
        }
        D[i] = 1.0 / sqrt(v);
    }
    if (!rc) {
        for (int j = 0; j < m; j++)
            for (int i = 0; i < m; i++) Im[(size_t)j * k + i] *= D[i] * D[j];
        const double anorm = LAPACKE_dlansy(LAPACK_COL_MAJOR, '1', 'L', m, Im, k);
        const int old = ghf__se_blas_threads(c->nthreads);
        int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', m, Im, k);
        double rcond = 0.0;
        if (info == 0) info = LAPACKE_dpocon(LAPACK_COL_MAJOR, 'L', m, Im, k, anorm, &rcond) ? -1 : 0;
        *cond = info == 0 && rcond > 0.0 ? 1.0 / rcond : INFINITY;
        if (info != 0) {
            snprintf(why, len, "the observed information is not positive definite: the point is not a strict maximum "
                     "of the likelihood (a parameter is not identified, or the fit has not converged)");
            rc = -1;
        } else if (*cond > SE_COND_MAX) {
            snprintf(why, len, "the observed information is singular (condition number %.3g after scaling to a unit "
                     "diagonal): some parameters are not identified by these data", *cond);
            rc = -1;
        } else if (LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', m, Im, k) != 0) {
            snprintf(why, len, "inverting the observed information failed");
            rc = -1;
        }
        ghf__se_blas_threads(old);
    }
    if (!rc) {
        for (int j = 0; j < m; j++)
            for (int i = j; i < m; i++) {
                const double v = D[i] * Im[(size_t)j * k + i] * D[j];
                Im[(size_t)j * k + i] = Im[(size_t)i * k + j] = v;
            }
        if (pv >= 0) { /* the eliminated coordinate: -cr^T V, cr^T V cr */
            double vpp = 0.0;
            for (int i = 0; i < m; i++) {
                double s = 0.0;
                for (int j = 0; j < m; j++) s += Im[(size_t)j * k + i] * cr[j];
                Im[(size_t)(k - 1) * k + i] = Im[(size_t)i * k + k - 1] = -s;
                vpp += s * cr[i];
            }
            Im[(size_t)(k - 1) * k + k - 1] = vpp;
            swap_rc(Im, k, pv, k - 1);
        }
    }
    free(D);
    return rc;
}

/* V (free whitened coordinates, k x k) -> J V J^T (raw coordinates), in place */
static int to_raw_cov(const ghf__se_ctx *c, double *V)
{
    const int k = c->nfree, kf = c->kfull, d = c->d;
    int fail = 0;
    for (int pass = 0; pass < 2 && !fail; pass++) {
#pragma omp parallel num_threads(c->nthreads)
        {
            double *v = calloc((size_t)kf + 2 * (size_t)d * d, sizeof(double));
            if (!v) {
#pragma omp atomic write
                fail = 1;
            }
#pragma omp for schedule(dynamic, 8)
            for (int j = 0; j < k; j++) {
                if (!v) continue;
                double *col = V + (size_t)j * k;
                memset(v, 0, (size_t)kf * sizeof(double));
                for (int i = 0; i < k; i++) v[c->full_of[i]] = col[i];
                ghf__se_to_raw(c, v, v + kf);
                for (int i = 0; i < k; i++) col[i] = v[c->full_of[i]];
            }
            free(v);
        }
        for (int j = 0; j < k; j++) /* transpose */
            for (int i = 0; i < j; i++) {
                const double t = V[(size_t)j * k + i];
                V[(size_t)j * k + i] = V[(size_t)i * k + j];
                V[(size_t)i * k + j] = t;
            }
    }
    return fail ? -1 : 0;
}

/* ---------------------------------------------------------------------------
 * Data coordinates, names, the delta method
 * ------------------------------------------------------------------------- */

/* The factor of each full parameter from the internal to the data
 * coordinates (data = 2^-s (internal + shift), then back to |Sigma| = 1):
 * mu 2^-s, gamma 2^s, Sigma 1, p 1, a 4^s, b 4^-s; the Gaussian: mu 2^-s,
 * Sigma 4^-s. */
static double data_factor(const ghf__se_ctx *c, int i, int s)
{
    const int d = c->d;
    if (i < d) return ldexp(1.0, -s);
    if (i < 2 * d) return ldexp(1.0, s);
    if (i < c->ip) return c->has_sub ? 1.0 : ldexp(1.0, -2 * s);
    if (i == c->ia) return ldexp(1.0, 2 * s);
    if (i == c->ib) return ldexp(1.0, -2 * s);
    return 1.0;
}

static void param_name(const ghf__se_ctx *c, int i, char *buf, size_t len)
{
    const int d = c->d;
    if (i < d) snprintf(buf, len, "mu[%d]", i);
    else if (i < 2 * d) snprintf(buf, len, "gamma[%d]", i - d);
    else if (i < c->ip) {
        int j, k;
        ghf__se_tri_inv(i - 2 * d, &j, &k);
        snprintf(buf, len, "sigma[%d,%d]", j, k);
    } else snprintf(buf, len, "%s", i == c->ip ? "p" : i == c->ia ? "a" : "b");
}

/* names of the full parameters list[0..n) as one string, each ended by '\n' */
static char *names_of(const ghf__se_ctx *c, const int *list, int n)
{
    char *s = malloc((size_t)n * 40 + 1), *p = s;
    if (!s) return NULL;
    for (int i = 0; i < n; i++) {
        param_name(c, list[i], p, 40);
        p += strlen(p);
        *p++ = '\n';
    }
    *p = '\0';
    return s;
}

/* E[Y], Var[Y] of GIG(p, a, b) and their gradients in (p, a, b) (central
 * differences of the quadrature, kernels/gig.h); the fixed ones are 0 */
static void ymoments(const ghf__se_ctx *c, double p, double a, double b, double m[2], double gm[2][3])
{
    const ghf_gig_stats g = ghf_gig_stats_eval(p, a, b);
    m[0] = g.e_y;
    m[1] = g.h33;
    const int fr[3] = {c->free_p, c->free_a, c->free_b};
    for (int r = 0; r < 3; r++) {
        gm[0][r] = gm[1][r] = 0.0;
        if (!fr[r]) continue;
        double th[3] = {p, a, b}, hi[3], lo[3];
        const double h = r == 0 ? 1e-5 * fmax(1.0, fabs(p)) : 1e-5 * th[r];
        memcpy(hi, th, sizeof th);
        memcpy(lo, th, sizeof th);
        hi[r] += h;
        lo[r] -= h;
        const ghf_gig_stats gh = ghf_gig_stats_eval(hi[0], hi[1], hi[2]), gl = ghf_gig_stats_eval(lo[0], lo[1], lo[2]);
        gm[0][r] = (gh.e_y - gl.e_y) / (2.0 * h);
        gm[1][r] = (gh.h33 - gl.h33) / (2.0 * h);
    }
}

/* sqrt(g^T V g) over (position, coefficient) pairs; NaN if a position is
 * not available (-2); fixed parameters (-1) are skipped */
static double lin_se(const double *V, int k, const int *pos, const double *coef, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) {
        if (coef[i] == 0.0 || pos[i] == -1) continue;
        if (pos[i] < 0 || !isfinite(coef[i])) return NAN;
        for (int j = 0; j < n; j++) {
            if (coef[j] == 0.0 || pos[j] == -1) continue;
            if (pos[j] < 0 || !isfinite(coef[j])) return NAN;
            s += coef[i] * coef[j] * V[(size_t)pos[i] * k + pos[j]];
        }
    }
    return s >= 0.0 ? sqrt(s) : NAN;
}

static void fill_ses_int(const ghf__se_ctx *c, const ghf_params *t, const double *V, int k, const int *pos, ghf_se *o);

/* The SEs of the parameters and of the gauge-free quantities from V (k x k;
 * pos[i] = row of full parameter i, -1 fixed, -2 not computed) at the
 * parameters t, both in the internal coordinates; then to the data's
 * coordinates (a linear map of each quantity, data_factor: computed after
 * the square root, so that data near the limits of double do not underflow
 * a variance). */
static void fill_ses(const ghf__se_ctx *c, const ghf_params *t, const double *V, int k, const int *pos, int sc,
                     ghf_se *o)
{
    fill_ses_int(c, t, V, k, pos, o);
    const int d = c->d;
    ghf_fit_se *v = &o->v;
    double *mu = (double *)v->mu, *ga = (double *)v->gamma, *sg = (double *)v->sigma;
    double *mean = (double *)v->mean, *cov = (double *)v->cov;
    const double fm = data_factor(c, 0, sc), fs = data_factor(c, 2 * d, sc);
    for (int j = 0; j < d; j++) {
        mu[j] *= fm;
        ga[j] *= data_factor(c, d, sc);
        mean[j] *= fm;
    }
    for (int i = 0; i < d * d; i++) {
        sg[i] *= fs;
        cov[i] = ldexp(cov[i], -2 * sc);
    }
    if (c->has_sub) {
        v->a *= data_factor(c, c->ia, sc);
        v->b *= data_factor(c, c->ib, sc);
    }
}

static void fill_ses_int(const ghf__se_ctx *c, const ghf_params *t, const double *V, int k, const int *pos, ghf_se *o)
{
    const int d = c->d;
    ghf_fit_se *v = &o->v;
    double *mu = (double *)v->mu, *ga = (double *)v->gamma, *sg = (double *)v->sigma;
    double *mean = (double *)v->mean, *cov = (double *)v->cov;
    for (int i = 0; i < c->kfull; i++) {
        const double se = pos[i] == -1 ? 0.0 : pos[i] < 0 ? NAN : sqrt(fmax(V[(size_t)pos[i] * k + pos[i]], 0.0));
        if (i < d) mu[i] = se;
        else if (i < 2 * d) ga[i - d] = se;
        else if (i < c->ip) {
            int j, kk;
            ghf__se_tri_inv(i - 2 * d, &j, &kk);
            sg[j * d + kk] = sg[kk * d + j] = se;
        } else if (c->has_sub) *(i == c->ip ? &v->p : i == c->ia ? &v->a : &v->b) = se;
    }
    if (!c->has_sub) { /* the Gaussian: E X = mu, Cov X = Sigma */
        memcpy(mean, mu, (size_t)d * sizeof(double));
        memcpy(cov, sg, (size_t)d * d * sizeof(double));
        return;
    }
    v->sqrt_ab = (c->free_a && c->free_b) ? NAN : 0.0;
    if (c->free_a && c->free_b) {
        const int pp[2] = {pos[c->ia], pos[c->ib]};
        const double cf[2] = {0.5 * sqrt(t->b / t->a), 0.5 * sqrt(t->a / t->b)};
        v->sqrt_ab = lin_se(V, k, pp, cf, 2);
    }
    double m[2], gm[2][3], mm[1], cc[1];
    ymoments(c, t->p, t->a, t->b, m, gm);
    ghf_params one = *t;
    one.d = 1; /* existence of the moments (same test as the output's moments) */
    int mean_ok = 1, cov_ok = 1;
    for (int j = 0; j < d; j++) {
        one.mu = t->mu + j;
        one.gamma = t->gamma + j;
        one.sigma = t->sigma + (size_t)j * d + j;
        ghf_params_moments(&one, mm, cc, NULL, 0);
        mean_ok &= isfinite(mm[0]);
        cov_ok &= isfinite(cc[0]);
    }
    for (int j = 0; j < d; j++) {
        const int pp[5] = {pos[j], pos[d + j], pos[c->ip], pos[c->ia], pos[c->ib]};
        const double g = t->gamma[j];
        const double cf[5] = {1.0, m[0], g * gm[0][0], g * gm[0][1], g * gm[0][2]};
        mean[j] = mean_ok ? lin_se(V, k, pp, cf, 5) : NAN;
        for (int l = 0; l <= j; l++) {
            const double s = t->sigma[(size_t)j * d + l], gl = t->gamma[l];
            const int qq[6] = {pos[2 * d + ghf__se_tri(j, l)], pos[d + j], pos[d + l], pos[c->ip], pos[c->ia],
                               pos[c->ib]};
            double cg[6] = {m[0], m[1] * gl, m[1] * g, 0, 0, 0};
            for (int r = 0; r < 3; r++) cg[3 + r] = s * gm[0][r] + g * gl * gm[1][r];
            if (j == l) { /* gamma_j appears twice */
                cg[1] += cg[2];
                cg[2] = 0.0;
            }
            cov[(size_t)j * d + l] = cov[(size_t)l * d + j] = cov_ok ? lin_se(V, k, qq, cg, 6) : NAN;
        }
    }
    if (!mean_ok || !cov_ok) {
        const size_t n = strlen(o->reason);
        snprintf(o->reason + n, sizeof o->reason - n, "%s%s", n ? "; " : "",
                 !mean_ok ? "E X and Cov X do not exist (heavy tails): their SEs are NaN"
                          : "Cov X does not exist (heavy tails): its SEs are NaN");
    }
}

/* ---------------------------------------------------------------------------
 * The two methods
 * ------------------------------------------------------------------------- */

/* The SEs from the covariance in o->v.param_cov (internal coordinates; row
 * r is full parameter list[r], pos the inverse map), then param_cov to the
 * data's coordinates, and the row names.  1, or 0 (out of memory). */
static int finish(const ghf__se_ctx *c, const ghf_se_input *in, const int *list, const int *pos, ghf_se *o)
{
    const int k = o->v.n_cov, sc = in->scale_log2;
    double *V = (double *)o->v.param_cov;
    fill_ses(c, in->theta, V, k, pos, sc, o);
    for (int j = 0; j < k; j++)
        for (int i = 0; i < k; i++)
            V[(size_t)j * k + i] *= data_factor(c, list[i], sc) * data_factor(c, list[j], sc);
    o->names = names_of(c, list, k);
    o->v.names = o->names;
    if (!o->names) {
        o->v.n_cov = 0;
        set_reason(o, "out of memory");
        return 0;
    }
    return 1;
}

/* Full: rank 0 forms the information and inverts it. */
static int run_full(MPI_Comm comm, ghf__se_ctx *c, const ghf_se_input *in, ghf_se *o)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    const int kB = c->kB, k = c->nfree;
    double *heavy = calloc((size_t)kB * kB, sizeof(double));
    if (ghf_any(comm, !heavy)) {
        free(heavy);
        set_reason(o, "not enough memory for the %d x %d information matrix (try se: subset)", kB, kB);
        return 0;
    }
    const int st = ghf__se_pass(comm, c, heavy);
    if (st || rank != 0) {
        free(heavy);
        if (st) set_reason(o, "out of memory in the pass over the rows");
        return 0;
    }
    if (c->nbad > 0) {
        free(heavy);
        set_reason(o, "the posterior moments of %.0f rows are not finite (a row at mu with a variance-gamma p <= d/2 "
                   "+ 1?): the information does not exist", c->nbad);
        return 0;
    }
    double *Im = malloc((size_t)k * k * sizeof(double)), *g = malloc((size_t)c->kfull * sizeof(double));
    if (!Im || !g || se_alloc(c->d, k, o) != 0 || build_info(c, heavy, Im) != 0) {
        free(heavy), free(Im), free(g);
        set_reason(o, "not enough memory for the %d x %d information matrix (try se: subset)", k, k);
        return 0;
    }
    free(heavy);
    ghf__se_score(c, g);
    if (in->theta->D) { /* the factor form: the covariance its information implies (se_factor.c) */
        if (ghf__se_factor_inverse(c, in->theta, Im, g, &o->v.cond, &o->v.newton_decrement, o->reason,
                                   sizeof o->reason) != 0) {
            free(Im), free(g);
            o->v.n_cov = 0;
            return 0;
        }
    } else {
        if (gauge_inverse(c, Im, &o->v.cond, o->reason, sizeof o->reason) != 0) {
            free(Im), free(g);
            o->v.n_cov = 0;
            return 0;
        }
        double nd = 0.0;
        for (int i = 0; i < k; i++)
            for (int j = 0; j < k; j++) nd += g[c->full_of[i]] * Im[(size_t)i * k + j] * g[c->full_of[j]];
        o->v.newton_decrement = sqrt(fmax(nd, 0.0));
    }
    free(g);
    if (to_raw_cov(c, Im) != 0) {
        free(Im);
        o->v.n_cov = 0;
        set_reason(o, "out of memory");
        return 0;
    }
    memcpy((double *)o->v.param_cov, Im, (size_t)k * k * sizeof(double)); /* internal coordinates */
    free(Im);
    return finish(c, in, c->full_of, c->fidx, o);
}

/* The functionals of the subset in whitened coordinates: raw mu_j, gamma_j,
 * Sigma_jj, p, a, b (the free ones), and the score (last column). */
static int subset_functionals(const ghf__se_ctx *c, int *list, double *F)
{
    const int d = c->d, kf = c->kfull;
    const double *L = c->der.L;
    int s = 0;
    for (int i = 0; i < kf; i++) {
        int j = 0, kk = 0;
        if (i >= 2 * d && i < c->ip) ghf__se_tri_inv(i - 2 * d, &j, &kk);
        if (c->fidx[i] < 0 || j != kk) continue;
        double *f = F + (size_t)s * kf;
        memset(f, 0, (size_t)kf * sizeof(double));
        if (i < 2 * d) { /* raw mu_j = (L m)_j: the functional is row j of L */
            const int r = i % d, o = i < d ? 0 : d;
            for (int a = 0; a <= r; a++) f[o + a] = L[r * d + a];
        } else if (i < c->ip) { /* raw Sigma_jj = l_j^T E l_j: pair(l_j l_j^T) */
            for (int a = 0; a <= j; a++) {
                for (int b = 0; b < a; b++) f[2 * d + ghf__se_tri(a, b)] = 2.0 * L[j * d + a] * L[j * d + b];
                f[2 * d + ghf__se_tri(a, a)] = L[j * d + a] * L[j * d + a];
            }
        } else {
            f[i] = 1.0;
        }
        list[s++] = i;
    }
    ghf__se_score(c, F + (size_t)s * kf);
    return s;
}

/* Subset: every rank takes part in the iterative solve. */
static int run_subset(MPI_Comm comm, ghf__se_ctx *c, const ghf_se_input *in, ghf_se *o)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    const int d = c->d, kf = c->kfull;
    const int smax = 3 * d + 4;
    int *list = malloc((size_t)smax * sizeof(int));
    double *F = malloc((size_t)(smax + 1) * kf * sizeof(double)), *C = malloc((size_t)(smax + 1) * (smax + 1) * sizeof(double));
    if (ghf_any(comm, !list || !F || !C)) {
        free(list), free(F), free(C);
        set_reason(o, "out of memory");
        return 0;
    }
    int st = ghf__se_pass(comm, c, NULL);
    if (st || c->nbad > 0) {
        free(list), free(F), free(C);
        if (st) set_reason(o, "out of memory in the pass over the rows");
        else set_reason(o, "the posterior moments of %.0f rows are not finite: the information does not exist",
                        c->nbad);
        return 0;
    }
    const int s = subset_functionals(c, list, F);
    st = ghf__se_subset_solve(comm, c, F, s + 1, C, o->reason, sizeof o->reason);
    free(F);
    if (st || rank != 0 || se_alloc(d, s, o) != 0) {
        free(list), free(C);
        return 0;
    }
    o->v.newton_decrement = sqrt(fmax(C[(size_t)s * (s + 1) + s], 0.0));
    double *V = (double *)o->v.param_cov;
    for (int i = 0; i < s; i++)
        for (int j = 0; j < s; j++) V[(size_t)i * s + j] = C[(size_t)i * (s + 1) + j];
    free(C);
    int *pos = malloc((size_t)kf * sizeof(int));
    if (!pos) {
        free(list);
        set_reason(o, "out of memory");
        return 0;
    }
    for (int i = 0; i < kf; i++) pos[i] = c->fidx[i] < 0 ? -1 : -2;
    for (int i = 0; i < s; i++) pos[list[i]] = i;
    const int ok = finish(c, in, list, pos, o);
    free(pos);
    if (!ok) {
        free(list);
        return 0;
    }
    const size_t n = strlen(o->reason);
    snprintf(o->reason + n, sizeof o->reason - n,
             "%ssubset method (%d free parameters; %d conjugate-gradient iterations): SEs of mu, gamma, p, a, b, the "
             "diagonal of Sigma, E X and the diagonal of Cov X only; the off-diagonal entries are NaN",
             n ? "; " : "", c->nfree, c->cg_iter);
    free(list);
    return 1;
}

int ghf_se_compute(MPI_Comm comm, const ghf_se_input *in, ghf_se_mode mode, ghf_se *out, char *err, size_t errlen)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    memset(out, 0, sizeof *out);
    out->v.cond = NAN;
    const double t0 = MPI_Wtime();
    snprintf(out->method, sizeof out->method, "none");
    char why[sizeof out->reason];
    no_se_reason(in, why, sizeof why);
    ghf__se_ctx c;
    int ok = 0;
    if (!why[0]) {
        const int bad = ghf__se_ctx_init(&c, in) != 0;
        if (ghf_any(comm, bad)) {
            if (!bad) ghf__se_ctx_free(&c);
            snprintf(why, sizeof why, "out of memory, or Sigma not positive definite");
        }
    }
    if (!why[0]) {
        c.nthreads = omp_get_max_threads() > 0 ? omp_get_max_threads() : 1;
        c.is_root = rank == 0;
        c.verbose = in->verbose;
        c.label = in->label;
        c.t_start = c.t_last_print = t0;
        /* the factor form: the full method only (the caller refuses the subset and d > 100) */
        const int full = in->theta->D || mode == GHF_SE_FULL || (mode != GHF_SE_SUBSET && c.nfree <= GHF_SE_FULL_KMAX);
        snprintf(out->method, sizeof out->method, "%s", full ? "full" : "subset");
        if (rank == 0 && (in->verbose || (double)c.n * c.kB * c.kB > 2e12)) {
            printf("ghfit: %s: standard errors by the %s observed information (%d free parameters, %lld rows)\n",
                   in->label ? in->label : "fit", full ? "full" : "subset of the",
                   in->theta->D ? ghf__se_factor_nfree(&c, in->theta) : c.nfree, (long long)c.n);
            fflush(stdout);
        }
        ok = full ? run_full(comm, &c, in, out) : run_subset(comm, &c, in, out);
        if (!ok && !out->reason[0]) set_reason(out, "standard errors could not be computed");
        snprintf(why, sizeof why, "%s", out->reason);
        ghf__se_ctx_free(&c);
    }
    if (rank != 0) {
        ghf_se_free(out);
        return 0;
    }
    if (!ok) { /* NaN with the reason */
        char method[16];
        snprintf(method, sizeof method, "%s", out->method);
        const double cond = out->v.cond;
        ghf_se_free(out);
        if (ghf_se_nan(in->d, method, why, out) != 0) {
            snprintf(err, errlen, "out of memory");
            return 1;
        }
        out->v.cond = cond;
    }
    out->v.seconds = MPI_Wtime() - t0;
    return 0;
}
