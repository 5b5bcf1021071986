/* se_subset.c - standard errors without forming the information matrix
 * (the subset method, for many parameters): F^T V F for a few functionals F
 * of the parameters, V = T (T^T I T)^-1 T^T the gauge-fixed inverse
 * information (T eliminates the last diagonal entry of E by the gauge
 * tr E = 0, as the full method does: se.c), by preconditioned conjugate
 * gradients on W = T^T I T with every right-hand side T^T f in lockstep:
 * one pass over the rows per iteration applies the row part to all of them
 * (se_pass.c).  In the whitened frame (se_int.h) W is close to a multiple
 * of the identity block by block; its diagonal is the preconditioner.
 * Every rank runs the same iteration; rank 0 decides (its scalars are
 * broadcast). */
#include "se_int.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"

#define SE_CG_TOL 1e-11   /* relative residual (preconditioned norm) of every column */
#define SE_CG_MAXIT 2000

static inline int b_full(const ghf__se_ctx *c, int i)
{
    return i < c->d ? i : (i < c->d + c->kS ? i + c->d : c->ib);
}

/* The gauge: pv, the full index of the eliminated coordinate (the last
 * diagonal entry of E), -1 for the Gaussian; cv[i] = 1 on the other free
 * diagonal entries of E (the elimination sets x[pv] = -cv.x). */
static int gauge_pivot(const ghf__se_ctx *c, double *cv)
{
    const int d = c->d;
    memset(cv, 0, (size_t)c->kfull * sizeof(double));
    if (!c->has_sub) return -1;
    for (int j = 0; j < d - 1; j++) cv[2 * d + ghf__se_tri(j, j)] = 1.0;
    return 2 * d + ghf__se_tri(d - 1, d - 1);
}

/* x (pv entry ignored) -> T x: x[pv] = -cv.x */
static void expand(const ghf__se_ctx *c, int pv, const double *cv, double *x)
{
    if (pv < 0) return;
    double s = 0.0;
    for (int i = 0; i < c->kfull; i++) s += cv[i] * x[i];
    x[pv] = -s;
}

/* y -> T^T y: y += -cv y[pv], y[pv] = 0 */
static void fold(const ghf__se_ctx *c, int pv, const double *cv, double *y)
{
    if (pv < 0) return;
    const double t = y[pv];
    for (int i = 0; i < c->kfull; i++) y[i] -= cv[i] * t;
    y[pv] = 0.0;
}

/* The diagonal of W (an approximation: the cross terms of the global
 * directions P, A and of the eliminated entry are left out), made
 * positive: the preconditioner. */
static void w_diag(const ghf__se_ctx *c, int pv, const double *cv, double *dg)
{
    const int d = c->d, kf = c->kfull;
    const double N = (double)c->n;
    memset(dg, 0, (size_t)kf * sizeof(double));
    for (int i = 0; i < c->kB; i++) dg[b_full(c, i)] -= c->hdiag[i];
    for (int j = 0; j < d; j++) {
        dg[j] += c->s1;
        dg[d + j] += c->s2;
        for (int k = 0; k < j; k++) dg[2 * d + ghf__se_tri(j, k)] -= c->M[j * d + j] + c->M[k * d + k];
        dg[2 * d + ghf__se_tri(j, j)] -= c->M[j * d + j];
    }
    if (c->has_sub) {
        const ghf_gig_stats *g = &c->prior;
        dg[c->ip] += N * g->h11 - c->spp;
        dg[c->ia] += N * 0.25 * g->h33 - c->saa;
        dg[c->ib] += N * 0.25 * g->h22;
    }
    const double dpv = pv >= 0 ? dg[pv] : 0.0;
    for (int i = 0; i < kf; i++) {
        dg[i] += cv[i] * cv[i] * dpv;
        dg[i] = c->fidx[i] < 0 || i == pv ? 1.0 : (dg[i] > 0.0 && isfinite(dg[i]) ? dg[i] : 1.0);
    }
}

/* Q = W P = T^T I T P for s columns of full coordinates (fixed ones and
 * the eliminated one zero).  Collective. */
static int w_apply(MPI_Comm comm, ghf__se_ctx *c, int pv, const double *cv, double *P, int s, double *PB,
                   double *YB, double *Q)
{
    const int kB = c->kB, kf = c->kfull, d = c->d;
    for (int j = 0; j < s; j++) expand(c, pv, cv, P + (size_t)j * kf);
    for (int j = 0; j < s; j++)
        for (int i = 0; i < kB; i++) PB[(size_t)j * kB + i] = P[(size_t)j * kf + b_full(c, i)];
    if (ghf__se_heavy_apply(comm, c, PB, s, YB) != 0) return -1;
    int fail = 0;
#pragma omp parallel num_threads(c->nthreads)
    {
        double *scr = malloc((size_t)2 * d * d * sizeof(double));
        if (!scr) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int j = 0; j < s; j++) {
            if (!scr) continue;
            const double *p = P + (size_t)j * kf;
            double *q = Q + (size_t)j * kf;
            memset(q, 0, (size_t)kf * sizeof(double));
            ghf__se_struct_apply(c, p, q, scr);
            for (int i = 0; i < kB; i++) q[b_full(c, i)] += YB[(size_t)j * kB + i];
            for (int i = 0; i < kf; i++) q[i] = c->fidx[i] < 0 ? 0.0 : -q[i];
            fold(c, pv, cv, q);
        }
        free(scr);
    }
    for (int j = 0; j < s && pv >= 0; j++) P[(size_t)j * kf + pv] = 0.0;
    return ghf_any(comm, fail) ? -1 : 0;
}

static double dotv(const double *a, const double *b, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* the iteration; X = W^-1 F on return (0), or -1 (why) */
static int pcg(MPI_Comm comm, ghf__se_ctx *c, int pv, const double *cv, const double *F, int s, double *X,
               double *work, char *why, size_t whylen)
{
    const int kf = c->kfull, kB = c->kB;
    const size_t n = (size_t)kf * s;
    double *R = work, *Z = R + n, *P = Z + n, *Q = P + n, *dg = Q + n, *PB = dg + kf, *YB = PB + (size_t)kB * s;
    double *sc = YB + (size_t)kB * s; /* [3 s + 1]: rz, alpha/beta, done flags, stop */
    double *rz = sc, *ab = sc + s, *done = sc + 2 * s;
    w_diag(c, pv, cv, dg);
    memset(X, 0, n * sizeof(double));
    memcpy(R, F, n * sizeof(double));
    double *r0 = malloc((size_t)s * sizeof(double));
    if (!r0) return -1;
    for (int j = 0; j < s; j++) {
        for (int i = 0; i < kf; i++) Z[(size_t)j * kf + i] = R[(size_t)j * kf + i] / dg[i];
        rz[j] = dotv(R + (size_t)j * kf, Z + (size_t)j * kf, kf);
        r0[j] = sqrt(fabs(rz[j]));
        done[j] = !(r0[j] > 0.0);
    }
    memcpy(P, Z, n * sizeof(double));
    int rank, it, rc = -1;
    MPI_Comm_rank(comm, &rank);
    for (it = 0; it < SE_CG_MAXIT; it++) {
        if (w_apply(comm, c, pv, cv, P, s, PB, YB, Q) != 0) {
            snprintf(why, whylen, "out of memory in the iterative solve");
            break;
        }
        /* rank 0 decides: alpha per column */
        for (int j = 0; j < s; j++) {
            const double pq = dotv(P + (size_t)j * kf, Q + (size_t)j * kf, kf);
            ab[j] = done[j] ? 0.0 : rz[j] / pq;
            if (!done[j] && !(pq > 0.0)) ab[j] = NAN;
        }
        MPI_Bcast(ab, s, MPI_DOUBLE, 0, comm);
        int indef = 0;
        for (int j = 0; j < s; j++) indef |= isnan(ab[j]);
        if (indef) {
            snprintf(why, whylen, "the observed information is not positive definite: the point is not a strict "
                     "maximum of the likelihood");
            break;
        }
        int left = 0;
        for (int j = 0; j < s; j++) {
            if (done[j]) continue;
            double *x = X + (size_t)j * kf, *r = R + (size_t)j * kf, *z = Z + (size_t)j * kf;
            const double *p = P + (size_t)j * kf, *q = Q + (size_t)j * kf;
            for (int i = 0; i < kf; i++) {
                x[i] += ab[j] * p[i];
                r[i] -= ab[j] * q[i];
                z[i] = r[i] / dg[i];
            }
            const double rzn = dotv(r, z, kf);
            ab[j] = rzn / rz[j]; /* beta */
            rz[j] = rzn;
            done[j] = sqrt(fabs(rzn)) <= SE_CG_TOL * r0[j];
            left += !done[j];
        }
        sc[3 * s] = left;
        MPI_Bcast(sc, 3 * s + 1, MPI_DOUBLE, 0, comm); /* rz, beta, done, left from rank 0 */
        if (sc[3 * s] == 0.0) {
            rc = 0;
            break;
        }
        for (int j = 0; j < s; j++) {
            if (done[j]) {
                memset(P + (size_t)j * kf, 0, (size_t)kf * sizeof(double));
                continue;
            }
            double *p = P + (size_t)j * kf;
            const double *z = Z + (size_t)j * kf;
            for (int i = 0; i < kf; i++) p[i] = z[i] + ab[j] * p[i];
        }
        if (c->is_root && MPI_Wtime() - c->t_start >= 10.0 && MPI_Wtime() - c->t_last_print >= 60.0) {
            c->t_last_print = MPI_Wtime();
            printf("ghfit: %s: standard errors: conjugate-gradient iteration %d, %d of %d columns left, %.0f s\n",
                   c->label ? c->label : "fit", it + 1, left, s, MPI_Wtime() - c->t_start);
            fflush(stdout);
        }
    }
    c->cg_iter = it + 1;
    if (rc != 0 && it == SE_CG_MAXIT)
        snprintf(why, whylen, "the iterative solve did not converge in %d iterations (an ill-conditioned "
                 "information)", SE_CG_MAXIT);
    free(r0);
    return rc;
}

int ghf__se_subset_solve(MPI_Comm comm, ghf__se_ctx *c, const double *F, int s, double *cov, char *why,
                         size_t whylen)
{
    const int kf = c->kfull, kB = c->kB;
    const size_t n = (size_t)kf * s;
    double *cv = malloc((size_t)kf * sizeof(double));
    double *X = malloc(n * sizeof(double)), *Ft = malloc(n * sizeof(double));
    double *work = malloc((4 * n + kf + 2 * (size_t)kB * s + 3 * (size_t)s + 1) * sizeof(double));
    if (ghf_any(comm, !cv || !X || !Ft || !work)) {
        free(cv), free(X), free(Ft), free(work);
        snprintf(why, whylen, "out of memory for the iterative solve");
        return -1;
    }
    const int pv = gauge_pivot(c, cv);
    memcpy(Ft, F, n * sizeof(double));
    for (int j = 0; j < s; j++) { /* the right-hand sides T^T f */
        double *f = Ft + (size_t)j * kf;
        for (int i = 0; i < kf; i++)
            if (c->fidx[i] < 0) f[i] = 0.0;
        fold(c, pv, cv, f);
    }
    const int rc = pcg(comm, c, pv, cv, Ft, s, X, work, why, whylen);
    if (rc == 0)
        for (int a = 0; a < s; a++)
            for (int b = 0; b < s; b++)
                cov[(size_t)a * s + b] = 0.5 * (dotv(Ft + (size_t)a * kf, X + (size_t)b * kf, kf) +
                                                dotv(Ft + (size_t)b * kf, X + (size_t)a * kf, kf));
    free(cv), free(X), free(Ft), free(work);
    return rc;
}
