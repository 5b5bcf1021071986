/* em.c - the distributed EM driver (see em.h): the loop of ghf_em_fit over
 * E-steps and its named steps (em_internal.h lists the files). */
#include "em.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agree.h"
#include "em_internal.h"
#include "gig.h"
#include "mstep.h"

const char ghf__em_precision_status[] =
    "boundary: the numerical limit (beyond this point the log-likelihood cannot be evaluated to 1e-12: the skewness "
    "explains a direction or a few gross outliers with a mixing variable far larger than the rest's)";
const char ghf__em_flat_status[] =
    "converged (the log-likelihood no longer changes; the parameters still drift along a weakly identified direction)";
const char ghf__em_gauss_limit_status[] =
    "boundary: the Gaussian limit (the mixing variable degenerates to a constant: the data are no heavier-tailed "
    "than normal)";

void ghf_em_opts_defaults(ghf_em_opts *o)
{
    memset(o, 0, sizeof *o);
    o->family = GHF_FAMILY_GH;
    o->max_iter = GHF_DEFAULT_MAX_ITER;
    o->tol = GHF_DEFAULT_TOL;
    o->seed = 1;
    o->n_starts = GHF_DEFAULT_STARTS;
    o->start_iters = GHF_DEFAULT_START_ITERS;
    o->label = "";
    o->accel = 1;
    o->ll_gauss = NAN;
}

int ghf_em_state_alloc(ghf_em_state *s, int d, int max_iter)
{
    memset(s, 0, sizeof *s);
    s->trace_cap = max_iter + 2;
    s->trace = calloc((size_t)s->trace_cap, sizeof(double));
    if (!s->trace || ghf_params_alloc(&s->cur, d) || ghf_params_alloc(&s->prev, d)) {
        ghf_em_state_free(s);
        return -1;
    }
    return 0;
}

void ghf_em_state_free(ghf_em_state *s)
{
    free(s->trace);
    s->trace = NULL;
    ghf_params_free(&s->cur);
    ghf_params_free(&s->prev);
}

void ghf_em_result_free(ghf_em_result *r)
{
    ghf_params_free(&r->params);
    free(r->trace);
    r->trace = NULL;
}

static double norm2(const double *x, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) s += x[i] * x[i];
    return sqrt(s);
}

static double diff2(const double *x, const double *y, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (x[i] - y[i]) * (x[i] - y[i]);
    return sqrt(s);
}

double ghf_param_change(const ghf_params *a, const ghf_params *b)
{
    const int d = a->d;
    double tr = 0.0;
    for (int i = 0; i < d; i++) tr += b->sigma[i * d + i];
    const double scale = sqrt(fabs(tr) / d);
    double c = 0.0;
    c = fmax(c, diff2(a->mu, b->mu, d) / (norm2(b->mu, d) + scale));
    c = fmax(c, diff2(a->gamma, b->gamma, d) / (norm2(b->gamma, d) + scale));
    c = fmax(c, diff2(a->sigma, b->sigma, d * d) / norm2(b->sigma, d * d));
    c = fmax(c, fabs(a->p - b->p) / fmax(1.0, fabs(b->p)));
    /* relative changes of a and b; 0 when both are on the face (a = 0 or b = 0) */
    const double da = fmax(fabs(a->a), fabs(b->a)), db = fmax(fabs(a->b), fabs(b->b));
    if (da > 0) c = fmax(c, fabs(a->a - b->a) / da);
    if (db > 0) c = fmax(c, fabs(a->b - b->b) / db);
    return isfinite(c) ? c : INFINITY;
}

/* ---------------------------------------------------------------------------
 * The loop
 * ------------------------------------------------------------------------- */

const char *ghf__em_line_prefix(em_loop *L)
{
    const ghf_em_opts *o = L->e->o;
    if (!o->log_time) return L->lab;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tmv;
    gmtime_r(&ts.tv_sec, &tmv);
    char t[32];
    strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tmv);
    snprintf(L->pre, sizeof L->pre, "%s.%03ldZ %s", t, ts.tv_nsec / 1000000L, L->lab);
    return L->pre;
}

static int loop_alloc(em_loop *L, int d)
{
    return ghf_params_alloc(&L->nx, d) || ghf_params_alloc(&L->th2, d) || ghf_params_alloc(&L->thx, d) || ghf_params_alloc(&L->thy, d) ||
           ghf_params_alloc(&L->cyc_cur, d) || ghf_params_alloc(&L->cyc_prev, d) || ghf_params_alloc(&L->gauss, d);
}

static void loop_free(em_loop *L)
{
    ghf_params_free(&L->nx);
    ghf_params_free(&L->th2);
    ghf_params_free(&L->thx);
    ghf_params_free(&L->thy);
    ghf_params_free(&L->cyc_cur);
    ghf_params_free(&L->cyc_prev);
    ghf_params_free(&L->gauss);
}

/* Signals: hand over the state of the current cycle's start, end the fit. */
static em_next stop_requested(em_loop *L, ghf_em_result *r, char *err, size_t errlen)
{
    const ghf_em_opts *o = L->e->o;
    ghf_em_state *st = &L->st;
    st->iter = L->cyc_iter;
    ghf_params_copy(&st->cur, &L->cyc_cur);
    if (L->cyc_iter > 0) ghf_params_copy(&st->prev, &L->cyc_prev);
    if (o->on_state && o->on_state(o->on_state_ctx, st, 1) != 0) {
        snprintf(err, errlen, "writing the checkpoint failed");
        return EM_ERROR;
    }
    ghf__em_finish(r, &st->cur, L->cyc_iter > 0 ? st->trace[L->cyc_iter - 1] : NAN, L->cyc_iter > 0 ? L->cyc_iter - 1 : 0,
           st->trace, GHF_EM_INTERRUPTED, "interrupted: stop requested (signal)");
    r->n_iter = L->cyc_iter;
    return EM_DONE;
}

/* A fit of data with gross outliers that ends at a boundary (other than
 * the Gaussian limit), fails, or reaches the iteration limit: the status
 * names the most extreme row, the usual cause (its log-density dwarfs the
 * others', or its mixing variable dominates the statistics and EM crawls). */
static void name_outlier(const ghf_em_opts *o, ghf_em_result *r)
{
    if (!o->outlier_note) return;
    if (!(r->outcome == GHF_EM_BOUNDARY || r->outcome == GHF_EM_FAILED || (r->outcome == GHF_EM_MAX_ITER && r->n_iter > 0)))
        return;
    if (strcmp(r->status, ghf__em_gauss_limit_status) == 0) return;
    const size_t n = strlen(r->status);
    snprintf(r->status + n, sizeof r->status - n, "; gross outlier: %s", o->outlier_note);
}

int ghf_em_fit(MPI_Comm comm, ghf_backend *be, int d, const ghf_em_opts *o, ghf_em_result *r,
               char *err, size_t errlen)
{
    const double t_start = MPI_Wtime();
    memset(r, 0, sizeof *r);
    em_ctx e;
    memset(&e, 0, sizeof e);
    e.comm = comm;
    e.be = be;
    e.o = o;
    e.d = d;
    e.len = ghf_stats_len(d);
    e.model.family = o->family;
    e.model.symmetric = o->symmetric;
    e.model.fix_p = o->fix_p;
    e.model.p = o->p_fixed;
    e.mo.p_max = 0.0; /* the family's */
    MPI_Comm_rank(comm, &e.rank);
    em_loop L;
    memset(&L, 0, sizeof L);
    L.e = &e;
    L.max_iter = o->max_iter < 0 ? 0 : o->max_iter;
    L.print = !o->quiet && e.rank == 0;
    L.lab = o->label ? o->label : "";
    L.err = err;
    L.errlen = errlen;
    ghf_em_state *st = &L.st;
    int rc = 0;
    double be_e0 = be->t_estep, be_a0 = be->t_allreduce;
    e.stats = calloc((size_t)e.len, sizeof(double));
    e.saved = calloc((size_t)e.len, sizeof(double));
    r->trace = calloc((size_t)L.max_iter + 2, sizeof(double));
    int fail = !e.stats || !e.saved || !r->trace || ghf_derived_alloc(&e.g, d) || ghf_params_alloc(&r->params, d) ||
               ghf_em_state_alloc(st, d, L.max_iter) || loop_alloc(&L, d) ||
               (o->family == GHF_FAMILY_GH && !o->fix_p && !o->no_nested && ghf_em_state_alloc(&e.nig_st, d, L.max_iter));
    if (fail) snprintf(err, errlen, "out of memory (EM state, d = %d)", d);
    if (ghf_test_fail("alloc", err, errlen)) fail = 1;
    if (ghf_agree(comm, fail, err, errlen)) { /* every rank leaves before the first E-step */
        rc = 1;
        goto out;
    }
    if (ghf_family_get(o->family)->sub == GHF_SUB_NONE) {
        ghf__em_gaussian_fit(&e, r);
        goto out;
    }
    {
        const int src = ghf__em_start_state(&e, st, L.max_iter, r, err, errlen);
        if (src != 0) {
            rc = src < 0 ? 0 : src;
            goto out;
        }
    }
    /* the starts' E-steps belong to the init phase; estep/allreduce count the main loop only */
    r->t_init = MPI_Wtime() - t_start;
    be_e0 = be->t_estep;
    be_a0 = be->t_allreduce;

    /* --- the loop ---
     * Plain EM: E-step at theta_k (its log-likelihood and statistics), the
     * checks at the edges of the parameter space, the convergence test
     * against theta_{k-1}, M-step.  With SQUAREM (Varadhan and Roland 2008,
     * scheme S3) every cycle takes two plain steps theta_k -> theta_{k+1} ->
     * theta_2, extrapolates theta' = theta_k - 2 alpha r + alpha^2 v
     * (r = theta_{k+1} - theta_k, v = theta_2 - 2 theta_{k+1} + theta_k,
     * alpha = -|r|/|v| clamped to [-GHF_SQ_MAX_STEP, -1]) in the coordinates
     * (mu, gamma, Sigma, p, log a, log b), and keeps theta' only if its
     * log-likelihood is at least that of theta_{k+1} (less 1e-13 relative);
     * otherwise the cycle ends at theta_2 as plain EM would.  The accepted
     * iterates therefore never lose likelihood beyond 1e-13 relative.  Cycles
     * carry no memory, and every check decides on (theta_k, theta_{k-1}, the
     * trace), so the state at a cycle start (what on_state sees) is all a
     * resumed run needs to repeat the same arithmetic.  With a gross outlier
     * (o->outlier_note) an accepted theta' is improved further within its
     * cycle: longer steps, the size of gamma (em_squarem.c, sq_lengthen). */
    L.phase = PH_CYCLE_START;
    L.cyc_iter = st->iter;
    L.ll_th1 = -INFINITY;
    for (em_next nx = EM_GO_ON; nx == EM_GO_ON;) {
        const int k = st->iter;
        L.t_it = MPI_Wtime();
        if (L.phase == PH_CYCLE_START) {
            /* a cycle boundary: the resumable state */
            L.cyc_iter = k;
            ghf_params_copy(&L.cyc_cur, &st->cur);
            if (k > 0) ghf_params_copy(&L.cyc_prev, &st->prev);
            if (o->on_state && o->on_state(o->on_state_ctx, st, 0) != 0) {
                snprintf(err, errlen, "writing the checkpoint failed");
                rc = 1;
                break;
            }
        }
        const ghf_params *at = L.phase == PH_EXTRAPOLATED ? &L.thx : &st->cur;
        const int stop_req = o->stop_flag ? (*o->stop_flag != 0) : 0;
        const int erc = ghf__em_estep(&e, at, stop_req, err, errlen);
        r->n_estep++;
        if (erc == 1) {
            rc = 1;
            break;
        }
        if (erc == 0 && e.stats[GHF_ST_STOP] > 0)
            nx = stop_requested(&L, r, err, errlen);
        else if (L.phase == PH_EXTRAPOLATED)
            nx = ghf__em_step_extrapolated(&L, r, erc);
        else
            nx = ghf__em_step_plain(&L, r, erc);
        if (nx == EM_ERROR) rc = 1;
    }
    if (rc == 0 && !o->nested_run) rc = ghf__em_against_nig(&L, r, err, errlen);
    if (rc == 0 && !o->nested_run) rc = ghf__em_against_gaussian(&L, r, err, errlen);
    if (rc == 0 && !o->nested_run) name_outlier(o, r);
out:
    ghf__em_sample_close(&e);
    loop_free(&L);
    r->t_estep = be->t_estep - be_e0;
    r->t_allreduce = be->t_allreduce - be_a0;
    r->t_total = MPI_Wtime() - t_start;
    r->n_gig_kept = e.mo.n_kept;
    free(e.stats);
    free(e.saved);
    ghf_derived_free(&e.g);
    ghf_em_state_free(&e.nig_st);
    ghf_em_state_free(st);
    return rc;
}
