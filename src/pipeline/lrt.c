/* lrt.c - see lrt.h */
#include "lrt.h"

#include <gsl/gsl_cdf.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "family.h"
#include "fit.h"

#define MIXTURE "0.5 chi2(0) + 0.5 chi2(1)"

/* two fits are of the same data */
static int same_data(const ghf_lrt_fit *a, const ghf_lrt_fit *b)
{
    if (a->s->n != b->s->n || a->s->d != b->s->d || a->m->n_dropped != b->m->n_dropped) return 0;
    if (a->m->has_data != b->m->has_data) return 0;
    if (!a->m->has_data) return strcmp(a->file, b->file) == 0;
    return strcmp(a->m->data_file, b->m->data_file) == 0 && strcmp(a->m->dataset, b->m->dataset) == 0 &&
           a->m->row_start == b->m->row_start && a->m->row_count == b->m->row_count;
}

/* the p a model holds fixed beyond its family's own (NaN: none) */
static double extra_p(const ghf_lrt_fit *x)
{
    ghf_family f;
    if (ghf_family_parse(x->s->family, &f) != 0) return NAN;
    const ghf_model m = {f, 0, 0, 0.0};
    return isnan(ghf_model_fixed_p(&m, x->s->d)) ? x->m->p_fixed : NAN;
}

static int same_model(const ghf_lrt_fit *a, const ghf_lrt_fit *b)
{
    const double pa = extra_p(a), pb = extra_p(b);
    return strcmp(a->s->family, b->s->family) == 0 && a->m->symmetric == b->m->symmetric &&
           ((isnan(pa) && isnan(pb)) || pa == pb) && a->m->factors == b->m->factors;
}

static const ghf_family_def *def_of(const ghf_lrt_fit *x)
{
    ghf_family f;
    return ghf_family_parse(x->s->family, &f) == 0 ? ghf_family_get(f) : NULL;
}

/* df and reference (NULL: chi2(df)) when r is nested in f directly; 0 if
 * not.  From the family table: the general family is the GIG row whose p
 * is free; a GIG row with p fixed (by the family or by the fit) is one
 * interior restriction of it; a Gamma or inverse-Gamma row is its face
 * b = 0 or a = 0 (a boundary restriction). */
static int nested(const ghf_lrt_fit *r, const ghf_lrt_fit *f, const char **ref)
{
    const ghf_family_def *rd = def_of(r), *fd = def_of(f);
    const double rp = extra_p(r), fp = extra_p(f);
    const int rs = r->m->symmetric, fs = f->m->symmetric, d = r->s->d;
    *ref = NULL;
    if (r->m->factors != f->m->factors) {
        /* the dispersion's forms, the rest alike: diag < factor:R < factor:R' (R < R') < full, df the
         * difference of the parameter counts (B up to rotation); a factor form with as many
         * parameters as full or more is not a restriction of it */
        if (rd != fd || rs != fs || !((isnan(rp) && isnan(fp)) || rp == fp) || rs < 0) return 0;
        const int rk = ghf_disp_nparams(d, r->m->factors), fk = ghf_disp_nparams(d, f->m->factors);
        const int r_inside = f->m->factors < 0 || (r->m->factors >= 0 && r->m->factors < f->m->factors);
        return r_inside && fk > rk ? fk - rk : 0;
    }
    if (!rd || !fd || rs < 0 || fs < 0 || rd->sub == GHF_SUB_NONE || fd->sub == GHF_SUB_NONE) return 0;
    const int r_pfixed = !isnan(rd->family_p(d)) || !isnan(rp);
    if (rd == fd && ((isnan(rp) && isnan(fp)) || rp == fp) && rs && !fs) return d; /* gamma = 0 */
    if (rs != fs) return 0;
    if (fd->sub == GHF_SUB_GIG && isnan(fd->family_p(d)) && isnan(fp)) { /* the general family */
        if (rd->sub == GHF_SUB_GIG && r_pfixed) return 1;
        if ((rd->sub == GHF_SUB_GAMMA || rd->sub == GHF_SUB_INVGAMMA) && isnan(rp)) {
            *ref = MIXTURE;
            return 1;
        }
    }
    if (rd == fd && rd->sub != GHF_SUB_GIG && !isnan(rp) && isnan(fp)) return 1; /* a face's p held fixed */
    return 0;
}

static void model_name(const ghf_lrt_fit *x, char *buf, size_t len)
{
    const double p = extra_p(x);
    int k = snprintf(buf, len, "%s", x->s->family);
    if (x->m->symmetric > 0 && k > 0 && (size_t)k < len) k += snprintf(buf + k, len - (size_t)k, " sym");
    if (!isnan(p) && k > 0 && (size_t)k < len) k += snprintf(buf + k, len - (size_t)k, " p=%g", p);
    if (x->m->factors == 0 && k > 0 && (size_t)k < len) snprintf(buf + k, len - (size_t)k, " diag");
    else if (x->m->factors > 0 && k > 0 && (size_t)k < len) snprintf(buf + k, len - (size_t)k, " f%d", x->m->factors);
}

/* a weighted fit (as the Python lr_tests: loglik_unweighted present and not
 * equal to loglik): its weighted log-likelihood has no chi-square law */
static int weighted(const ghf_lrt_fit *x)
{
    return !isnan(x->m->loglik_unweighted) && x->m->loglik_unweighted != x->s->loglik;
}

/* a mixture (n_components K >= 2): the LR between different K has no
 * chi-square law (the smaller mixture is a boundary point, a proportion 0,
 * where the extra component's parameters are not identified), and between
 * mixtures of other families the nesting of the family table does not hold
 * component by component: not tested */
static int is_mixture(const ghf_lrt_fit *x) { return x->m->n_components >= 2; }

static int usable(const ghf_lrt_fit *x)
{
    return isfinite(x->s->loglik) && strncmp(x->s->status, "failed", 6) != 0 && !weighted(x) && !is_mixture(x);
}

int ghf_lrt_print(FILE *f, const ghf_lrt_fit *fits, int n)
{
    /* the best fit of each model within each data group */
    int *best = malloc((size_t)(n > 0 ? n : 1) * sizeof(int)), nb = 0;
    if (!best) return 0;
    for (int i = 0; i < n; i++) {
        if (!usable(&fits[i])) continue;
        int k = 0;
        while (k < nb && !(same_data(&fits[best[k]], &fits[i]) && same_model(&fits[best[k]], &fits[i]))) k++;
        if (k == nb) best[nb++] = i;
        else if (fits[i].s->loglik > fits[best[k]].s->loglik) best[k] = i;
    }
    int printed = 0, mixture = 0;
    for (int a = 0; a < nb; a++)
        for (int b = 0; b < nb; b++) {
            const ghf_lrt_fit *r = &fits[best[a]], *u = &fits[best[b]];
            const char *ref;
            if (a == b || !same_data(r, u)) continue;
            const int df = nested(r, u, &ref);
            if (!df) continue;
            const double lr = 2.0 * (u->s->loglik - r->s->loglik), s = lr > 0.0 ? lr : 0.0;
            const double pv = ref ? (s > 0.0 ? 0.5 * gsl_cdf_chisq_Q(s, 1.0) : 1.0) : gsl_cdf_chisq_Q(s, (double)df);
            char rn[64], un[64], refb[32];
            model_name(r, rn, sizeof rn);
            model_name(u, un, sizeof un);
            mixture |= ref != NULL;
            if (!ref) {
                snprintf(refb, sizeof refb, "chi2(%d)", df);
                ref = refb;
            }
            if (printed++ == 0)
                fprintf(f, "\nlikelihood-ratio tests (LR = 2 (loglik_full - loglik_restricted); best fit of each "
                           "model per data set)\n  %-22s %-22s %3s %12s %10s  %s\n",
                        "restricted", "full", "df", "LR", "p-value", "reference");
            fprintf(f, "  %-22s %-22s %3d %12.4f %10.3g  %s%s\n", rn, un, df, lr, pv, ref,
                    lr < 0.0 ? "  (the larger model's fit is below the restricted one)" : "");
        }
    if (mixture)
        fprintf(f, "  (%s: a restriction on the boundary of the parameter space; Self and Liang 1987)\n", MIXTURE);
    int n_weighted = 0;
    for (int i = 0; i < n; i++) n_weighted += weighted(&fits[i]);
    if (n_weighted)
        fprintf(f, "%s%d weighted fit%s not tested: a weighted log-likelihood ratio has no chi-square law%s\n",
                printed ? "  (" : "\nlikelihood-ratio tests: ", n_weighted, n_weighted == 1 ? "" : "s",
                printed ? ")" : "");
    int n_mix = 0;
    for (int i = 0; i < n; i++) n_mix += is_mixture(&fits[i]);
    if (n_mix)
        fprintf(f, "%s%d mixture fit%s (n_components >= 2) not tested: the likelihood ratio between different numbers "
                   "of components has no chi-square law (the smaller mixture lies on the boundary, a proportion 0, "
                   "where the extra component is not identified); compare K by BIC or ICL%s\n",
                printed || n_weighted ? "  (" : "\nlikelihood-ratio tests: ", n_mix, n_mix == 1 ? "" : "s",
                printed || n_weighted ? ")" : "");
    free(best);
    return printed;
}
