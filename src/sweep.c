/* sweep.c - see sweep.h */
#include "sweep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"

/* ---------------------------------------------------------------------------
 * Serialisation
 * ------------------------------------------------------------------------- */

void ghf_pack_bytes(ghf_pack *b, const void *x, size_t n)
{
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? 2 * b->cap : 4096;
        while (nc < b->n + n) nc *= 2;
        unsigned char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, x, n);
    b->n += n;
}

void ghf_pack_i64(ghf_pack *b, int64_t v) { ghf_pack_bytes(b, &v, sizeof v); }
void ghf_pack_f64(ghf_pack *b, double v) { ghf_pack_bytes(b, &v, sizeof v); }

void ghf_pack_str(ghf_pack *b, const char *s)
{
    if (!s) {
        ghf_pack_i64(b, -1);
        return;
    }
    const int64_t n = (int64_t)strlen(s);
    ghf_pack_i64(b, n);
    ghf_pack_bytes(b, s, (size_t)n);
}

void ghf_pack_f64s(ghf_pack *b, const double *x, int64_t n)
{
    if (!x) {
        ghf_pack_i64(b, -1);
        return;
    }
    ghf_pack_i64(b, n);
    ghf_pack_bytes(b, x, (size_t)n * sizeof(double));
}

void ghf_pack_free(ghf_pack *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static int take(ghf_unpack *u, void *x, size_t n)
{
    if (u->bad || u->off + n > u->n) {
        u->bad = 1;
        return -1;
    }
    if (n) memcpy(x, u->p + u->off, n);
    u->off += n;
    return 0;
}

int64_t ghf_unpack_i64(ghf_unpack *u)
{
    int64_t v = 0;
    take(u, &v, sizeof v);
    return v;
}

double ghf_unpack_f64(ghf_unpack *u)
{
    double v = 0;
    take(u, &v, sizeof v);
    return v;
}

char *ghf_unpack_str(ghf_unpack *u)
{
    const int64_t n = ghf_unpack_i64(u);
    if (u->bad || n < 0) return NULL;
    if ((size_t)n > u->n - u->off) {
        u->bad = 1;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        u->bad = 1;
        return NULL;
    }
    take(u, s, (size_t)n);
    s[n] = '\0';
    return s;
}

double *ghf_unpack_f64s(ghf_unpack *u, int64_t *n)
{
    *n = ghf_unpack_i64(u);
    if (u->bad || *n < 0) {
        *n = 0;
        return NULL;
    }
    if ((size_t)*n > (u->n - u->off) / sizeof(double)) {
        u->bad = 1;
        *n = 0;
        return NULL;
    }
    double *x = malloc((size_t)(*n > 0 ? *n : 1) * sizeof(double));
    if (!x) {
        u->bad = 1;
        return NULL;
    }
    take(u, x, (size_t)*n * sizeof(double));
    return x;
}

/* ---------------------------------------------------------------------------
 * Records
 * ------------------------------------------------------------------------- */

#define REC_MAGIC 0x6768667265633031LL /* "ghfrec01" */

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
}

void ghf_rec_free(ghf_rec *rec)
{
    free(rec->name);
    free(rec->family);
    free(rec->status);
    free(rec->backend);
    free(rec->moments_note);
    free(rec->trace);
    free(rec->mu);
    free(rec->gamma);
    free(rec->sigma);
    free(rec->mean);
    free(rec->cov);
    free(rec->phase_s);
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
    if (u->bad || d < 1 || nmu != d || ng != d || ns != d * d || (r->mean && nm != d) || (r->cov && nc != d * d) ||
        r->n_phases != GHF_NPHASES || (r->phase_s && nph != (int64_t)r->n_ranks * r->n_phases) || !r->name ||
        !r->family || !r->status) {
        ghf_rec_free(rec);
        u->bad = 1;
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * Summary table
 * ------------------------------------------------------------------------- */

int ghf_sort_key_parse(const char *s, ghf_sort_key *k)
{
    if (!strcmp(s, "aic")) *k = GHF_SORT_AIC;
    else if (!strcmp(s, "bic")) *k = GHF_SORT_BIC;
    else if (!strcmp(s, "loglik")) *k = GHF_SORT_LOGLIK;
    else if (!strcmp(s, "name")) *k = GHF_SORT_NAME;
    else if (!strcmp(s, "none")) *k = GHF_SORT_NONE;
    else return -1;
    return 0;
}

static ghf_sort_key g_key;

/* NaN sorts last */
static int cmp_num(double a, double b)
{
    const int na = isnan(a), nb = isnan(b);
    if (na || nb) return na - nb;
    return (a > b) - (a < b);
}

static int cmp_rows(const void *pa, const void *pb)
{
    const ghf_summary_row *a = pa, *b = pb;
    int c = 0;
    switch (g_key) {
    case GHF_SORT_AIC: c = cmp_num(a->s.aic, b->s.aic); break;
    case GHF_SORT_BIC: c = cmp_num(a->s.bic, b->s.bic); break;
    case GHF_SORT_LOGLIK: c = -cmp_num(a->s.loglik, b->s.loglik); if (isnan(a->s.loglik) || isnan(b->s.loglik)) c = -c; break;
    default: break;
    }
    if (c) return c;
    if (g_key != GHF_SORT_NONE) {
        c = strcmp(a->s.name, b->s.name);
        if (c) return c;
        if (a->file && b->file) c = strcmp(a->file, b->file);
    }
    return c;
}

void ghf_summary_print(FILE *f, ghf_summary_row *rows, int n, ghf_sort_key key)
{
    g_key = key;
    if (key != GHF_SORT_NONE && n > 1) qsort(rows, (size_t)n, sizeof *rows, cmp_rows);
    int wname = 4, wfile = 0;
    for (int i = 0; i < n; i++) {
        const int l = (int)strlen(rows[i].s.name);
        if (l > wname) wname = l;
        if (rows[i].file) {
            const int lf = (int)strlen(rows[i].file);
            if (lf > wfile) wfile = lf;
        }
    }
    if (wfile > 0 && wfile < 4) wfile = 4;
    const char *dname = key == GHF_SORT_AIC ? "dAIC" : key == GHF_SORT_BIC ? "dBIC" : key == GHF_SORT_LOGLIK ? "dloglik" : NULL;
    double best = NAN;
    if (dname && n > 0) best = key == GHF_SORT_AIC ? rows[0].s.aic : key == GHF_SORT_BIC ? rows[0].s.bic : rows[0].s.loglik;
    if (wfile) fprintf(f, "%-*s  ", wfile, "file");
    fprintf(f, "%-*s  %-6s %10s %4s %22s %16s %16s", wname, "name", "family", "n", "d", "loglik", "aic", "bic");
    if (dname) fprintf(f, " %12s", dname);
    fprintf(f, " %6s %4s %9s\n", "iters", "conv", "seconds");
    for (int i = 0; i < n; i++) {
        const ghf_fit_summary *s = &rows[i].s;
        if (wfile) fprintf(f, "%-*s  ", wfile, rows[i].file ? rows[i].file : "");
        fprintf(f, "%-*s  %-6s %10lld %4d %22.15e %16.8e %16.8e", wname, s->name, s->family, (long long)s->n, s->d,
                s->loglik, s->aic, s->bic);
        if (dname) {
            const double v = key == GHF_SORT_AIC ? s->aic : key == GHF_SORT_BIC ? s->bic : s->loglik;
            fprintf(f, " %12.4f", key == GHF_SORT_LOGLIK ? best - v : v - best);
        }
        const int failed = strncmp(s->status, "failed", 6) == 0;
        fprintf(f, " %6d %4s %9.3f\n", s->n_iter, failed ? "fail" : s->converged ? "yes" : "no", s->seconds);
    }
    fflush(f);
}
