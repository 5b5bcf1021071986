/* record.c - see record.h */
#include "record.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"

/* ---------------------------------------------------------------------------
 * Records
 * ------------------------------------------------------------------------- */

#define REC_MAGIC 0x6768667265633033LL /* "ghfrec03": with the data identity, device and standard errors */

static void pack_se(ghf_pack *b, const ghf_fit_se *e, int64_t d);

void ghf_rec_pack(ghf_pack *b, int64_t index, const ghf_fit_record *r)
{
    const int64_t d = r->d;
    ghf_pack_i64(b, REC_MAGIC);
    ghf_pack_i64(b, index);
    ghf_pack_str(b, r->name);
    ghf_pack_str(b, r->family);
    ghf_pack_i64(b, r->n_obs);
    ghf_pack_i64(b, d);
    ghf_pack_i64(b, r->n_iter);
    ghf_pack_i64(b, r->converged);
    ghf_pack_str(b, r->status);
    ghf_pack_f64(b, r->loglik);
    ghf_pack_f64(b, r->aic);
    ghf_pack_f64(b, r->bic);
    ghf_pack_f64(b, r->elapsed_s);
    ghf_pack_f64s(b, r->loglik_trace, r->n_trace);
    ghf_pack_f64s(b, r->mu, d);
    ghf_pack_f64s(b, r->gamma, d);
    ghf_pack_f64s(b, r->sigma, d * d);
    ghf_pack_f64(b, r->p);
    ghf_pack_f64(b, r->a);
    ghf_pack_f64(b, r->b);
    ghf_pack_f64s(b, r->mean, d);
    ghf_pack_f64s(b, r->cov, d * d);
    ghf_pack_i64(b, r->n_phases);
    ghf_pack_i64(b, r->n_ranks);
    ghf_pack_f64s(b, r->phase_s, r->phase_s ? (int64_t)r->n_ranks * r->n_phases : 0);
    ghf_pack_str(b, r->backend);
    ghf_pack_i64(b, r->n_dropped);
    ghf_pack_i64(b, r->symmetric);
    ghf_pack_f64(b, r->p_fixed);
    ghf_pack_str(b, r->moments_note);
    ghf_pack_str(b, r->data_file);
    ghf_pack_str(b, r->dataset);
    ghf_pack_i64(b, r->row_start);
    ghf_pack_i64(b, r->row_count);
    ghf_pack_str(b, r->device);
    /* standard errors (a flag, then the block) */
    const ghf_fit_se *e = r->se;
    ghf_pack_i64(b, e ? 1 : 0);
    if (e) pack_se(b, e, d);
    /* weighted EM (a flag, then the block; absent from older records) */
    ghf_pack_i64(b, r->weights ? 1 : 0);
    if (r->weights) {
        ghf_pack_str(b, r->weights);
        ghf_pack_f64(b, r->weight_sum);
        ghf_pack_f64(b, r->n_eff);
        ghf_pack_f64(b, r->loglik_unweighted);
    }
    /* --missing em (a flag, then the block) */
    ghf_pack_i64(b, r->missing ? 1 : 0);
    if (r->missing) {
        ghf_pack_str(b, r->missing);
        ghf_pack_i64(b, r->n_incomplete);
        ghf_pack_f64(b, r->missing_fraction);
        ghf_pack_f64s(b, r->missing_counts, r->missing_counts ? r->n_missing_counts : 0);
    }
    /* the factor form (a flag, then the block; absent from full-form records
     * that end here) */
    if (r->D) {
        ghf_pack_i64(b, 1);
        ghf_pack_i64(b, r->factors);
        ghf_pack_f64s(b, r->B, r->factors > 0 ? d * r->factors : 0);
        ghf_pack_f64s(b, r->D, d);
    } else if (r->n_components > 1) {
        ghf_pack_i64(b, 0);
    }
    /* a mixture (a flag, then the block; absent from single-law records) */
    if (r->n_components > 1) {
        const int64_t K = r->n_components;
        ghf_pack_i64(b, K);
        ghf_pack_f64s(b, r->mix_prop, K);
        ghf_pack_f64s(b, r->mix_mu, K * d);
        ghf_pack_f64s(b, r->mix_gamma, K * d);
        ghf_pack_f64s(b, r->mix_sigma, K * d * d);
        ghf_pack_f64s(b, r->mix_pab, 3 * K);
        ghf_pack_f64s(b, r->mix_mean, K * d);
        ghf_pack_f64s(b, r->mix_cov, K * d * d);
        for (int64_t k = 0; k < K; k++) ghf_pack_str(b, r->mix_note ? r->mix_note[k] : NULL);
        ghf_pack_f64(b, r->icl);
        const int64_t S = r->n_starts;
        ghf_pack_i64(b, S);
        for (int64_t i = 0; i < S; i++) {
            ghf_pack_f64(b, r->start_ll[i]);
            ghf_pack_i64(b, r->start_iter[i]);
            ghf_pack_i64(b, r->start_conv[i]);
        }
    }
}

static void pack_se(ghf_pack *b, const ghf_fit_se *e, int64_t d)
{
    ghf_pack_str(b, e->method);
    ghf_pack_str(b, e->reason);
    ghf_pack_str(b, e->names);
    ghf_pack_f64(b, e->cond);
    ghf_pack_f64(b, e->newton_decrement);
    ghf_pack_f64(b, e->seconds);
    ghf_pack_f64s(b, e->mu, e->mu ? d : 0);
    ghf_pack_f64s(b, e->gamma, e->gamma ? d : 0);
    ghf_pack_f64s(b, e->sigma, e->sigma ? d * d : 0);
    ghf_pack_f64s(b, e->mean, e->mean ? d : 0);
    ghf_pack_f64s(b, e->cov, e->cov ? d * d : 0);
    ghf_pack_f64s(b, e->param_cov, e->param_cov ? (int64_t)e->n_cov * e->n_cov : 0);
    ghf_pack_f64(b, e->p);
    ghf_pack_f64(b, e->a);
    ghf_pack_f64(b, e->b);
    ghf_pack_f64(b, e->sqrt_ab);
    ghf_pack_i64(b, e->n_cov);
}

/* the standard errors of a record (after its other fields); 0 or -1 */
static int unpack_se(ghf_unpack *u, ghf_rec *rec)
{
    const int64_t d = rec->r.d;
    if (u->off >= u->n || ghf_unpack_i64(u) == 0) return u->bad ? -1 : 0; /* none (or an older record) */
    ghf_fit_se *e = &rec->se;
    int64_t n[6];
    for (int i = 0; i < 3; i++) rec->se_str[i] = ghf_unpack_str(u);
    e->cond = ghf_unpack_f64(u);
    e->newton_decrement = ghf_unpack_f64(u);
    e->seconds = ghf_unpack_f64(u);
    for (int i = 0; i < 6; i++) rec->se_arr[i] = ghf_unpack_f64s(u, &n[i]);
    e->p = ghf_unpack_f64(u);
    e->a = ghf_unpack_f64(u);
    e->b = ghf_unpack_f64(u);
    e->sqrt_ab = ghf_unpack_f64(u);
    const int64_t k = ghf_unpack_i64(u);
    const int64_t want[6] = {d, d, d * d, d, d * d, k * k};
    for (int i = 0; i < 6; i++)
        if (rec->se_arr[i] && n[i] != want[i]) u->bad = 1;
    if (u->bad || k < 0 || k > INT32_MAX || (k > 0 && (!rec->se_arr[5] || !rec->se_str[2]))) return -1;
    e->method = rec->se_str[0];
    e->reason = rec->se_str[1];
    e->names = rec->se_str[2];
    e->d = (int)d;
    e->mu = rec->se_arr[0];
    e->gamma = rec->se_arr[1];
    e->sigma = rec->se_arr[2];
    e->mean = rec->se_arr[3];
    e->cov = rec->se_arr[4];
    e->param_cov = rec->se_arr[5];
    e->n_cov = (int)k;
    rec->r.se = e;
    return 0;
}

void ghf_rec_free(ghf_rec *rec)
{
    free(rec->name);
    free(rec->family);
    free(rec->status);
    free(rec->backend);
    free(rec->moments_note);
    free(rec->data_file);
    free(rec->dataset);
    free(rec->device);
    free(rec->weights);
    free(rec->missing);
    free(rec->missing_counts);
    free(rec->trace);
    free(rec->mu);
    free(rec->gamma);
    free(rec->sigma);
    free(rec->mean);
    free(rec->cov);
    free(rec->phase_s);
    free(rec->fB);
    free(rec->fD);
    for (int i = 0; i < 3; i++) free(rec->se_str[i]);
    for (int i = 0; i < 6; i++) free(rec->se_arr[i]);
    for (int i = 0; i < 7; i++) free(rec->mx_arr[i]);
    if (rec->mx_notes)
        for (int k = 0; k < rec->r.n_components; k++) free(rec->mx_notes[k]);
    free(rec->mx_notes);
    free(rec->mx_starts[0]);
    free(rec->mx_si);
    free(rec->mx_sc);
    memset(rec, 0, sizeof *rec);
}

int ghf_rec_unpack(ghf_unpack *u, ghf_rec *rec)
{
    memset(rec, 0, sizeof *rec);
    if (ghf_unpack_i64(u) != REC_MAGIC) {
        u->bad = 1;
        return -1;
    }
    ghf_fit_record *r = &rec->r;
    rec->index = ghf_unpack_i64(u);
    r->name = rec->name = ghf_unpack_str(u);
    r->family = rec->family = ghf_unpack_str(u);
    r->n_obs = ghf_unpack_i64(u);
    const int64_t d = ghf_unpack_i64(u);
    r->d = (int)d;
    r->n_iter = (int)ghf_unpack_i64(u);
    r->converged = (int)ghf_unpack_i64(u);
    r->status = rec->status = ghf_unpack_str(u);
    r->loglik = ghf_unpack_f64(u);
    r->aic = ghf_unpack_f64(u);
    r->bic = ghf_unpack_f64(u);
    r->elapsed_s = ghf_unpack_f64(u);
    int64_t n, nmu, ng, ns;
    r->loglik_trace = rec->trace = ghf_unpack_f64s(u, &n);
    r->n_trace = (int)n;
    r->mu = rec->mu = ghf_unpack_f64s(u, &nmu);
    r->gamma = rec->gamma = ghf_unpack_f64s(u, &ng);
    r->sigma = rec->sigma = ghf_unpack_f64s(u, &ns);
    r->p = ghf_unpack_f64(u);
    r->a = ghf_unpack_f64(u);
    r->b = ghf_unpack_f64(u);
    int64_t nm, nc;
    r->mean = rec->mean = ghf_unpack_f64s(u, &nm);
    r->cov = rec->cov = ghf_unpack_f64s(u, &nc);
    r->n_phases = (int)ghf_unpack_i64(u);
    r->n_ranks = (int)ghf_unpack_i64(u);
    int64_t nph;
    r->phase_s = rec->phase_s = ghf_unpack_f64s(u, &nph);
    r->phase_names = ghf_phase_names;
    r->backend = rec->backend = ghf_unpack_str(u);
    r->n_dropped = ghf_unpack_i64(u);
    r->symmetric = (int)ghf_unpack_i64(u);
    r->p_fixed = ghf_unpack_f64(u);
    r->moments_note = rec->moments_note = ghf_unpack_str(u);
    r->data_file = rec->data_file = ghf_unpack_str(u);
    r->dataset = rec->dataset = ghf_unpack_str(u);
    r->row_start = ghf_unpack_i64(u);
    r->row_count = ghf_unpack_i64(u);
    r->device = rec->device = ghf_unpack_str(u);
    if (!u->bad && d >= 1 && unpack_se(u, rec) != 0) u->bad = 1;
    if (!u->bad && u->off < u->n && ghf_unpack_i64(u) != 0) { /* weighted EM */
        r->weights = rec->weights = ghf_unpack_str(u);
        r->weight_sum = ghf_unpack_f64(u);
        r->n_eff = ghf_unpack_f64(u);
        r->loglik_unweighted = ghf_unpack_f64(u);
        if (!r->weights) u->bad = 1;
    }
    if (!u->bad && u->off < u->n && ghf_unpack_i64(u) != 0) { /* --missing em */
        r->missing = rec->missing = ghf_unpack_str(u);
        r->n_incomplete = ghf_unpack_i64(u);
        r->missing_fraction = ghf_unpack_f64(u);
        int64_t nmc = 0;
        r->missing_counts = rec->missing_counts = ghf_unpack_f64s(u, &nmc);
        r->n_missing_counts = (int)nmc;
        if (!r->missing || (r->missing_counts && nmc != d + 1)) u->bad = 1;
    }
    if (!u->bad && u->off < u->n && ghf_unpack_i64(u) != 0) { /* the factor form */
        r->factors = (int)ghf_unpack_i64(u);
        int64_t nb = 0, nd = 0;
        r->B = rec->fB = ghf_unpack_f64s(u, &nb);
        r->D = rec->fD = ghf_unpack_f64s(u, &nd);
        if (r->factors < 0 || nd != d || !r->D || (r->factors > 0 && (nb != d * r->factors || !r->B))) u->bad = 1;
    }
    if (!u->bad && u->off < u->n) { /* a mixture */
        const int64_t K = ghf_unpack_i64(u);
        if (K < 2 || K > 100000 || d < 1) u->bad = 1;
        else {
            r->n_components = (int)K;
            const int64_t want[7] = {K, K * d, K * d, K * d * d, 3 * K, K * d, K * d * d};
            for (int i = 0; i < 7 && !u->bad; i++) {
                int64_t na = 0;
                rec->mx_arr[i] = ghf_unpack_f64s(u, &na);
                if (!rec->mx_arr[i] || na != want[i]) u->bad = 1;
            }
            rec->mx_notes = calloc((size_t)K, sizeof(char *));
            if (!rec->mx_notes) u->bad = 1;
            for (int64_t k = 0; k < K && !u->bad; k++) rec->mx_notes[k] = ghf_unpack_str(u);
            r->icl = ghf_unpack_f64(u);
            const int64_t S = ghf_unpack_i64(u);
            if (!u->bad && (S < 0 || S > 1000)) u->bad = 1;
            if (!u->bad) {
                r->n_starts = (int)S;
                rec->mx_starts[0] = malloc((size_t)(S > 0 ? S : 1) * sizeof(double));
                rec->mx_si = malloc((size_t)(S > 0 ? S : 1) * sizeof(int));
                rec->mx_sc = malloc((size_t)(S > 0 ? S : 1) * sizeof(int));
                if (!rec->mx_starts[0] || !rec->mx_si || !rec->mx_sc) u->bad = 1;
                for (int64_t i = 0; i < S && !u->bad; i++) {
                    rec->mx_starts[0][i] = ghf_unpack_f64(u);
                    rec->mx_si[i] = (int)ghf_unpack_i64(u);
                    rec->mx_sc[i] = (int)ghf_unpack_i64(u);
                }
            }
            if (!u->bad) {
                r->mix_prop = rec->mx_arr[0];
                r->mix_mu = rec->mx_arr[1];
                r->mix_gamma = rec->mx_arr[2];
                r->mix_sigma = rec->mx_arr[3];
                r->mix_pab = rec->mx_arr[4];
                r->mix_mean = rec->mx_arr[5];
                r->mix_cov = rec->mx_arr[6];
                r->mix_note = (const char *const *)rec->mx_notes;
                r->start_ll = rec->mx_starts[0];
                r->start_iter = rec->mx_si;
                r->start_conv = rec->mx_sc;
            }
        }
    }
    if (u->bad || d < 1 || nmu != d || ng != d || ns != d * d || (r->mean && nm != d) || (r->cov && nc != d * d) ||
        r->n_phases != GHF_NPHASES || (r->phase_s && nph != (int64_t)r->n_ranks * r->n_phases) || !r->name ||
        !r->family || !r->status) {
        ghf_rec_free(rec);
        u->bad = 1;
        return -1;
    }
    return 0;
}

