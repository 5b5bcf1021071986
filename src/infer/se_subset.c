/* se_subset.c - standard errors without forming the information matrix
 * (the subset method, for many parameters): F^T V F for a few functionals F
 * of the parameters, V the gauge-fixed inverse information, by
 * preconditioned conjugate gradients on the bordered information
 *     W = I + s c c^T      (c the gradient of log|Sigma|, I t = 0, c.t = d)
 * with every right-hand side in lockstep: one pass over the rows per
 * iteration applies the row part to all of them (se_pass.c), and
 *     F^T V F = F^T W^-1 F - (F^T t)(t^T F) / (s (c.t)^2).
 * In the whitened frame (se_int.h) W is close to a multiple of the identity
 * block by block, and its diagonal is the preconditioner.  Every rank runs
 * the same iteration; rank 0 decides (its scalars are broadcast). */
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

/* The diagonal of W (an approximation: the cross terms of the global
 * directions P, A are left out), made positive: the preconditioner. */
static void w_diag(const ghf__se_ctx *c, const double *cv, double sb, double *dg)
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
    for (int i = 0; i < kf; i++) {
        dg[i] += sb * cv[i] * cv[i];
        dg[i] = c->fidx[i] < 0 ? 1.0 : (dg[i] > 0.0 && isfinite(dg[i]) ? dg[i] : 1.0);
    }
}

/* Q = W P for s columns of full coordinates (fixed ones zero). Collective. */
static int w_apply(MPI_Comm comm, ghf__se_ctx *c, const double *cv, double sb, const double *P, int s, double *PB,
                   double *YB, double *Q)
{
    const int kB = c->kB, kf = c->kfull, d = c->d;
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
            double cp = 0.0;
            for (int i = 0; i < kf; i++) cp += cv[i] * p[i];
            for (int i = 0; i < kf; i++) q[i] = c->fidx[i] < 0 ? 0.0 : -q[i] + sb * cv[i] * cp;
        }
        free(scr);
    }
    return ghf_any(comm, fail) ? -1 : 0;
}

static double dotv(const double *a, const double *b, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* the iteration; X = W^-1 F on return (0), or -1 (why) */
static int pcg(MPI_Comm comm, ghf__se_ctx *c, const double *cv, double sb, const double *F, int s, double *X,
               double *work, char *why, size_t whylen)
{
    const int kf = c->kfull, kB = c->kB;
    const size_t n = (size_t)kf * s;
    double *R = work, *Z = R + n, *P = Z + n, *Q = P + n, *dg = Q + n, *PB = dg + kf, *YB = PB + (size_t)kB * s;
    double *sc = YB + (size_t)kB * s; /* [3 s + 1]: rz, alpha/beta, done flags, stop */
    double *rz = sc, *ab = sc + s, *done = sc + 2 * s;
    w_diag(c, cv, sb, dg);
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
        if (w_apply(comm, c, cv, sb, P, s, PB, YB, Q) != 0) {
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
    double *cv = malloc((size_t)2 * kf * sizeof(double));
    double *X = malloc(n * sizeof(double));
    double *work = malloc((4 * n + kf + 2 * (size_t)kB * s + 3 * (size_t)s + 1) * sizeof(double));
    if (ghf_any(comm, !cv || !X || !work)) {
        free(cv), free(X), free(work);
        snprintf(why, whylen, "out of memory for the iterative solve");
        return -1;
    }
    double *tv = cv + kf;
    const int orbit = ghf__se_gauge(c, cv, tv);
    for (int i = 0; i < kf; i++)
        if (c->fidx[i] < 0) cv[i] = tv[i] = 0.0;
    /* s_b: the constraint direction gets about the information's scale */
    double cc = 0.0, ct = 0.0, dI = 0.0;
    for (int i = 0; i < kf; i++) {
        cc += cv[i] * cv[i];
        ct += cv[i] * tv[i];
    }
    for (int j = 0; j < c->d; j++) dI += fabs(c->M[j * c->d + j]) + c->hdiag[c->d + ghf__se_tri(j, j)];
    const double sb = orbit && cc > 0.0 ? fmax(dI / c->d, 1.0) / cc : 0.0;
    const int rc = pcg(comm, c, cv, sb, F, s, X, work, why, whylen);
    if (rc == 0) {
        const double tt = sb > 0.0 ? 1.0 / (sb * ct * ct) : 0.0;
        for (int a = 0; a < s; a++) {
            const double fta = dotv(F + (size_t)a * kf, tv, kf);
            for (int b = 0; b < s; b++) {
                const double ftb = dotv(F + (size_t)b * kf, tv, kf);
                cov[(size_t)a * s + b] = 0.5 * (dotv(F + (size_t)a * kf, X + (size_t)b * kf, kf) +
                                                dotv(F + (size_t)b * kf, X + (size_t)a * kf, kf)) -
                                         tt * fta * ftb;
            }
        }
    }
    free(cv), free(X), free(work);
    return rc;
}
