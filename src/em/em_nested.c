/* em_nested.c - GH's nested NIG start: the NIG fit of the same data, run to
 * a loosened tolerance as a start candidate, and the check at the end of the
 * GH fit that keeps GH at or above the converged NIG fit (em_internal.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "em_internal.h"

/* The options of a nested run of family fam at tolerance tol from init (or
 * from the family's own starts): quiet, no checkpoints, no signals, no
 * end-of-fit comparisons. */
static ghf_em_opts nested_opts(const ghf_em_opts *o, ghf_family fam, double tol, const ghf_params *init)
{
    ghf_em_opts no = *o;
    no.family = fam;
    no.tol = tol;
    no.quiet = 1;
    no.on_state = NULL;
    no.on_state_ctx = NULL;
    no.resume = NULL;
    no.init = init;
    no.stop_flag = NULL;
    no.no_nested = 1;
    no.nested_run = 1;
    return no;
}

/* a nested run that ended with usable parameters */
static int usable(const ghf_em_result *nr)
{
    return (nr->outcome == GHF_EM_CONVERGED || nr->outcome == GHF_EM_MAX_ITER || nr->outcome == GHF_EM_BOUNDARY) &&
           isfinite(nr->loglik) && ghf_params_finite(&nr->params);
}

/* on_state of the nested NIG run: keeps its last cycle-start state (a
 * checkpoint's: a run resumed from it repeats the same arithmetic) */
static int keep_state(void *ctx, const ghf_em_state *st, int stopping)
{
    ghf_em_state *k = ctx;
    if (stopping) return 0;
    k->iter = st->iter;
    ghf_params_copy(&k->cur, &st->cur);
    if (st->iter > 0) ghf_params_copy(&k->prev, &st->prev);
    memcpy(k->trace, st->trace, (size_t)st->iter * sizeof(double));
    return 0;
}

/* The nested NIG run, resumed from its last cycle start and run to the
 * fit's tolerance: the very iterations of the NIG fit at that tolerance
 * (the looser one only stopped it earlier).  Collective; 0 or 1. */
static int continue_nig(em_ctx *e, ghf_em_result *cr, char *err, size_t errlen)
{
    ghf_em_opts no = nested_opts(e->o, GHF_FAMILY_NIG, e->o->tol, NULL);
    no.resume = &e->nig_st;
    return ghf_em_fit(e->comm, e->be, e->d, &no, cr, err, errlen);
}

/* GH with p free nests NIG (p = -1/2): the NIG fit of the same data is one
 * more start candidate (symmetric GH nests symmetric NIG: the same holds).
 * It runs to the tolerance max(tol, GHF_NESTED_TOL), at most max_iter
 * iterations, and when that is looser than the fit's it stops on the
 * log-likelihood change alone (ll_stop: |dll| < 1e-8 relative, whatever the
 * parameters do): SQUAREM reaches the likelihood's optimum long before the
 * parameters settle (at N = 1e6, d = 10 it stops after 7 E-steps where the
 * parameter test took 10, 1.4e-8 relative below the converged NIG fit),
 * about 700 times inside the margin of ghf__em_against_nig (1000 times the
 * tolerance, 1e-5).  On a large data
 * set its starts race on the fit's subsample (em_sample.c).  A looser tolerance
 * only stops a run earlier, so a run that ended otherwise (iteration limit,
 * boundary) is the NIG fit at the fit's tolerance.  When the NIG run is the
 * best start, it is continued to the fit's tolerance first (GH EM from the
 * NIG optimum ends at least as high as it, and near the Gaussian limit it
 * converges far sooner from there than from a point short of it).  When a
 * GH start is better, the capped run's log-likelihood (nig_ll) and last
 * cycle-start state (nig_st) are kept in e for ghf__em_against_nig.  (On data close to Gaussian, GH's own
 * starts can run into a face of the GIG domain while NIG reaches a better
 * interior point: this start keeps GH at or above NIG.) */
int ghf__em_nested_start(em_ctx *e, ghf_params *out, double *best, int *have, char *err, size_t errlen)
{
    const ghf_em_opts *o = e->o;
    if (o->family != GHF_FAMILY_GH || o->fix_p || o->no_nested) return 0;
    const double tol = fmax(o->tol, GHF_NESTED_TOL);
    ghf_em_opts no = nested_opts(o, GHF_FAMILY_NIG, tol, NULL);
    no.sample_be = e->sample; /* its starts on the same subsample (em_sample.c) */
    no.ll_stop = tol > o->tol;
    no.on_state = keep_state;
    no.on_state_ctx = &e->nig_st;
    ghf_em_result nr, cr;
    memset(&cr, 0, sizeof cr);
    int rc = ghf_em_fit(e->comm, e->be, e->d, &no, &nr, err, errlen);
    if (rc == 0 && usable(&nr)) {
        const ghf_em_result *use = &nr;
        const int capped = tol > o->tol && nr.outcome == GHF_EM_CONVERGED;
        if (capped && nr.loglik > *best) {
            rc = continue_nig(e, &cr, err, errlen);
            if (rc == 0 && usable(&cr) && cr.loglik >= nr.loglik) use = &cr;
        }
        if (rc == 0 && use->loglik > *best) {
            *best = use->loglik;
            ghf_params_copy(out, &use->params);
            *have = 1;
        }
        if (rc == 0 && capped && use == &nr) {
            e->nig_ll = nr.loglik;
            e->nested_tol = tol;
        }
    }
    ghf_em_result_free(&cr);
    ghf_em_result_free(&nr);
    return rc;
}

/* Moves the GH fit gr into r (the better fit of the same call). */
static void take_fit(ghf_em_result *r, ghf_em_result *gr)
{
    ghf_params_copy(&r->params, &gr->params);
    r->loglik = gr->loglik;
    r->n_iter = gr->n_iter;
    r->converged = gr->converged;
    r->outcome = gr->outcome;
    snprintf(r->status, sizeof r->status, "%s", gr->status);
    /* both traces hold max_iter + 2 values */
    memcpy(r->trace, gr->trace, (size_t)gr->n_trace * sizeof(double));
    r->n_trace = gr->n_trace;
    r->n_decrease = gr->n_decrease;
    r->n_accel_accepted = gr->n_accel_accepted;
    r->n_accel_rejected = gr->n_accel_rejected;
}

/* GH after a nested NIG start run to a looser tolerance than the fit's: the
 * guarantee is about the converged NIG fit.  When the GH fit ends more than
 * GHF_NESTED_MARGIN * the nested tolerance (relative) above where the NIG
 * run stopped, it is above the converged NIG fit too (the NIG run's
 * remaining gain is far smaller).  Otherwise the NIG run continues from
 * its last cycle start to the fit's tolerance (continue_nig: the NIG fit
 * itself), and if it then ends above the GH fit, GH EM runs
 * once more from it and that fit is returned (EM never loses likelihood, so
 * it ends at least as high as the NIG fit).  Every decision is on
 * all-reduced log-likelihoods: every rank takes the same one. */
int ghf__em_against_nig(em_loop *L, ghf_em_result *r, char *err, size_t errlen)
{
    em_ctx *e = L->e;
    const ghf_em_opts *o = e->o;
    if (!(e->nested_tol > 0.0)) return 0;
    if (!(r->outcome == GHF_EM_CONVERGED || r->outcome == GHF_EM_MAX_ITER || r->outcome == GHF_EM_BOUNDARY)) return 0;
    /* test hooks (GHFIT_TEST_FAIL=nested_continue@RANK or nested_restart@RANK):
     * take the continuation, or also the restart, whatever the numbers say */
    char why[128];
    const int force = ghf_agree(e->comm, ghf_test_fail("nested_restart", why, sizeof why) ? 2 :
                                         ghf_test_fail("nested_continue", why, sizeof why), NULL, 0);
    if (!force && isfinite(r->loglik) && r->loglik >= e->nig_ll + GHF_NESTED_MARGIN * e->nested_tol * fabs(e->nig_ll))
        return 0;
    ghf_em_result nr, gr;
    memset(&gr, 0, sizeof gr);
    int rc = continue_nig(e, &nr, err, errlen);
    r->n_estep += nr.n_estep;
    if (rc == 0 && usable(&nr) && (force == 2 || !(nr.loglik <= r->loglik + GHF_LL_MARGIN * fabs(r->loglik)))) {
        const ghf_em_opts go = nested_opts(o, GHF_FAMILY_GH, o->tol, &nr.params);
        rc = ghf_em_fit(e->comm, e->be, e->d, &go, &gr, err, errlen);
        r->n_estep += gr.n_estep;
        if (rc == 0 && usable(&gr) && !(gr.loglik <= r->loglik)) take_fit(r, &gr);
        if (L->print && rc == 0)
            printf("%sthe nested NIG fit, continued to --tol (loglik % .15e), restarted GH: loglik % .15e\n",
                   ghf__em_line_prefix(L), nr.loglik, gr.loglik);
    } else if (L->print && rc == 0) {
        printf("%sthe nested NIG fit, continued to --tol: loglik % .15e (GH stays above it)\n", ghf__em_line_prefix(L),
               nr.loglik);
    }
    ghf_em_result_free(&gr);
    ghf_em_result_free(&nr);
    return rc;
}
