/* em_step.c - one E-step (through the backend), one M-step, and the plain
 * EM step of the loop: the checks at the edges of the parameter space and
 * the convergence test (em_internal.h). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "em_internal.h"
#include "gig.h"
#include "mstep.h"

/* E-step at t.  Returns 0, -1 if Sigma is not positive definite (no
 * collective call was made: every rank reaches the same verdict), or 1 on a
 * run-time error. */
int ghf__em_estep(em_ctx *e, const ghf_params *t, int stop_req, char *err, size_t errlen)
{
    if (ghf_derive(t, &e->g) != 0) return -1;
    if (e->o->beat) e->o->beat(e->o->beat_arg);
    ghf_estep_input in;
    in.d = e->d;
    in.mu = t->mu;
    in.linv = e->g.Linv;
    in.w = e->g.w;
    in.c = e->g.c;
    in.stop_request = stop_req;
    if (e->be->estep(e->be, &in, e->stats, err, errlen)) return 1;
    if (e->o->has_missing && ghf_missing_estep(e->comm, e->o->missing, t, 1, e->stats, err, errlen)) return 1;
    return 0;
}

int ghf_em_loglik_unweighted(MPI_Comm comm, ghf_backend *be, const ghf_missing *miss, int has_missing,
                             const ghf_params *t, double *ll, char *err, size_t errlen)
{
    const int d = t->d;
    ghf_derived g;
    double *stats = malloc((size_t)ghf_stats_len(d) * sizeof(double));
    int fail = ghf_derived_alloc(&g, d) != 0 || !stats;
    if (fail) snprintf(err, errlen, "out of memory");
    if (ghf_any(comm, fail)) {
        if (!fail) ghf_derived_free(&g);
        free(stats);
        return 1;
    }
    int rc = -1;
    *ll = NAN;
    if (ghf_derive(t, &g) == 0) {
        ghf_estep_input in = {d, t->mu, g.Linv, g.w, g.c, 0};
        const double *w = be->weights;
        be->weights = NULL;
        rc = be->estep(be, &in, stats, err, errlen) ? 1 : 0;
        be->weights = w;
        if (rc == 0 && has_missing) rc = ghf_missing_estep(comm, miss, t, 0, stats, err, errlen) ? 1 : 0;
        if (rc == 0) *ll = stats[GHF_ST_NBAD] == 0 ? stats[GHF_ST_LL] : NAN;
    }
    ghf_derived_free(&g);
    free(stats);
    return rc;
}

/* 1 if the last E-step gave a finite log-likelihood at every row */
int ghf__em_estep_ok(const em_ctx *e)
{
    return e->stats[GHF_ST_NBAD] == 0 && isfinite(e->stats[GHF_ST_LL]);
}

/* M-step plus the |Sigma| = 1 gauge.  Returns the M-step status
 * (GHF_MSTEP_GAUSS: the Gaussian limit, for the caller to handle). */
int ghf__em_mstep(em_ctx *e, const ghf_params *cur, ghf_params *next, char *why, size_t whylen)
{
    const ghf_mstep_status ms = ghf_mstep(&e->model, &e->mo, e->stats, cur, next, why, whylen);
    if (ms != GHF_MSTEP_OK) return (int)ms;
    if (ghf_derive(next, &e->g) != 0) {
        snprintf(why, whylen, "boundary: Sigma is no longer positive definite (the fit collapses onto tied or collinear observations)");
        return GHF_MSTEP_BOUNDARY;
    }
    ghf_params_normalize(next, e->g.logdet);
    if (sqrt(next->a) * sqrt(next->b) > GHF_OMEGA_MAX) {
        /* Y is then a constant to within 1e-4 relative: the data are
         * indistinguishable from Gaussian */
        snprintf(why, whylen, "boundary: sqrt(ab) -> infinity (the Gaussian limit: the mixing variable degenerates)");
        return GHF_MSTEP_GAUSS;
    }
    if (!ghf_params_finite(next)) {
        snprintf(why, whylen, "non-finite parameters after the M-step");
        return GHF_MSTEP_FAILED;
    }
    return GHF_MSTEP_OK;
}

void ghf__em_finish(ghf_em_result *r, const ghf_params *t, double ll, int n_iter, const double *trace,
                   ghf_em_outcome oc, const char *status)
{
    ghf_params_copy(&r->params, t);
    r->loglik = ll;
    r->n_iter = n_iter;
    r->outcome = oc;
    r->converged = oc == GHF_EM_CONVERGED;
    snprintf(r->status, sizeof r->status, "%s", status);
    r->n_trace = n_iter + 1;
    memcpy(r->trace, trace, (size_t)r->n_trace * sizeof(double));
}

/* The M-step from the current iterate st.cur (log-likelihood ll, statistics
 * in e->stats); the fit ends at a boundary (the Gaussian limit included:
 * ghf_em_fit then compares it with the family's near-Gaussian point). */
em_next ghf__em_mstep_from_cur(em_loop *L, ghf_em_result *r, double ll)
{
    em_ctx *e = L->e;
    ghf_em_state *st = &L->st;
    const int k = st->iter;
    char why[256];
    const double tm = MPI_Wtime();
    const int ms = ghf__em_mstep(e, &st->cur, &L->nx, why, sizeof why);
    r->t_mstep += MPI_Wtime() - tm;
    if (ms == GHF_MSTEP_OK) return EM_GO_ON;
    if (ms == GHF_MSTEP_GAUSS)
        ghf__em_finish(r, &st->cur, ll, k, st->trace, GHF_EM_BOUNDARY, ghf__em_gauss_limit_status);
    else
        ghf__em_finish(r, &st->cur, ll, k, st->trace, ms == GHF_MSTEP_BOUNDARY ? GHF_EM_BOUNDARY : GHF_EM_FAILED, why);
    return EM_DONE;
}

/* One plain EM step at st.cur (E-step just done with result erc). */
em_next ghf__em_step_plain(em_loop *L, ghf_em_result *r, int erc)
{
    em_ctx *e = L->e;
    const ghf_em_opts *o = e->o;
    ghf_em_state *st = &L->st;
    const int k = st->iter;
    char why[320];
    if (erc == -1) {
        if (k == 0)
            ghf__em_finish(r, &st->cur, -INFINITY, 0, st->trace, GHF_EM_FAILED, "failed: the starting Sigma is not positive definite");
        else
            ghf__em_finish(r, &st->prev, st->trace[k - 1], k - 1, st->trace, GHF_EM_BOUNDARY, "boundary: Sigma is no longer positive definite");
        return EM_DONE;
    }
    const double ll = e->stats[GHF_ST_LL];
    if (!ghf__em_estep_ok(e)) {
        if (k == 0) {
            snprintf(why, sizeof why, "failed: the log-density is not finite at %.0f observations of the starting point",
                     e->stats[GHF_ST_NBAD]);
            ghf__em_finish(r, &st->cur, -INFINITY, 0, st->trace, GHF_EM_FAILED, why);
        } else {
            snprintf(why, sizeof why, "boundary: the log-density became non-finite at %.0f observations (unbounded likelihood?)",
                     e->stats[GHF_ST_NBAD]);
            ghf__em_finish(r, &st->prev, st->trace[k - 1], k - 1, st->trace, GHF_EM_BOUNDARY, why);
        }
        return EM_DONE;
    }
    /* The rounding error of the log-likelihood is about eps sum |zw|: zw
     * cancels against R - sqrt(AB) when the skewness explains a direction
     * whose dispersion vanishes, or a gross outlier (the other large terms
     * are formed without cancellation, see ghf_estep_point).  Past 1e-12
     * relative (the monotonicity guarantee, and the SQUAREM margin's scale)
     * the fit ends at the last iterate whose log-likelihood was still exact
     * to that level. */
    if (k > 0 && 4.0 * DBL_EPSILON * e->stats[GHF_ST_ZWABS] > 1e-12 * fmax(1.0, fabs(ll))) {
        ghf__em_finish(r, &st->prev, st->trace[k - 1], k - 1, st->trace, GHF_EM_BOUNDARY, ghf__em_precision_status);
        return EM_DONE;
    }
    st->trace[k] = ll;
    double dll = 0.0, dpar = INFINITY;
    if (k > 0) {
        dll = (ll - st->trace[k - 1]) / fmax(1.0, fabs(ll));
        dpar = ghf_param_change(&st->cur, &st->prev);
        if (dll < -1e-12) r->n_decrease++;
    }
    if (L->print)
        printf("%siter %5d  loglik % .15e  dll % .3e  dpar %.3e  %.4f s\n", ghf__em_line_prefix(L), k, ll, dll, k > 0 ? dpar : 0.0,
               MPI_Wtime() - L->t_it);
    if (ghf__em_collapsing(e, st, k, e->stats[GHF_ST_N], why, sizeof why)) {
        ghf__em_finish(r, &st->cur, ll, k, st->trace, GHF_EM_BOUNDARY, why);
        return EM_DONE;
    }
    if (k > 0 && ghf__em_kappa_of(&st->cur) < GHF_KAPPA_LIMIT) {
        ghf__em_finish(r, &st->cur, ll, k, st->trace, GHF_EM_BOUNDARY,
               ghf__em_gauss_limit_status);
        return EM_DONE;
    }
    if (k > 0 && fabs(dll) < o->tol && (dpar < o->tol || o->ll_stop || ghf__em_flat(st, k, o->tol))) {
        if (ghf__em_kappa_of(&st->cur) < GHF_KAPPA_LIMIT)
            ghf__em_finish(r, &st->cur, ll, k, st->trace, GHF_EM_BOUNDARY,
                   ghf__em_gauss_limit_status);
        else
            ghf__em_finish(r, &st->cur, ll, k, st->trace, GHF_EM_CONVERGED,
                   dpar < o->tol || ghf__em_on_face(&e->model, &st->cur) ? ghf__em_converged_status(&e->model, &st->cur)
                                                                          : ghf__em_flat_status);
        return EM_DONE;
    }
    if (k >= L->max_iter) {
        ghf__em_finish(r, &st->cur, ll, k, st->trace, GHF_EM_MAX_ITER,
               L->max_iter == 0 ? "max_iter: no iterations requested" : "max_iter: iteration limit reached before convergence");
        return EM_DONE;
    }
    const em_next nx = ghf__em_mstep_from_cur(L, r, ll);
    if (nx != EM_GO_ON) return nx;
    if (L->phase == PH_CYCLE_START) {
        ghf_params_copy(&st->prev, &st->cur);
        ghf_params_copy(&st->cur, &L->nx);
        st->iter = k + 1;
        L->phase = o->accel ? PH_SECOND_STEP : PH_CYCLE_START;
        return EM_GO_ON;
    }
    /* second step: st.prev = theta_k, st.cur = theta_{k+1}, nx = theta_{k+2} */
    L->ll_th1 = ll;
    ghf_params_copy(&L->th2, &L->nx);
    const int ok = ghf__em_squarem_point(&st->prev, &st->cur, &L->th2, ghf_model_fixed_p(&e->model, e->d), 0.0, &L->thx, &L->sq_alpha) == 0 && ghf_derive(&L->thx, &e->g) == 0;
    ghf_params_copy(&st->prev, &st->cur);
    ghf_params_copy(&st->cur, &L->th2);
    st->iter = k + 1;
    if (ok) {
        /* evaluate theta' as the candidate for iterate k + 1 (theta_2 otherwise) */
        ghf_params_normalize(&L->thx, e->g.logdet);
        L->phase = PH_EXTRAPOLATED;
    } else {
        L->phase = PH_CYCLE_START;
    }
    return EM_GO_ON;
}
