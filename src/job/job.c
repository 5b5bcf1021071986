/* job.c - see job.h.  The YAML is read with libyaml's document API; every
 * node carries its line, which every message names. */
#include "job.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "em.h"
#include "util.h"

void ghf_job_defaults(ghf_job *j)
{
    memset(j, 0, sizeof *j);
    j->rows_len = -1;
    j->n_family = 1;
    j->family[0] = GHF_FAMILY_GH;
    j->n_sym = 1;
    j->sym[0] = 0;
    j->n_p = 1;
    j->p[0].fixed = 0;
    j->n_tol = 1;
    j->tol[0] = GHF_DEFAULT_TOL;
    j->n_seed = 1;
    j->seed[0] = 1;
    j->n_sigma = 1;
    j->sigma[0] = -1;
    j->n_comp = 1;
    j->comp[0] = 1;
    j->win_count = -1;
    j->max_iter = GHF_DEFAULT_MAX_ITER;
    j->starts = GHF_DEFAULT_STARTS;
    j->accel = 1;
    j->rows_per_rank = GHF_JOB_DEFAULT_ROWS_PER_RANK;
    j->checkpoint_every = GHF_JOB_DEFAULT_CKPT_EVERY;
    j->slice_k = 0;
    j->slice_n = 1;
    j->gof_qq = 200;
    j->gof_seed = 1;
    j->opt_alpha = 0.975;
    j->opt_budget = 1.0;
    j->opt_lo = -INFINITY;
    j->opt_hi = INFINITY;
}

void ghf_job_free(ghf_job *j)
{
    free(j->source);
    free(j->name);
    free(j->data_file);
    free(j->dataset);
    free(j->out);
    free(j->backend);
    free(j->checkpoint);
    free(j->fit_name);
    free(j->risk_file), free(j->risk_dataset), free(j->eval_file), free(j->eval_dataset);
    free(j->gof_file), free(j->gof_dataset);
    free(j->weights);
    memset(j, 0, sizeof *j);
}

/* ---------------------------------------------------------------------------
 * Parsing
 * ------------------------------------------------------------------------- */

typedef struct pctx {
    yaml_document_t *doc;
    const char *src;
    char *err;
    size_t errlen;
} pctx;

static int perr(pctx *c, const yaml_node_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(pctx *c, const yaml_node_t *n, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s:%lu: %s", c->src, n ? (unsigned long)n->start_mark.line + 1 : 1UL, msg);
    return 2;
}

static const char *scalar(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

static int is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE) return 0;
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return 0;
    const char *s = scalar(n);
    return !*s || !strcmp(s, "~") || !strcasecmp(s, "null");
}

static int get_str(pctx *c, const char *key, const yaml_node_t *n, char **out)
{
    if (n->type != YAML_SCALAR_NODE || is_null(n)) return perr(c, n, "%s: expected a string", key);
    free(*out);
    *out = strdup(scalar(n));
    return *out ? 0 : perr(c, n, "out of memory");
}

static int get_bool(pctx *c, const char *key, const yaml_node_t *n, int *out)
{
    if (n->type == YAML_SCALAR_NODE) {
        const char *s = scalar(n);
        if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on")) { *out = 1; return 0; }
        if (!strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off")) { *out = 0; return 0; }
    }
    return perr(c, n, "%s: expected true or false", key);
}

static int get_i64(pctx *c, const char *key, const yaml_node_t *n, int64_t lo, int64_t *out)
{
    int64_t v;
    if (n->type != YAML_SCALAR_NODE || ghf_parse_int64(scalar(n), &v) != 0 || v < lo)
        return perr(c, n, "%s: '%s' is not an integer >= %lld", key,
                    n->type == YAML_SCALAR_NODE ? scalar(n) : "(not a scalar)", (long long)lo);
    *out = v;
    return 0;
}

static int get_int(pctx *c, const char *key, const yaml_node_t *n, int lo, int hi, int *out)
{
    int v;
    if (n->type != YAML_SCALAR_NODE || ghf_parse_int(scalar(n), &v) != 0 || v < lo || v > hi)
        return perr(c, n, "%s: '%s' is not an integer in %d..%d", key,
                    n->type == YAML_SCALAR_NODE ? scalar(n) : "(not a scalar)", lo, hi);
    *out = v;
    return 0;
}

/* An axis: a scalar or a flow/block sequence of scalars. */
static int axis_items(pctx *c, const char *key, yaml_node_t *n, yaml_node_t **items, int *count)
{
    *count = 0;
    if (n->type == YAML_SCALAR_NODE) {
        items[0] = n;
        *count = 1;
        return 0;
    }
    if (n->type != YAML_SEQUENCE_NODE) return perr(c, n, "%s: expected a value or a list of values", key);
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        if (*count >= GHF_JOB_MAX_AXIS) return perr(c, n, "%s: more than %d values", key, GHF_JOB_MAX_AXIS);
        yaml_node_t *v = yaml_document_get_node(c->doc, *it);
        if (!v || v->type != YAML_SCALAR_NODE) return perr(c, v ? v : n, "%s: list entries must be plain values", key);
        items[(*count)++] = v;
    }
    if (*count == 0) return perr(c, n, "%s: empty list", key);
    return 0;
}

static int parse_family(pctx *c, yaml_node_t *n, ghf_job *j)
{
    yaml_node_t *it[GHF_JOB_MAX_AXIS];
    int k;
    if (axis_items(c, "family", n, it, &k)) return 2;
    int seen[GHF_N_FAMILIES] = {0};
    j->n_family = 0;
    for (int i = 0; i < k; i++) {
        ghf_family f;
        if (ghf_family_parse(scalar(it[i]), &f) != 0)
            return perr(c, it[i], "family: unknown family '%s' (expected %s)", scalar(it[i]),
                        ghf_family_list());
        if (seen[f]) return perr(c, it[i], "family: '%s' is listed twice", scalar(it[i]));
        seen[f] = 1;
        j->family[j->n_family++] = f;
    }
    return 0;
}

static int parse_p(pctx *c, yaml_node_t *n, ghf_job *j)
{
    yaml_node_t *it[GHF_JOB_MAX_AXIS];
    int k;
    if (axis_items(c, "p", n, it, &k)) return 2;
    j->n_p = 0;
    for (int i = 0; i < k; i++) {
        const char *s = scalar(it[i]);
        ghf_job_p v = {0, 0.0};
        if (!strcasecmp(s, "free")) {
            v.fixed = 0;
        } else if (ghf_parse_double(s, &v.value) == 0 && fabs(v.value) <= GHF_P_MAX_ANY) {
            v.fixed = 1;
        } else {
            return perr(c, it[i], "p: '%s' is neither 'free' nor a number in [-1e6, 1e6]", s);
        }
        for (int q = 0; q < j->n_p; q++)
            if (j->p[q].fixed == v.fixed && (!v.fixed || j->p[q].value == v.value))
                return perr(c, it[i], "p: '%s' is listed twice", s);
        j->p[j->n_p++] = v;
    }
    return 0;
}

static int parse_sym(pctx *c, yaml_node_t *n, ghf_job *j)
{
    yaml_node_t *it[GHF_JOB_MAX_AXIS];
    int k;
    if (axis_items(c, "symmetric", n, it, &k)) return 2;
    j->n_sym = 0;
    for (int i = 0; i < k; i++) {
        int v = 0;
        if (get_bool(c, "symmetric", it[i], &v)) return 2;
        if (j->n_sym == 2 || (j->n_sym == 1 && j->sym[0] == v))
            return perr(c, it[i], "symmetric: '%s' is listed twice", scalar(it[i]));
        j->sym[j->n_sym++] = v;
    }
    return 0;
}

static int parse_tol(pctx *c, yaml_node_t *n, ghf_job *j)
{
    yaml_node_t *it[GHF_JOB_MAX_AXIS];
    int k;
    if (axis_items(c, "tol", n, it, &k)) return 2;
    for (int i = 0; i < k; i++) {
        double v;
        if (ghf_parse_double(scalar(it[i]), &v) != 0 || v < 0)
            return perr(c, it[i], "tol: '%s' is not a non-negative number", scalar(it[i]));
        for (int q = 0; q < i; q++)
            if (j->tol[q] == v) return perr(c, it[i], "tol: '%s' is listed twice", scalar(it[i]));
        j->tol[i] = v;
    }
    j->n_tol = k;
    return 0;
}

static int parse_seed(pctx *c, yaml_node_t *n, ghf_job *j)
{
    yaml_node_t *it[GHF_JOB_MAX_AXIS];
    int k;
    if (axis_items(c, "seed", n, it, &k)) return 2;
    for (int i = 0; i < k; i++) {
        int64_t v = 0;
        if (get_i64(c, "seed", it[i], 0, &v)) return 2;
        for (int q = 0; q < i; q++)
            if (j->seed[q] == v) return perr(c, it[i], "seed: '%s' is listed twice", scalar(it[i]));
        j->seed[i] = v;
    }
    j->n_seed = k;
    return 0;
}

int ghf_sigma_parse(const char *s, int *r, char *why, size_t whylen)
{
    if (!strcmp(s, "full")) {
        *r = -1;
        return 0;
    }
    if (!strcmp(s, "diag")) {
        *r = 0;
        return 0;
    }
    int v = 0;
    if (strncmp(s, "factor:", 7) || ghf_parse_int(s + 7, &v) || v < 0 || v > 100000) {
        snprintf(why, whylen, "'%s' is not full, diag or factor:R with R a positive integer", s);
        return -1;
    }
    if (v == 0) {
        snprintf(why, whylen, "'%s': a factor form needs R >= 1 factors (diag is the form without factors)", s);
        return -1;
    }
    *r = v;
    return 0;
}

const char *ghf_sigma_label(int r, char *buf, size_t len)
{
    if (r < 0) snprintf(buf, len, "full");
    else if (r == 0) snprintf(buf, len, "diag");
    else snprintf(buf, len, "factor:%d", r);
    return buf;
}

static int sigma_nonfull(const ghf_job *j)
{
    for (int i = 0; i < j->n_sigma; i++)
        if (j->sigma[i] >= 0) return 1;
    return 0;
}

int ghf_job_factor_only(const ghf_job *j)
{
    for (int i = 0; i < j->n_sigma; i++)
        if (j->sigma[i] < 0) return 0;
    return j->n_sigma > 0;
}

int ghf_job_check_sigma(const ghf_job *j, char *err, size_t errlen)
{
    if (!sigma_nonfull(j)) return 0;
    const char *s = j->source ? j->source : "job";
    const char *why = j->se == GHF_JOB_SE_SUBSET ? "the subset method of standard errors (--se-method subset, se: subset)"
                      : j->backend && !strcmp(j->backend, "cuda") ? "--backend cuda (the factor form runs on the CPU backend only)"
                      : NULL;
    if (why) {
        snprintf(err, errlen, "%s: --sigma diag|factor:R (sigma:) is not available with %s", s, why);
        return 2;
    }
    return 0;
}

static int parse_sigma(pctx *c, yaml_node_t *n, ghf_job *j)
{
    yaml_node_t *it[GHF_JOB_MAX_AXIS];
    int k;
    if (axis_items(c, "sigma", n, it, &k)) return 2;
    for (int i = 0; i < k; i++) {
        int v = 0;
        char why[160];
        if (it[i]->type != YAML_SCALAR_NODE) return perr(c, it[i], "sigma: expected full, diag or factor:R");
        if (ghf_sigma_parse(scalar(it[i]), &v, why, sizeof why)) return perr(c, it[i], "sigma: %s", why);
        for (int q = 0; q < i; q++)
            if (j->sigma[q] == v) return perr(c, it[i], "sigma: '%s' is listed twice", scalar(it[i]));
        j->sigma[i] = v;
    }
    j->n_sigma = k;
    return 0;
}

int ghf_job_mixture(const ghf_job *j)
{
    for (int i = 0; i < j->n_comp; i++)
        if (j->comp[i] > 1) return 1;
    return 0;
}

int ghf_job_check_mixture(const ghf_job *j, char *err, size_t errlen)
{
    if (!ghf_job_mixture(j)) return 0;
    const char *s = j->source ? j->source : "job";
    const char *why = sigma_nonfull(j) ? "--sigma diag|factor:R (sigma:; mixtures have a full Sigma per component)"
                      : j->missing_em ? "--missing em (missing: em)"
                      : j->se ? "standard errors (--se, se:)"
                      : j->backend && !strcmp(j->backend, "cuda") ? "--backend cuda (mixtures run on the CPU)"
                      : j->warm_start ? "--warm-start (warm_start:; every window's mixture starts afresh)"
                      : j->risk_file ? "the job key risk: (use ghfit risk on the result file)"
                      : j->eval != GHF_JOB_EVAL_OFF ? "the job key eval: (use ghfit eval on the result file)"
                      : j->gof ? "the job key gof: (use ghfit gof on the result file)"
                      : j->opt ? "the job key optimize: (use ghfit optimize on the result file)"
                      : NULL;
    if (why) {
        snprintf(err, errlen, "%s: --components K > 1 (components:) is not available with %s", s, why);
        return 2;
    }
    return 0;
}

static int parse_components(pctx *c, yaml_node_t *n, ghf_job *j)
{
    yaml_node_t *it[GHF_JOB_MAX_AXIS];
    int k;
    if (axis_items(c, "components", n, it, &k)) return 2;
    for (int i = 0; i < k; i++) {
        int v = 0;
        if (it[i]->type != YAML_SCALAR_NODE || ghf_parse_int(scalar(it[i]), &v) || v < 1 || v > GHF_JOB_MAX_COMPONENTS)
            return perr(c, it[i], "components: '%s' is not an integer in 1..%d", it[i]->type == YAML_SCALAR_NODE ? scalar(it[i]) : "",
                        GHF_JOB_MAX_COMPONENTS);
        for (int q = 0; q < i; q++)
            if (j->comp[q] == v) return perr(c, it[i], "components: '%s' is listed twice", scalar(it[i]));
        j->comp[i] = v;
    }
    j->n_comp = k;
    return 0;
}

/* Walk a mapping: for each pair call fn(key, value). Unknown and duplicate keys are errors. */
typedef int (*pair_fn)(pctx *c, const char *key, yaml_node_t *kn, yaml_node_t *v, void *ud);

static int walk_map(pctx *c, const char *where, yaml_node_t *n, const char *const *known, pair_fn fn, void *ud)
{
    if (n->type != YAML_MAPPING_NODE) return perr(c, n, "%s: expected a mapping of keys", where);
    const char *seen[64];
    int ns = 0;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        if (!k || !v || k->type != YAML_SCALAR_NODE) return perr(c, k ? k : n, "%s: keys must be plain words", where);
        const char *key = scalar(k);
        int ok = 0;
        for (int i = 0; known[i]; i++)
            if (!strcmp(known[i], key)) ok = 1;
        if (!ok) {
            if (where[0]) return perr(c, k, "unknown key '%s' in %s", key, where);
            return perr(c, k, "unknown key '%s'", key);
        }
        for (int i = 0; i < ns; i++)
            if (!strcmp(seen[i], key)) return perr(c, k, "duplicate key '%s'", key);
        if (ns < 64) seen[ns++] = key;
        if (fn(c, key, k, v, ud)) return 2;
    }
    return 0;
}

static int rows_pair(pctx *c, const char *key, yaml_node_t *kn, yaml_node_t *v, void *ud)
{
    (void)kn;
    ghf_job *j = ud;
    if (!strcmp(key, "start")) return get_i64(c, "data.rows.start", v, 0, &j->rows_start);
    int64_t len = 0;
    if (get_i64(c, "data.rows.length", v, 1, &len)) return 2;
    j->rows_len = len;
    return 0;
}

static int data_pair(pctx *c, const char *key, yaml_node_t *kn, yaml_node_t *v, void *ud)
{
    (void)kn;
    ghf_job *j = ud;
    if (!strcmp(key, "file")) return get_str(c, "data.file", v, &j->data_file);
    if (!strcmp(key, "dataset")) return get_str(c, "data.dataset", v, &j->dataset);
    if (!strcmp(key, "drop_nonfinite")) return get_bool(c, "data.drop_nonfinite", v, &j->drop_nonfinite);
    static const char *const rk[] = {"start", "length", NULL};
    return walk_map(c, "data.rows", v, rk, rows_pair, j);
}

static int win_pair(pctx *c, const char *key, yaml_node_t *kn, yaml_node_t *v, void *ud)
{
    (void)kn;
    ghf_job *j = ud;
    if (!strcmp(key, "start")) return get_i64(c, "windows.start", v, 0, &j->win_start);
    if (!strcmp(key, "length")) return get_i64(c, "windows.length", v, 1, &j->win_len);
    if (!strcmp(key, "step")) return get_i64(c, "windows.step", v, 1, &j->win_step);
    return get_i64(c, "windows.count", v, 1, &j->win_count);
}

/* "FILE[:/DATASET]" of `key` split at the last ":/" (dataset default dflt) */
static int get_file_ds(pctx *c, const char *key, const yaml_node_t *n, const char *dflt, char **file, char **ds)
{
    char *t = NULL;
    if (get_str(c, key, n, &t)) return 2;
    char *cut = NULL;
    for (char *q = strstr(t, ":/"); q; q = strstr(q + 1, ":/")) cut = q;
    if (cut == t) {
        free(t);
        return perr(c, n, "%s: expected FILE or FILE:/DATASET", key);
    }
    free(*ds);
    *ds = strdup(cut ? cut + 1 : dflt);
    if (cut) *cut = '\0';
    free(*file);
    *file = t;
    return *ds ? 0 : perr(c, n, "out of memory");
}

static int risk_pair(pctx *c, const char *key, yaml_node_t *kn, yaml_node_t *v, void *ud)
{
    (void)kn;
    ghf_job *j = ud;
    if (!strcmp(key, "portfolios")) return get_file_ds(c, "risk.portfolios", v, "/W", &j->risk_file, &j->risk_dataset);
    yaml_node_t *it[GHF_JOB_MAX_AXIS];
    int n = 0;
    if (axis_items(c, "risk.alpha", v, it, &n)) return 2;
    for (int i = 0; i < n; i++)
        if (ghf_parse_double(scalar(it[i]), &j->risk_alpha[i]) != 0 || !(j->risk_alpha[i] > 0 && j->risk_alpha[i] < 1))
            return perr(c, it[i], "risk.alpha: '%s' is not a level in (0, 1)", scalar(it[i]));
    j->risk_n_alpha = n;
    return 0;
}

static int gof_pair(pctx *c, const char *key, yaml_node_t *kn, yaml_node_t *v, void *ud)
{
    (void)kn;
    ghf_job *j = ud;
    if (!strcmp(key, "data")) return get_file_ds(c, "gof.data", v, "/X", &j->gof_file, &j->gof_dataset);
    if (!strcmp(key, "bootstrap")) return get_int(c, "gof.bootstrap", v, 0, 100000, &j->gof_bootstrap);
    if (!strcmp(key, "qq")) return get_int(c, "gof.qq", v, 1, 100000, &j->gof_qq);
    return get_i64(c, "gof.seed", v, 0, &j->gof_seed);
}

/* gof: true | false | {data: FILE[:/DATASET], bootstrap: B, qq: Q, seed: S} */
static int parse_gof(pctx *c, yaml_node_t *v, ghf_job *j)
{
    if (v->type == YAML_SCALAR_NODE) {
        if (get_bool(c, "gof", v, &j->gof))
            return perr(c, v, "gof: expected true, false or {data: FILE[:/DATASET], bootstrap: B, qq: Q, seed: S}");
        return 0;
    }
    static const char *const gk[] = {"data", "bootstrap", "qq", "seed", NULL};
    j->gof = 1;
    return walk_map(c, "gof", v, gk, gof_pair, j);
}

static int get_f64(pctx *c, const char *key, const yaml_node_t *n, double *out)
{
    if (n->type != YAML_SCALAR_NODE || ghf_parse_double(scalar(n), out) != 0 || !isfinite(*out))
        return perr(c, n, "%s: '%s' is not a finite number", key, n->type == YAML_SCALAR_NODE ? scalar(n) : "(not a scalar)");
    return 0;
}

static int opt_pair(pctx *c, const char *key, yaml_node_t *kn, yaml_node_t *v, void *ud)
{
    (void)kn;
    ghf_job *j = ud;
    if (!strcmp(key, "measure")) {
        static const char *const m[3] = {"sd", "var", "es"};
        for (int i = 0; i < 3; i++)
            if (v->type == YAML_SCALAR_NODE && !strcmp(scalar(v), m[i])) return j->opt_measure = i, 0;
        return perr(c, v, "optimize.measure: expected sd, var or es");
    }
    if (!strcmp(key, "type")) {
        static const char *const t[3] = {"min-risk", "target-return", "tangency"};
        for (int i = 0; i < 3; i++)
            if (v->type == YAML_SCALAR_NODE && !strcmp(scalar(v), t[i])) return j->opt_type = i, 0;
        return perr(c, v, "optimize.type: expected min-risk, target-return or tangency");
    }
    if (!strcmp(key, "alpha")) {
        if (get_f64(c, "optimize.alpha", v, &j->opt_alpha)) return 2;
        return j->opt_alpha > 0.0 && j->opt_alpha < 1.0 ? 0 : perr(c, v, "optimize.alpha: '%s' is not a level in (0, 1)", scalar(v));
    }
    if (!strcmp(key, "budget")) {
        if (get_f64(c, "optimize.budget", v, &j->opt_budget)) return 2;
        return j->opt_budget != 0.0 ? 0 : perr(c, v, "optimize.budget: must not be 0");
    }
    if (!strcmp(key, "long_only")) return get_bool(c, "optimize.long_only", v, &j->opt_long_only);
    if (!strcmp(key, "losses")) return get_bool(c, "optimize.losses", v, &j->opt_losses);
    if (!strcmp(key, "risk_free")) return get_f64(c, "optimize.risk_free", v, &j->opt_rf);
    if (!strcmp(key, "target_return")) {
        j->opt_has_target = 1;
        return get_f64(c, "optimize.target_return", v, &j->opt_target);
    }
    /* bounds: [LO, HI] */
    yaml_node_t *it[GHF_JOB_MAX_AXIS];
    int n = 0;
    if (axis_items(c, "optimize.bounds", v, it, &n)) return 2;
    if (n != 2 || get_f64(c, "optimize.bounds", it[0], &j->opt_lo) || get_f64(c, "optimize.bounds", it[1], &j->opt_hi) ||
        !(j->opt_lo <= j->opt_hi))
        return perr(c, v, "optimize.bounds: expected [LO, HI] with LO <= HI");
    return 0;
}

/* optimize: {measure: es, alpha: 0.975, type: min-risk, long_only: true, bounds: [LO, HI], budget: S,
 * target_return: R, risk_free: RF, losses: false} */
static int parse_opt(pctx *c, yaml_node_t *v, ghf_job *j)
{
    static const char *const ok[] = {"measure", "alpha", "type", "long_only", "bounds", "budget", "target_return",
                                     "risk_free", "losses", NULL};
    j->opt = 1;
    j->opt_measure = -1;
    if (walk_map(c, "optimize", v, ok, opt_pair, j)) return 2;
    if (j->opt_measure < 0) return perr(c, v, "optimize: 'measure' (sd, var or es) is required");
    if (j->opt_type == 1 && !j->opt_has_target) return perr(c, v, "optimize: type target-return needs target_return");
    if (j->opt_long_only && j->opt_lo < 0.0) j->opt_lo = 0.0;
    if (!(j->opt_lo <= j->opt_hi)) return perr(c, v, "optimize: long_only with bounds [LO, HI], HI < 0, leaves no portfolio");
    return 0;
}

/* risk: {portfolios: W.h5[:/W], alpha: [..]}; eval: next | FILE[:/DATASET] */
static int parse_post(pctx *c, const char *key, yaml_node_t *v, ghf_job *j)
{
    if (!strcmp(key, "eval")) {
        if (v->type == YAML_SCALAR_NODE && !strcmp(scalar(v), "next")) {
            j->eval = GHF_JOB_EVAL_NEXT;
            return 0;
        }
        j->eval = GHF_JOB_EVAL_FILE;
        return get_file_ds(c, "eval", v, "/X", &j->eval_file, &j->eval_dataset);
    }
    static const char *const rk[] = {"portfolios", "alpha", NULL};
    j->risk_n_alpha = 0;
    if (walk_map(c, "risk", v, rk, risk_pair, j)) return 2;
    if (!j->risk_file) return perr(c, v, "risk: 'portfolios' (W.h5[:/W]) is required");
    if (j->risk_n_alpha == 0) return perr(c, v, "risk: 'alpha' (e.g. [0.99, 0.975]) is required");
    return 0;
}

static int top_pair(pctx *c, const char *key, yaml_node_t *kn, yaml_node_t *v, void *ud)
{
    (void)kn;
    ghf_job *j = ud;
    if (!strcmp(key, "name")) return get_str(c, key, v, &j->name);
    if (!strcmp(key, "data")) {
        if (v->type == YAML_SCALAR_NODE) return get_str(c, "data", v, &j->data_file);
        static const char *const dk[] = {"file", "dataset", "rows", "drop_nonfinite", NULL};
        return walk_map(c, "data", v, dk, data_pair, j);
    }
    if (!strcmp(key, "out")) return get_str(c, key, v, &j->out);
    if (!strcmp(key, "family")) return parse_family(c, v, j);
    if (!strcmp(key, "symmetric")) return parse_sym(c, v, j);
    if (!strcmp(key, "p")) return parse_p(c, v, j);
    if (!strcmp(key, "tol")) return parse_tol(c, v, j);
    if (!strcmp(key, "seed")) return parse_seed(c, v, j);
    if (!strcmp(key, "sigma")) return parse_sigma(c, v, j);
    if (!strcmp(key, "components")) return parse_components(c, v, j);
    if (!strcmp(key, "windows")) {
        static const char *const wk[] = {"start", "length", "step", "count", NULL};
        j->has_windows = 1;
        j->win_step = 0;
        if (walk_map(c, "windows", v, wk, win_pair, j)) return 2;
        if (j->win_len <= 0) return perr(c, v, "windows: 'length' is required");
        if (j->win_step <= 0) j->win_step = j->win_len;
        return 0;
    }
    if (!strcmp(key, "missing")) {
        const char *m = v->type == YAML_SCALAR_NODE ? scalar(v) : "";
        if (!strcmp(m, "em")) j->missing_em = 1;
        else if (!strcmp(m, "drop")) j->drop_nonfinite = 1;
        else if (!strcmp(m, "error")) j->missing_em = 0;
        else return perr(c, v, "missing: expected drop, em or error");
        return 0;
    }
    if (!strcmp(key, "weights")) return get_str(c, key, v, &j->weights);
    if (!strcmp(key, "halflife")) {
        double h;
        if (v->type != YAML_SCALAR_NODE || ghf_parse_double(scalar(v), &h) != 0 || !(h > 0.0) || !isfinite(h))
            return perr(c, v, "halflife: expected a positive number of rows (one value: halflife is not a sweep axis)");
        j->halflife = h;
        return 0;
    }
    if (!strcmp(key, "warm_start")) return get_bool(c, key, v, &j->warm_start);
    if (!strcmp(key, "max_iter")) return get_int(c, key, v, 0, 100000000, &j->max_iter);
    if (!strcmp(key, "starts")) return get_int(c, key, v, 1, 16, &j->starts);
    if (!strcmp(key, "accel")) {
        if (v->type == YAML_SCALAR_NODE && !strcmp(scalar(v), "squarem")) j->accel = 1;
        else if (v->type == YAML_SCALAR_NODE && !strcmp(scalar(v), "none")) j->accel = 0;
        else return perr(c, v, "accel: expected squarem or none");
        return 0;
    }
    if (!strcmp(key, "backend")) {
        if (get_str(c, key, v, &j->backend)) return 2;
        if (strcmp(j->backend, "auto") && strcmp(j->backend, "cpu") && strcmp(j->backend, "cuda"))
            return perr(c, v, "backend: unknown backend '%s' (expected auto, cpu or cuda)", j->backend);
        return 0;
    }
    if (!strcmp(key, "risk") || !strcmp(key, "eval")) return parse_post(c, key, v, j);
    if (!strcmp(key, "gof")) return parse_gof(c, v, j);
    if (!strcmp(key, "optimize")) return parse_opt(c, v, j);
    if (!strcmp(key, "se")) {
        if (v->type != YAML_SCALAR_NODE || ghf_job_se_parse(scalar(v), &j->se) != 0)
            return perr(c, v, "se: expected true, false, full or subset");
        return 0;
    }
    if (!strcmp(key, "quiet")) return get_bool(c, key, v, &j->quiet);
    if (!strcmp(key, "log_iterations")) return get_bool(c, key, v, &j->log_iterations);
    if (!strcmp(key, "log_time")) return get_bool(c, key, v, &j->log_time);
    if (!strcmp(key, "rows_per_rank")) return get_i64(c, key, v, 1, &j->rows_per_rank);
    if (!strcmp(key, "checkpoint")) {
        if (is_null(v)) {
            free(j->checkpoint);
            j->checkpoint = NULL;
            return 0;
        }
        return get_str(c, key, v, &j->checkpoint);
    }
    if (!strcmp(key, "checkpoint_every")) return get_int(c, key, v, 1, 100000000, &j->checkpoint_every);
    if (!strcmp(key, "slice")) {
        if (v->type != YAML_SCALAR_NODE || ghf_parse_slice(scalar(v), &j->slice_k, &j->slice_n))
            return perr(c, v, "slice: expected K/N with 0 <= K < N");
        return 0;
    }
    return perr(c, v, "internal: key '%s' not handled", key);
}

/* libyaml's scanner takes time quadratic in the nesting depth of flow
 * collections (minutes at depth 300,000), so the depth is checked first with
 * the event parser, which stops at the first collection too deep.  Syntax
 * errors are left to the document loader (same position, same cost). */
static int check_depth(const char *text, size_t len, const char *src, char *err, size_t errlen)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        snprintf(err, errlen, "%s: cannot initialise the YAML parser", src);
        return 2;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int depth = 0, rc = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) break;
        const yaml_event_type_t t = ev.type;
        const unsigned long line = (unsigned long)ev.start_mark.line + 1;
        yaml_event_delete(&ev);
        if (t == YAML_STREAM_END_EVENT) break;
        if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) depth--;
        if ((t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) && ++depth > GHF_JOB_MAX_DEPTH) {
            snprintf(err, errlen, "%s:%lu: lists or mappings nested deeper than %d levels (the limit of a job file)",
                     src, line, GHF_JOB_MAX_DEPTH);
            rc = 2;
            break;
        }
    }
    yaml_parser_delete(&p);
    return rc;
}

int ghf_job_parse(const char *text, size_t len, const char *source, ghf_job *j, char *err, size_t errlen)
{
    ghf_job_defaults(j);
    j->source = strdup(source ? source : "job");
    yaml_parser_t parser;
    yaml_document_t doc;
    pctx c = {&doc, j->source, err, errlen};
    if (!j->source) {
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    if (len > GHF_JOB_MAX_BYTES) {
        snprintf(err, errlen, "%s: the job file has %zu bytes, more than the limit of %d (1 MiB)", c.src, len,
                 GHF_JOB_MAX_BYTES);
        return 2;
    }
    if (check_depth(text, len, c.src, err, errlen)) return 2;
    if (!yaml_parser_initialize(&parser)) {
        snprintf(err, errlen, "%s: cannot initialise the YAML parser", c.src);
        return 2;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        snprintf(err, errlen, "%s:%lu: YAML syntax error: %s%s%s", c.src,
                 (unsigned long)(parser.problem_mark.line + 1), parser.problem ? parser.problem : "unknown problem",
                 parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return 2;
    }
    int rc = 0;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        snprintf(err, errlen, "%s:1: the job file is empty", c.src);
        rc = 2;
    } else {
        static const char *const top[] = {"name", "data", "out", "family", "symmetric", "p", "tol", "seed", "windows",
                                          "warm_start", "max_iter", "starts", "accel", "backend", "quiet",
                                          "log_iterations", "log_time", "rows_per_rank", "checkpoint", "checkpoint_every",
                                          "slice", "se", "risk", "eval", "gof", "optimize", "weights", "halflife", "missing",
                                          "sigma", "components", NULL};
        rc = walk_map(&c, "", root, top, top_pair, j);
    }
    /* a second document is an error (one job per file) */
    if (rc == 0) {
        yaml_document_t doc2;
        if (yaml_parser_load(&parser, &doc2)) {
            if (yaml_document_get_root_node(&doc2)) {
                snprintf(err, errlen, "%s:%lu: only one YAML document is allowed in a job file", c.src,
                         (unsigned long)(parser.mark.line + 1));
                rc = 2;
            }
            yaml_document_delete(&doc2);
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return rc;
}

/* whether the p axis applies to a family (its p is not fixed by definition) */
static int family_p_free(ghf_family f)
{
    const ghf_family_def *fd = ghf_family_get(f);
    return fd && fd->sub != GHF_SUB_NONE && isnan(fd->family_p(1));
}

int ghf_job_check_weights(const ghf_job *j, char *err, size_t errlen)
{
    const char *s = j->source ? j->source : "job";
    if (j->weights && j->halflife > 0.0) {
        snprintf(err, errlen, "%s: weights and halflife (--weights, --halflife) cannot be combined: give one of them", s);
        return 2;
    }
    if (j->weights && (!j->weights[0] || j->weights[strlen(j->weights) - 1] == ':')) {
        snprintf(err, errlen, "%s: weights: '%s' names no dataset (DATASET or FILE:DATASET)", s, j->weights);
        return 2;
    }
    if (j->missing_em) {
        const char *why = j->drop_nonfinite ? "cannot be combined with --drop-nonfinite (missing: drop)"
                          : j->se ? "has no standard errors (--se, se:)"
                          : NULL;
        for (int i = 0; !why && i < j->n_family; i++)
            if (j->family[i] == GHF_FAMILY_GAUSS) why = "does not apply to the gauss family (a closed-form fit)";
        if (why) {
            snprintf(err, errlen, "%s: --missing em (missing: em) %s", s, why);
            return 2;
        }
    }
    if ((j->weights || j->halflife > 0.0) && j->se) {
        snprintf(err, errlen, "%s: standard errors (--se, se:) are not available for weighted fits (%s)", s,
                 j->weights ? "weights" : "halflife");
        return 2;
    }
    return 0;
}

int ghf_job_validate(const ghf_job *j, char *err, size_t errlen)
{
    const char *s = j->source ? j->source : "job";
    if (!j->data_file) {
        snprintf(err, errlen, "%s: 'data' (the input file) is required (or --data)", s);
        return 2;
    }
    if (!j->out) {
        snprintf(err, errlen, "%s: 'out' (the result file) is required (or --out)", s);
        return 2;
    }
    if (ghf_job_check_weights(j, err, errlen)) return 2;
    if (ghf_job_check_sigma(j, err, errlen)) return 2;
    if (ghf_job_check_mixture(j, err, errlen)) return 2;
    int any_free = 0;
    for (int i = 0; i < j->n_family; i++) any_free |= family_p_free(j->family[i]);
    for (int i = 0; i < j->n_p; i++) {
        if (!j->p[i].fixed) continue;
        if (!any_free) {
            snprintf(err, errlen, "%s: p: a fixed p applies to the families whose p is free (gh, vg, t); "
                     "this job fits none of them", s);
            return 2;
        }
        for (int f = 0; f < j->n_family; f++) {
            const ghf_model m = {j->family[f], 0, 1, j->p[i].value};
            char why[256];
            if (family_p_free(j->family[f]) && ghf_model_check(&m, 1, why, sizeof why)) {
                snprintf(err, errlen, "%s: p: %.17g with family %s: %s", s, j->p[i].value,
                         ghf_family_name(j->family[f]), strstr(why, ": ") ? strstr(why, ": ") + 2 : why);
                return 2;
            }
        }
    }
    if (j->eval == GHF_JOB_EVAL_NEXT && !j->has_windows) {
        snprintf(err, errlen, "%s: eval: 'next' needs rolling windows ('windows'); use eval: FILE[:/DATASET]", s);
        return 2;
    }
    if (j->slice_n < 1 || j->slice_k < 0 || j->slice_k >= j->slice_n) {
        snprintf(err, errlen, "%s: slice %d/%d: expected K/N with 0 <= K < N", s, j->slice_k, j->slice_n);
        return 2;
    }
    if (j->resume && !j->checkpoint) {
        snprintf(err, errlen, "--resume needs a checkpoint file (--checkpoint FILE or 'checkpoint:' in %s)", s);
        return 2;
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * The effective configuration
 * ------------------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const size_t room = b->cap - b->n;
        const int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? room : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if (b->p && (size_t)k < room) {
            b->n += (size_t)k;
            return;
        }
        size_t nc = b->cap ? 2 * b->cap : 1024;
        while (nc < b->n + (size_t)k + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) return;
        b->p = np;
        b->cap = nc;
    }
}

/* a YAML single-quoted scalar */
static void sb_quoted(sbuf *b, const char *s)
{
    sb_printf(b, "'");
    for (; *s; s++) {
        if (*s == '\'') sb_printf(b, "''");
        else if ((unsigned char)*s < 0x20) sb_printf(b, " ");
        else sb_printf(b, "%c", *s);
    }
    sb_printf(b, "'");
}

char *ghf_job_config_text(const ghf_job *j)
{
    sbuf b = {NULL, 0, 0};
    sb_printf(&b, "# effective configuration of ghfit run (job file %s, after command-line overrides)\n",
              j->source ? j->source : "-");
    if (j->name) {
        sb_printf(&b, "name: ");
        sb_quoted(&b, j->name);
        sb_printf(&b, "\n");
    }
    sb_printf(&b, "data:\n  file: ");
    sb_quoted(&b, j->data_file ? j->data_file : "");
    sb_printf(&b, "\n  dataset: ");
    sb_quoted(&b, j->dataset ? j->dataset : "/X");
    sb_printf(&b, "\n");
    if (j->rows_start > 0 || j->rows_len >= 0) {
        sb_printf(&b, "  rows: {start: %lld", (long long)j->rows_start);
        if (j->rows_len >= 0) sb_printf(&b, ", length: %lld", (long long)j->rows_len);
        sb_printf(&b, "}\n");
    }
    sb_printf(&b, "  drop_nonfinite: %s\n", j->drop_nonfinite ? "true" : "false");
    if (j->weights) {
        sb_printf(&b, "weights: ");
        sb_quoted(&b, j->weights);
        sb_printf(&b, "\n");
    }
    if (j->halflife > 0.0) sb_printf(&b, "halflife: %.17g\n", j->halflife);
    if (j->missing_em) sb_printf(&b, "missing: em\n");
    sb_printf(&b, "out: ");
    sb_quoted(&b, j->out ? j->out : "");
    sb_printf(&b, "\nfamily: [");
    for (int i = 0; i < j->n_family; i++) sb_printf(&b, "%s%s", i ? ", " : "", ghf_family_name(j->family[i]));
    sb_printf(&b, "]\n");
    if (j->n_sym != 1 || j->sym[0]) {
        sb_printf(&b, "symmetric: [");
        for (int i = 0; i < j->n_sym; i++) sb_printf(&b, "%s%s", i ? ", " : "", j->sym[i] ? "true" : "false");
        sb_printf(&b, "]\n");
    }
    sb_printf(&b, "p: [");
    for (int i = 0; i < j->n_p; i++) {
        if (j->p[i].fixed) sb_printf(&b, "%s%.17g", i ? ", " : "", j->p[i].value);
        else sb_printf(&b, "%sfree", i ? ", " : "");
    }
    sb_printf(&b, "]\ntol: [");
    for (int i = 0; i < j->n_tol; i++) sb_printf(&b, "%s%.17g", i ? ", " : "", j->tol[i]);
    sb_printf(&b, "]\nseed: [");
    for (int i = 0; i < j->n_seed; i++) sb_printf(&b, "%s%lld", i ? ", " : "", (long long)j->seed[i]);
    sb_printf(&b, "]\n");
    if (sigma_nonfull(j)) {
        sb_printf(&b, "sigma: [");
        for (int i = 0; i < j->n_sigma; i++) {
            char lb[24];
            sb_printf(&b, "%s%s", i ? ", " : "", ghf_sigma_label(j->sigma[i], lb, sizeof lb));
        }
        sb_printf(&b, "]\n");
    }
    if (ghf_job_mixture(j)) {
        sb_printf(&b, "components: [");
        for (int i = 0; i < j->n_comp; i++) sb_printf(&b, "%s%d", i ? ", " : "", j->comp[i]);
        sb_printf(&b, "]\n");
    }
    if (j->has_windows) {
        sb_printf(&b, "windows: {start: %lld, length: %lld, step: %lld", (long long)j->win_start,
                  (long long)j->win_len, (long long)j->win_step);
        if (j->win_count > 0) sb_printf(&b, ", count: %lld", (long long)j->win_count);
        sb_printf(&b, "}\n");
    }
    sb_printf(&b, "accel: %s\n", j->accel ? "squarem" : "none");
    sb_printf(&b, "warm_start: %s\nmax_iter: %d\nstarts: %d\nbackend: %s\nquiet: %s\nlog_iterations: %s\n",
              j->warm_start ? "true" : "false", j->max_iter, j->starts, j->backend ? j->backend : "auto",
              j->quiet ? "true" : "false", j->log_iterations ? "true" : "false");
    if (j->log_time) sb_printf(&b, "log_time: true\n");
    if (j->se) sb_printf(&b, "se: %s\n", ghf_job_se_name(j->se));
    if (j->risk_file) {
        char t[8192];
        snprintf(t, sizeof t, "%s:%s", j->risk_file, j->risk_dataset ? j->risk_dataset : "/W");
        sb_printf(&b, "risk: {portfolios: ");
        sb_quoted(&b, t);
        sb_printf(&b, ", alpha: [");
        for (int i = 0; i < j->risk_n_alpha; i++) { /* the shortest text that reads back the same */
            char v[32];
            for (int prec = 15; prec <= 17; prec++)
                if (snprintf(v, sizeof v, "%.*g", prec, j->risk_alpha[i]), strtod(v, NULL) == j->risk_alpha[i]) break;
            sb_printf(&b, "%s%s", i ? ", " : "", v);
        }
        sb_printf(&b, "]}\n");
    }
    if (j->eval == GHF_JOB_EVAL_NEXT) sb_printf(&b, "eval: next\n");
    if (j->eval == GHF_JOB_EVAL_FILE) {
        char t[8192];
        snprintf(t, sizeof t, "%s:%s", j->eval_file, j->eval_dataset ? j->eval_dataset : "/X");
        sb_printf(&b, "eval: ");
        sb_quoted(&b, t);
        sb_printf(&b, "\n");
    }
    if (j->gof) {
        sb_printf(&b, "gof: {bootstrap: %d, qq: %d, seed: %lld", j->gof_bootstrap, j->gof_qq, (long long)j->gof_seed);
        if (j->gof_file) {
            char t[8192];
            snprintf(t, sizeof t, "%s:%s", j->gof_file, j->gof_dataset ? j->gof_dataset : "/X");
            sb_printf(&b, ", data: ");
            sb_quoted(&b, t);
        }
        sb_printf(&b, "}\n");
    }
    if (j->opt) {
        static const char *const m[3] = {"sd", "var", "es"}, *const t[3] = {"min-risk", "target-return", "tangency"};
        sb_printf(&b, "optimize: {measure: %s, alpha: %.17g, type: %s, long_only: %s, budget: %.17g, losses: %s",
                  m[j->opt_measure], j->opt_alpha, t[j->opt_type], j->opt_long_only ? "true" : "false", j->opt_budget,
                  j->opt_losses ? "true" : "false");
        if (isfinite(j->opt_lo) || isfinite(j->opt_hi)) sb_printf(&b, ", bounds: [%.17g, %.17g]", j->opt_lo, j->opt_hi);
        if (j->opt_has_target) sb_printf(&b, ", target_return: %.17g", j->opt_target);
        if (j->opt_type == 2) sb_printf(&b, ", risk_free: %.17g", j->opt_rf);
        sb_printf(&b, "}\n");
    }
    sb_printf(&b, "rows_per_rank: %lld\n", (long long)j->rows_per_rank);
    if (j->checkpoint) {
        sb_printf(&b, "checkpoint: ");
        sb_quoted(&b, j->checkpoint);
        sb_printf(&b, "\n");
    } else {
        sb_printf(&b, "checkpoint: null\n");
    }
    sb_printf(&b, "checkpoint_every: %d\n", j->checkpoint_every);
    if (j->slice_n > 1) sb_printf(&b, "slice: '%d/%d'\n", j->slice_k, j->slice_n);
    return b.p;
}

uint64_t ghf_hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

uint64_t ghf_job_hash(const ghf_job *j)
{
    char buf[512];
    uint64_t h = GHF_HASH_INIT;
    snprintf(buf, sizeof buf, "run|%s|%lld|%lld|%d|", j->dataset ? j->dataset : "/X", (long long)j->rows_start,
             (long long)j->rows_len, j->drop_nonfinite);
    h = ghf_hash_bytes(h, buf, strlen(buf));
    for (int i = 0; i < j->n_family; i++) { /* at least 3 bytes, zero-padded (gh, nig: as before) */
        char fb[16] = {0};
        snprintf(fb, sizeof fb, "%s", ghf_family_name(j->family[i]));
        h = ghf_hash_bytes(h, fb, strlen(fb) < 3 ? 3 : strlen(fb));
    }
    if (j->n_sym != 1 || j->sym[0])
        for (int i = 0; i < j->n_sym; i++) h = ghf_hash_bytes(h, j->sym[i] ? "sym1|" : "sym0|", 5);
    for (int i = 0; i < j->n_p; i++) {
        snprintf(buf, sizeof buf, "p%d:%.17g|", j->p[i].fixed, j->p[i].fixed ? j->p[i].value : 0.0);
        h = ghf_hash_bytes(h, buf, strlen(buf));
    }
    for (int i = 0; i < j->n_tol; i++) {
        snprintf(buf, sizeof buf, "t%.17g|", j->tol[i]);
        h = ghf_hash_bytes(h, buf, strlen(buf));
    }
    for (int i = 0; i < j->n_seed; i++) {
        snprintf(buf, sizeof buf, "s%lld|", (long long)j->seed[i]);
        h = ghf_hash_bytes(h, buf, strlen(buf));
    }
    if (sigma_nonfull(j)) /* full alone: the hash of before the sigma axis */
        for (int i = 0; i < j->n_sigma; i++) {
            snprintf(buf, sizeof buf, "sig%d|", j->sigma[i]);
            h = ghf_hash_bytes(h, buf, strlen(buf));
        }
    if (ghf_job_mixture(j)) /* K = 1 alone: the hash of before the components axis */
        for (int i = 0; i < j->n_comp; i++) {
            snprintf(buf, sizeof buf, "K%d|", j->comp[i]);
            h = ghf_hash_bytes(h, buf, strlen(buf));
        }
    snprintf(buf, sizeof buf, "w%d:%lld:%lld:%lld:%lld|ws%d|mi%d|st%d|ac%d|be%s|sl%d/%d", j->has_windows,
             (long long)j->win_start, (long long)j->win_len, (long long)j->win_step, (long long)j->win_count,
             j->warm_start, j->max_iter, j->starts, j->accel, j->backend ? j->backend : "auto", j->slice_k, j->slice_n);
    h = ghf_hash_bytes(h, buf, strlen(buf));
    if (j->missing_em) h = ghf_hash_bytes(h, "|miss-em", 8);
    if (j->weights || j->halflife > 0.0) { /* weighted EM: other weights, other fits */
        snprintf(buf, sizeof buf, "|wt%s|hl%.17g", j->weights ? j->weights : "", j->halflife);
        h = ghf_hash_bytes(h, buf, strlen(buf));
    }
    if (j->se) { /* a resumed run keeps its records: their SEs must have been asked for the same way */
        snprintf(buf, sizeof buf, "|se%d", j->se);
        h = ghf_hash_bytes(h, buf, strlen(buf));
    }
    return h;
}

const char *ghf_job_se_name(int se)
{
    switch (se) {
    case GHF_JOB_SE_AUTO: return "true";
    case GHF_JOB_SE_FULL: return "full";
    case GHF_JOB_SE_SUBSET: return "subset";
    default: return "false";
    }
}

int ghf_job_se_parse(const char *s, int *se)
{
    if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on") || !strcmp(s, "auto"))
        *se = GHF_JOB_SE_AUTO;
    else if (!strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off")) *se = GHF_JOB_SE_OFF;
    else if (!strcmp(s, "full")) *se = GHF_JOB_SE_FULL;
    else if (!strcmp(s, "subset")) *se = GHF_JOB_SE_SUBSET;
    else return -1;
    return 0;
}

uint64_t ghf_job_identity(const ghf_job *j)
{
    ghf_job whole = *j; /* shallow: ghf_job_hash only reads */
    whole.slice_k = 0;
    whole.slice_n = 1;
    const uint64_t h = ghf_job_hash(&whole);
    const char *data = j->data_file ? j->data_file : "";
    return ghf_hash_bytes(ghf_hash_bytes(h, "|data|", 6), data, strlen(data));
}

/* ---------------------------------------------------------------------------
 * Sweep expansion
 * ------------------------------------------------------------------------- */

void ghf_axis_labels(const double *v, int n, char (*lab)[GHF_JOB_LABEL_LEN])
{
    int clash[GHF_JOB_MAX_AXIS] = {0};
    for (int i = 0; i < n; i++) snprintf(lab[i], GHF_JOB_LABEL_LEN, "%g", v[i]);
    for (int i = 0; i < n && i < GHF_JOB_MAX_AXIS; i++)
        for (int j = 0; j < n; j++) clash[i] |= j != i && v[j] != v[i] && strcmp(lab[i], lab[j]) == 0;
    /* values that print alike with %g: more digits, the fewest that tell them apart */
    for (int i = 0; i < n && i < GHF_JOB_MAX_AXIS; i++) {
        if (!clash[i]) continue;
        char mine[GHF_JOB_LABEL_LEN];
        for (int prec = 7; prec <= 17; prec++) {
            snprintf(mine, sizeof mine, "%.*g", prec, v[i]);
            int same = 0;
            for (int j = 0; j < n && !same; j++) {
                char other[GHF_JOB_LABEL_LEN];
                snprintf(other, sizeof other, "%.*g", prec, v[j]);
                same = j != i && v[j] != v[i] && strcmp(mine, other) == 0;
            }
            if (!same) break;
        }
        snprintf(lab[i], GHF_JOB_LABEL_LEN, "%s", mine);
    }
}

/* the name of a fit from its axis labels; its length (may exceed len - 1):
 * FAMILY[_diag|_fR][_sym][_pLABEL]_tolLABEL_sSEED[_kK][_wWINDOW], the p label
 * for the families whose p is free, _kK in jobs with mixtures (klab) */
static int spec_name(const ghf_fit_spec *s, int klab, const char *plab, const char *tlab, char *buf, size_t len)
{
    char p[GHF_JOB_LABEL_LEN + 8] = "", w[24] = "", sg[24] = "";
    if (family_p_free(s->family)) snprintf(p, sizeof p, "_p%.*s", GHF_JOB_LABEL_LEN - 1, s->fix_p ? plab : "free");
    if (s->window >= 0) snprintf(w, sizeof w, "_w%06d", s->window);
    if (s->sigma_r == 0) snprintf(sg, sizeof sg, "_diag");
    else if (s->sigma_r > 0) snprintf(sg, sizeof sg, "_f%d", s->sigma_r);
    char kl[24] = "";
    if (klab) snprintf(kl, sizeof kl, "_k%d", s->components); /* a job with mixtures: every fit name carries its K */
    return snprintf(buf, len, "%s%s%s%s_tol%.*s_s%lld%s%s", ghf_family_name(s->family), sg, s->symmetric ? "_sym" : "", p,
                    GHF_JOB_LABEL_LEN, tlab, (long long)s->seed, kl, w);
}

void ghf_job_assign_groups(const ghf_fit_spec *s, int n, int G, int *group_of)
{
    int min_chain = n;
    for (int i = 0; i < n;) {
        int k = i;
        while (k < n && s[k].chain == s[i].chain) k++;
        if (k - i < min_chain) min_chain = k - i;
        i = k;
    }
    if (min_chain >= G) {
        for (int i = 0; i < n;) {
            int k = i;
            while (k < n && s[k].chain == s[i].chain) k++;
            const int m = k - i;
            for (int q = 0; q < m; q++) group_of[i + q] = (int)((int64_t)q * G / m);
            i = k;
        }
    } else {
        for (int i = 0; i < n; i++) group_of[i] = i % G;
    }
}

int ghf_parse_slice(const char *s, int *k, int *n)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", s);
    char *c = strchr(buf, '/');
    if (!c) return -1;
    *c = '\0';
    int kk, nn;
    if (ghf_parse_int(buf, &kk) || ghf_parse_int(c + 1, &nn) || nn < 1 || kk < 0 || kk >= nn) return -1;
    *k = kk;
    *n = nn;
    return 0;
}

/* Every fit name distinct and at most 63 characters long: the labels of an
 * axis differ (ghf_axis_labels), and the longest combination fits.  0, or 2
 * naming the values. */
static int names_check(const ghf_job *j, int64_t nwin, char (*plab)[GHF_JOB_LABEL_LEN],
                       char (*tlab)[GHF_JOB_LABEL_LEN], char *err, size_t errlen)
{
    const char *src = j->source ? j->source : "job";
    for (int a = 0; a < j->n_tol; a++)
        for (int b = a + 1; b < j->n_tol; b++)
            if (!strcmp(tlab[a], tlab[b])) {
                snprintf(err, errlen, "%s: tol: the values %.17g and %.17g give the same fit name (tol%s)", src,
                         j->tol[a], j->tol[b], tlab[a]);
                return 2;
            }
    for (int a = 0; a < j->n_p; a++)
        for (int b = a + 1; b < j->n_p; b++)
            if (j->p[a].fixed && j->p[b].fixed && !strcmp(plab[a], plab[b])) {
                snprintf(err, errlen, "%s: p: the values %.17g and %.17g give the same fit name (p%s)", src,
                         j->p[a].value, j->p[b].value, plab[a]);
                return 2;
            }
    for (int f = 0; f < j->n_family; f++)
        for (int pi = 0; pi < (family_p_free(j->family[f]) ? j->n_p : 1); pi++)
            for (int ti = 0; ti < j->n_tol; ti++)
                for (int si = 0; si < j->n_seed; si++) {
                    ghf_fit_spec s = {0};
                    s.family = j->family[f];
                    s.symmetric = j->sym[0] || j->sym[j->n_sym - 1]; /* the longer name, if any */
                    s.fix_p = family_p_free(s.family) && j->p[pi].fixed;
                    s.seed = j->seed[si];
                    s.sigma_r = -1;
                    for (int q = 0; q < j->n_sigma; q++) /* the longest label */
                        if (j->sigma[q] > s.sigma_r) s.sigma_r = j->sigma[q];
                    s.components = 1;
                    for (int q = 0; q < j->n_comp; q++) /* the longest label */
                        if (j->comp[q] > s.components) s.components = j->comp[q];
                    s.window = j->has_windows ? (int)(nwin - 1) : -1;
                    char buf[256];
                    if (spec_name(&s, ghf_job_mixture(j), plab[pi], tlab[ti], buf, sizeof buf) > 63) {
                        snprintf(err, errlen, "%s: the fit name %s (p %s, tol %.17g, seed %lld) is longer than 63 characters",
                                 src, buf, s.fix_p ? plab[pi] : "free", j->tol[ti], (long long)s.seed);
                        return 2;
                    }
                }
    return 0;
}

int ghf_job_expand(const ghf_job *j, int64_t n_rows, ghf_fit_spec **specs, int *n_specs, int *n_total,
                   char *err, size_t errlen)
{
    *specs = NULL;
    *n_specs = *n_total = 0;
    const char *src = j->source ? j->source : "job";
    /* the data window */
    const int64_t d0 = j->rows_start;
    if (d0 >= n_rows) {
        snprintf(err, errlen, "%s: data.rows.start %lld is beyond the %lld rows of %s", src, (long long)d0,
                 (long long)n_rows, j->data_file);
        return 2;
    }
    int64_t dlen = j->rows_len >= 0 ? j->rows_len : n_rows - d0;
    if (d0 + dlen > n_rows) {
        snprintf(err, errlen, "%s: data.rows %lld + %lld exceeds the %lld rows of %s", src, (long long)d0,
                 (long long)dlen, (long long)n_rows, j->data_file);
        return 2;
    }
    int64_t nwin = 1;
    if (j->has_windows) {
        if (j->win_start > dlen || j->win_len > dlen - j->win_start) { /* no overflow near INT64_MAX */
            snprintf(err, errlen, "%s: windows: the first window (start %lld, length %lld) does not fit in the %lld rows of the data",
                     src, (long long)j->win_start, (long long)j->win_len, (long long)dlen);
            return 2;
        }
        const int64_t fit = (dlen - j->win_start - j->win_len) / j->win_step + 1;
        if (j->win_count > 0) {
            if (j->win_count > fit) {
                snprintf(err, errlen, "%s: windows: %lld windows of %lld rows every %lld rows need %lld rows; the data have %lld",
                         src, (long long)j->win_count, (long long)j->win_len, (long long)j->win_step,
                         (long long)(j->win_start + (j->win_count - 1) * j->win_step + j->win_len), (long long)dlen);
                return 2;
            }
            nwin = j->win_count;
        } else {
            nwin = fit;
        }
        if (nwin > 999999) {
            snprintf(err, errlen, "%s: windows: %lld windows (at most 999999)", src, (long long)nwin);
            return 2;
        }
    }
    /* chains: family x components x sigma x symmetric x p (families with a free p) x tol x seed */
    int64_t nchain = 0;
    for (int f = 0; f < j->n_family; f++)
        nchain += (int64_t)j->n_comp * j->n_sigma * j->n_sym * (family_p_free(j->family[f]) ? j->n_p : 1) * j->n_tol * j->n_seed;
    const int64_t total = nchain * nwin;
    if (total > 10000000) {
        snprintf(err, errlen, "%s: the sweep has %lld fits (at most 10,000,000)", src, (long long)total);
        return 2;
    }
    /* the axes' labels in fit names; every name must fit in 63 characters */
    char plab[GHF_JOB_MAX_AXIS][GHF_JOB_LABEL_LEN], tlab[GHF_JOB_MAX_AXIS][GHF_JOB_LABEL_LEN];
    double pv[GHF_JOB_MAX_AXIS];
    for (int i = 0; i < j->n_p; i++) pv[i] = j->p[i].fixed ? j->p[i].value : NAN;
    ghf_axis_labels(pv, j->n_p, plab);
    ghf_axis_labels(j->tol, j->n_tol, tlab);
    if (names_check(j, nwin, plab, tlab, err, errlen)) return 2;
    ghf_fit_spec *all = calloc((size_t)total + 1, sizeof *all);
    int *group_of = j->slice_n > 1 ? malloc(((size_t)total + 1) * sizeof(int)) : NULL;
    if (!all || (j->slice_n > 1 && !group_of)) {
        free(all);
        free(group_of);
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    int idx = 0, chain = 0;
    for (int f = 0; f < j->n_family; f++)
    for (int ki = 0; ki < j->n_comp; ki++)
    for (int gi = 0; gi < j->n_sigma; gi++) {
        const int np = family_p_free(j->family[f]) ? j->n_p : 1;
        for (int yi = 0; yi < j->n_sym; yi++)
            for (int pi = 0; pi < np; pi++)
                for (int ti = 0; ti < j->n_tol; ti++)
                    for (int si = 0; si < j->n_seed; si++, chain++)
                        for (int64_t w = 0; w < nwin; w++, idx++) {
                            ghf_fit_spec *s = &all[idx];
                            s->index = idx;
                            s->family = j->family[f];
                            s->symmetric = j->sym[yi];
                            s->fix_p = family_p_free(s->family) && j->p[pi].fixed;
                            s->p = s->fix_p ? j->p[pi].value : 0.0;
                            s->tol = j->tol[ti];
                            s->seed = j->seed[si];
                            s->sigma_r = j->sigma[gi];
                            s->components = j->comp[ki];
                            s->chain = chain;
                            if (j->has_windows) {
                                s->window = (int)w;
                                s->row_start = d0 + j->win_start + w * j->win_step;
                                s->row_len = j->win_len;
                            } else {
                                s->window = -1;
                                s->row_start = d0;
                                s->row_len = dlen;
                            }
                            if (j->fit_name && total == 1) snprintf(s->name, sizeof s->name, "%s", j->fit_name);
                            else spec_name(s, ghf_job_mixture(j), plab[pi], tlab[ti], s->name, sizeof s->name);
                        }
    }
    /* the slice: the fits of group K of N (contiguous blocks of each chain) */
    int ns = (int)total;
    ghf_fit_spec *out = all;
    if (j->slice_n > 1) {
        ghf_job_assign_groups(all, (int)total, j->slice_n, group_of);
        ns = 0;
        for (int i = 0; i < (int)total; i++)
            if (group_of[i] == j->slice_k) all[ns++] = all[i];
    }
    free(group_of);
    if (ns == 0) {
        free(out);
        snprintf(err, errlen, "%s: slice %d/%d selects none of the %lld fits", src, j->slice_k, j->slice_n,
                 (long long)total);
        return 2;
    }
    *specs = out;
    *n_specs = ns;
    *n_total = (int)total;
    return 0;
}
