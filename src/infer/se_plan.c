/* se_plan.c - the posterior of the mixing variable of every row, for the
 * standard errors: Y | x ~ GIG(P, A, B) with P, A the same for every row and
 * B = b + q, so each quantity the information needs (E[1/Y|x], E[Y|x],
 * E[log Y|x] and the covariance of (log Y, 1/Y, Y) given x) is a function of
 * s = log B alone.  The exact values come from the GIG quadrature
 * (kernels/gig.h, ~3 us); the plan interpolates them (logarithms of the
 * positive ones, E[log Y|x] as it is) by Chebyshev polynomials of degree 15
 * on pieces of a FIXED grid in s (width 1/4), so that every rank builds the
 * same pieces whatever rows it holds.  Each piece is checked against the
 * quadrature at 3 more points (relative 1e-12); a piece that fails, and a
 * row outside the built pieces, is evaluated exactly. */
#include "se_int.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"

#define PLAN_W 0.25      /* piece width in log B */
#define PLAN_N 16        /* Chebyshev nodes (degree 15) */
#define PLAN_NF 9        /* interpolated functions */
#define PLAN_MAX 8192    /* pieces at most (a range of e^2048 in B) */
#define PLAN_TOL 1e-12

struct ghf__se_plan {
    int64_t k0;          /* the first piece's index: piece k covers [k W, (k+1) W) */
    int np;
    double *coef;        /* [np][PLAN_NF][PLAN_N] */
    unsigned char *ok;   /* [np] */
};

/* exact: 0, or 1 when a needed quantity is not finite */
static int post_exact(const ghf__se_ctx *c, double B, ghf__se_post *r)
{
    memset(r, 0, sizeof *r);
    if (!c->has_sub) { /* the Gaussian: log f = -q/2 + const */
        r->u = 1.0;
        return 0;
    }
    const ghf_gig_stats g = ghf_gig_stats_eval(c->P, c->A, B);
    r->u = g.e_inv;
    r->wbb = 0.25 * g.h22;
    if (c->a_moves) {
        r->v = g.e_y;
        r->wab = 0.25 * g.h23;
        r->haa = 0.25 * g.h33;
    }
    if (c->free_p) {
        r->l = g.e_log;
        r->wpb = -0.5 * g.h12;
        r->hpp = g.h11;
        if (c->a_moves) r->hpa = -0.5 * g.h13;
    }
    const double chk = r->u + r->v + r->l + r->wbb + r->wpb + r->wab + r->hpp + r->hpa + r->haa;
    return !isfinite(chk) || !(r->wbb >= 0.0);
}

/* the interpolated functions of a posterior: log |.| of every needed one
 * but E[log Y|x] (which is taken as it is); the unneeded ones are 0.
 * 0, or -1 when a needed value has not its sign (u, v, wbb, wpb, hpp, haa
 * > 0; wab, hpa < 0) or is not finite. */
static int to_f(const ghf__se_ctx *c, const ghf__se_post *r, double f[PLAN_NF])
{
    const double v[PLAN_NF] = {r->u, r->v, r->l, r->wbb, r->wpb, r->wab, r->hpp, r->hpa, r->haa};
    const int need[PLAN_NF] = {1, c->a_moves, c->free_p, 1, c->free_p, c->a_moves, c->free_p,
                               c->free_p && c->a_moves, c->a_moves};
    static const int sign[PLAN_NF] = {1, 1, 0, 1, 1, -1, 1, -1, 1};
    for (int i = 0; i < PLAN_NF; i++) {
        f[i] = 0.0;
        if (!need[i]) continue;
        if (!isfinite(v[i])) return -1;
        if (sign[i] == 0) f[i] = v[i];
        else if (v[i] * sign[i] > 0.0) f[i] = log(fabs(v[i]));
        else return -1;
    }
    return 0;
}

static void from_f(const double f[PLAN_NF], const ghf__se_ctx *c, ghf__se_post *r)
{
    r->u = exp(f[0]);
    r->wbb = exp(f[3]);
    r->v = r->wab = r->haa = r->l = r->wpb = r->hpp = r->hpa = 0.0;
    if (c->a_moves) {
        r->v = exp(f[1]);
        r->wab = -exp(f[5]);
        r->haa = exp(f[8]);
    }
    if (c->free_p) {
        r->l = f[2];
        r->wpb = exp(f[4]);
        r->hpp = exp(f[6]);
        if (c->a_moves) r->hpa = -exp(f[7]);
    }
}

static void cheb_eval(const double *cf, double x, double f[PLAN_NF])
{
    for (int i = 0; i < PLAN_NF; i++) { /* Clenshaw */
        const double *a = cf + i * PLAN_N;
        double b1 = 0.0, b2 = 0.0;
        for (int j = PLAN_N - 1; j >= 1; j--) {
            const double t = 2.0 * x * b1 - b2 + a[j];
            b2 = b1;
            b1 = t;
        }
        f[i] = x * b1 - b2 + a[0];
    }
}

/* piece k: node values, coefficients, check; 1 if usable */
static int build_piece(const ghf__se_ctx *c, int64_t k, double *cf)
{
    double val[PLAN_N][PLAN_NF];
    for (int j = 0; j < PLAN_N; j++) {
        const double x = cos(M_PI * (j + 0.5) / PLAN_N);
        ghf__se_post r;
        if (post_exact(c, exp(PLAN_W * ((double)k + 0.5 * (x + 1.0))), &r) || to_f(c, &r, val[j])) return 0;
    }
    for (int i = 0; i < PLAN_NF; i++)
        for (int m = 0; m < PLAN_N; m++) {
            double s = 0.0;
            for (int j = 0; j < PLAN_N; j++) s += val[j][i] * cos(M_PI * m * (j + 0.5) / PLAN_N);
            cf[i * PLAN_N + m] = s * (m == 0 ? 1.0 : 2.0) / PLAN_N;
        }
    static const double xs[3] = {-0.93, 0.11, 0.77};
    for (int t = 0; t < 3; t++) {
        ghf__se_post r;
        double want[PLAN_NF], got[PLAN_NF];
        if (post_exact(c, exp(PLAN_W * ((double)k + 0.5 * (xs[t] + 1.0))), &r) || to_f(c, &r, want)) return 0;
        cheb_eval(cf, xs[t], got);
        for (int i = 0; i < PLAN_NF; i++) {
            const double tol = PLAN_TOL * (i == 2 ? fmax(1.0, fabs(want[i])) : 1.0);
            if (!(fabs(got[i] - want[i]) <= tol)) return 0;
        }
    }
    return 1;
}

int ghf__se_post_eval(const ghf__se_ctx *c, double q, ghf__se_post *r)
{
    const double B = c->b + q;
    const ghf__se_plan *p = c->plan;
    if (p && B > 0.0 && isfinite(B)) {
        const double s = log(B) / PLAN_W;
        const double kf = floor(s);
        const int64_t i = (int64_t)kf - p->k0;
        if (i >= 0 && i < p->np && p->ok[i]) {
            double f[PLAN_NF];
            cheb_eval(p->coef + (size_t)i * PLAN_NF * PLAN_N, 2.0 * (s - kf) - 1.0, f);
            from_f(f, c, r);
            return 0;
        }
    }
    return post_exact(c, B, r);
}

void ghf__se_plan_free(ghf__se_plan *p)
{
    if (!p) return;
    free(p->coef);
    free(p->ok);
    free(p);
}

int ghf__se_plan_build(MPI_Comm comm, ghf__se_ctx *c)
{
    c->plan = NULL;
    if (!c->has_sub || ghf__se_test_flag("exact")) return 0;
    /* the range of B over every rank's rows */
    const int d = c->d;
    double lo = INFINITY, hi = -INFINITY;
#pragma omp parallel num_threads(c->nthreads) reduction(min : lo) reduction(max : hi)
    {
        double *z = malloc((size_t)d * sizeof(double));
#pragma omp for schedule(static)
        for (int64_t i = 0; i < c->nrows; i++) {
            if (!z) continue;
            const double *x = c->x + (size_t)i * d;
            double q = 0.0;
            for (int j = 0; j < d; j++) { /* z = L^-1 (x - mu), forward */
                double s = x[j] - c->th->mu[j];
                for (int k = 0; k < j; k++) s -= c->der.L[j * d + k] * z[k];
                z[j] = s / c->der.L[j * d + j];
                q += z[j] * z[j];
            }
            const double B = c->b + q;
            if (B > 0.0 && isfinite(B)) {
                lo = fmin(lo, B);
                hi = fmax(hi, B);
            }
        }
        free(z);
    }
    double r[2] = {-lo, hi};
    MPI_Allreduce(MPI_IN_PLACE, r, 2, MPI_DOUBLE, MPI_MAX, comm);
    lo = -r[0];
    hi = r[1];
    if (!(lo > 0.0) || !isfinite(hi)) return 0;
    const int64_t k0 = (int64_t)floor(log(lo) / PLAN_W), k1 = (int64_t)floor(log(hi) / PLAN_W);
    const int64_t np = k1 - k0 + 1;
    /* a plan pays off with a few hundred rows per piece */
    if (np > PLAN_MAX || (double)np * (PLAN_N + 3) * 4.0 > (double)c->n) return 0;
    ghf__se_plan *p = calloc(1, sizeof *p);
    if (p) {
        p->coef = malloc((size_t)np * PLAN_NF * PLAN_N * sizeof(double));
        p->ok = calloc((size_t)np, 1);
    }
    const int fail = !p || !p->coef || !p->ok;
    if (ghf_any(comm, fail)) { /* exact evaluation (slower, same result to rounding) */
        ghf__se_plan_free(p);
        return 0;
    }
    p->k0 = k0;
    p->np = (int)np;
#pragma omp parallel for num_threads(c->nthreads) schedule(dynamic, 1)
    for (int i = 0; i < p->np; i++) p->ok[i] = (unsigned char)build_piece(c, k0 + i, p->coef + (size_t)i * PLAN_NF * PLAN_N);
    c->plan = p;
    return 0;
}
