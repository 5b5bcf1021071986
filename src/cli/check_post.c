/* check_post.c - `ghfit check eval|gof|sample|risk|optimize ARGS`: what those
 * commands check before they start, in one process without MPI and in their
 * order, with their own functions and messages: the options (the command's
 * parser), the fit of --model, the data (shape, type, the fit's dimension, a
 * sample of rows) or risk's portfolios, the output (nothing created, no
 * lock taken).  Nothing is scored, drawn or computed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gofboot.h"
#include "model.h"
#include "postcmd.h"
#include "util.h"

typedef struct post {
    int ranks;
    char file[4096], name[64]; /* --model's file and fit name */
    ghf_fit_law law;           /* its law (eval, gof, sample) */
    ghf_family fam;
    int64_t n_rows;            /* the data's shape */
    int d;
    ghf_h5_sample s;           /* the sample of its rows */
    char ok[1600];             /* what the command would do */
    char err[16384];           /* the error line (empty when the parser printed it) */
} post;

/* The fit of --model R.h5[:/fits/NAME], loaded as the commands load it. */
static int step_model(post *p, const char *ref)
{
    int st = ghf_model_ref_parse(ref, p->file, sizeof p->file, p->name, sizeof p->name, p->err, sizeof p->err);
    if (!st) st = ghf_fit_law_load_local(p->file, p->name, &p->law, &p->fam, p->err, sizeof p->err);
    if (st) return st;
    char kc[48] = "";
    if (p->law.n_components >= 2) snprintf(kc, sizeof kc, "%d-component mixture of ", p->law.n_components);
    ghf__check_line("model", "%s:/fits/%s: %s%s, d = %d (status: %s)", p->file, p->law.name, kc, p->law.family,
                    p->law.d, p->law.status[0] ? p->law.status : "unknown");
    return 0;
}

/* The inputs then the outputs of the command's plan, creating nothing,
 * then the data's columns against the fit's dimension. */
static int step_files(post *p, ghf_io_plan plan)
{
    plan.dry = 1;
    char held[4096];
    int st = ghf_io_check_local(&plan, &p->n_rows, &p->d, held, sizeof held, p->err, sizeof p->err);
    if (!st && plan.data)
        st = ghf_law_dim_check(plan.data, plan.dataset, p->d, &p->law, p->file, p->err, sizeof p->err);
    if (st) return st;
    if (plan.data)
        ghf__check_line("data", "%s:%s: %lld rows x %d columns", plan.data, plan.dataset, (long long)p->n_rows, p->d);
    ghf__check_output_line(plan.out);
    return 0;
}

/* A sample of the rows of data:dataset (all of them when few). */
static int step_sample(post *p, const char *data, const char *dataset)
{
    return ghf_h5_sample_rows(data, dataset, 0, -1, &p->s, p->err, sizeof p->err);
}

/* The fit's Sigma must be positive definite (what the run finds when it
 * derives the law): 0, or 2 with the run's message (fmt: file, name, family). */
static int step_sigma(post *p, const char *fmt)
{
    const int d = p->law.d;
    if (p->law.n_components >= 2) return 0; /* every component's: checked as the fit was loaded */
    double *L = malloc((size_t)d * (size_t)d * sizeof(double));
    if (!L) {
        snprintf(p->err, sizeof p->err, "check: out of memory (d = %d)", d);
        return GHF_EXIT_RUNTIME;
    }
    const int bad = ghf_cholesky(d, p->law.sigma, L) != 0;
    free(L);
    if (!bad) return 0;
    snprintf(p->err, sizeof p->err, fmt, p->file, p->law.name, p->law.family);
    return GHF_EXIT_USAGE;
}

static int check_eval(post *p, int argc, char **argv)
{
    ghf_eval_args a;
    int st = ghf_eval_parse(argc, argv, &a);
    if (st) return st;
    ghf__check_line("options", "ok: scores of %s:%s under %s into %s", a.o.data, a.o.dataset, a.model, a.o.out);
    if ((st = step_model(p, a.model))) return st;
    if ((st = step_sigma(p, "%s:/fits/%s: not a valid %s law: Sigma is not positive definite (or the law's "
                            "constants are not finite)")))
        return st;
    a.o.model_file = p->file;
    a.o.fit_name = p->name;
    if ((st = step_files(p, ghf_eval_plan(&a.o, p->ranks)))) return st;
    if ((st = step_sample(p, a.o.data, a.o.dataset))) return st;
    ghf__check_sample_line(&p->s, ", to be flagged in /nonfinite"); /* eval keeps such rows */
    snprintf(p->ok, sizeof p->ok, "score %lld rows under %.1000s:/fits/%s", (long long)p->n_rows, p->file,
             p->law.name);
    return 0;
}

static int check_sample(post *p, int argc, char **argv)
{
    ghf_sample_opts so;
    int st = ghf_sample_parse(argc, argv, &so);
    if (st) return st;
    ghf__check_line("options", "ok: %lld draws (seed %lld) from %s into %s:%s (%s)", (long long)so.n,
                    (long long)so.seed, so.model, so.out, so.dataset, so.bits == 32 ? "float32" : "float64");
    if ((st = step_model(p, so.model))) return st;
    if ((st = step_files(p, ghf_sample_plan(&so, p->file, p->ranks)))) return st;
    const int d = p->law.d;
    if ((st = ghf_rows_mem_check("sample --n", so.n, d, p->ranks, GHF_SAMPLE_BYTES_PER_VALUE, p->err, sizeof p->err)))
        return st;
    ghf_params t;
    ghf_mixture mx;
    memset(&t, 0, sizeof t);
    memset(&mx, 0, sizeof mx);
    const int K = p->law.n_components;
    double *L = calloc((size_t)d * (size_t)d * (size_t)(K >= 2 ? K : 1), sizeof(double));
    if ((K >= 2 ? ghf_mixture_alloc(&mx, K, d) : ghf_params_alloc(&t, d)) != 0 || !L) {
        snprintf(p->err, sizeof p->err, "sample: out of memory for the fit's parameters (d = %d)", d);
        st = GHF_EXIT_RUNTIME;
    } else if (K >= 2) {
        st = ghf_sample_mix_law(&p->law, p->file, &mx, L, p->err, sizeof p->err);
    } else {
        st = ghf_sample_law(&p->law, p->file, &t, L, p->err, sizeof p->err);
    }
    free(L);
    ghf_params_free(&t);
    ghf_mixture_free(&mx);
    snprintf(p->ok, sizeof p->ok, "draw %lld rows x %d from %.1000s:/fits/%s", (long long)so.n, d, p->file,
             p->law.name);
    return st;
}

/* What gof refuses of the rows once read, as far as the sample tells. */
static int gof_rows(post *p, const ghf_gof_opts *o)
{
    const ghf_h5_sample *s = &p->s;
    int st = ghf__check_nonfinite(o->data, o->dataset, s, o->drop, p->err, sizeof p->err);
    if (st) return st;
    /* the rows gof keeps: exact unless rows are dropped from a window only sampled */
    const int exact = !o->drop || s->all || s->n_bad == 0;
    const int64_t kept = p->n_rows - (o->drop && s->all ? s->n_bad : 0);
    if (exact && (st = ghf_gof_rows_check(kept, p->ranks, p->err, sizeof p->err))) return st;
    if (exact && (st = ghf_gof_min_rows(o, kept, p->err, sizeof p->err))) return st;
    if (!exact && ghf_gof_rows_check(kept, p->ranks, p->err, sizeof p->err))
        ghf_warning0("%s (unless --drop-nonfinite drops enough rows)", p->err);
    p->err[0] = '\0';
    ghf__check_sample_line(s, o->drop ? ", to be dropped" : "");
    if (o->B > 0 && (st = ghf_gof_boot_check(o->B, p->d, p->err, sizeof p->err))) return st;
    return 0;
}

static int check_gof(post *p, int argc, char **argv)
{
    ghf_gof_opts o;
    int st = ghf_gof_parse(argc, argv, &o);
    if (st) return st;
    ghf__check_line("options", "ok: goodness of fit of %s:%s under %s into %s%s", o.data, o.dataset, o.model, o.out,
                    o.B > 0 ? " with a parametric bootstrap" : "");
    if ((st = step_model(p, o.model))) return st;
    if ((st = ghf_gof_law_check(&p->law, p->file, o.B, p->err, sizeof p->err))) return st;
    if ((st = step_sigma(p, "%s:/fits/%s: the fit's Sigma is not positive definite%.0s"))) return st;
    o.model = p->file;
    if ((st = step_files(p, ghf_gof_plan(&o, p->file, p->ranks)))) return st;
    if ((st = step_sample(p, o.data, o.dataset))) return st;
    if ((st = gof_rows(p, &o))) return st;
    char boot[96] = "";
    if (o.B > 0) snprintf(boot, sizeof boot, ", with %d bootstrap replicates (each a refit)", o.B);
    snprintf(p->ok, sizeof p->ok, "check %lld rows under %.1000s:/fits/%s%s", (long long)p->n_rows, p->file,
             p->law.name, boot);
    return 0;
}

static int check_risk(post *p, int argc, char **argv)
{
    ghf_risk_opts o;
    int st = ghf_risk_parse(argc, argv, &o);
    if (st) return st;
    ghf__check_line("options", "ok: VaR and ES at %d level%s of the portfolios %s:%s under %s into %s", o.K,
                    o.K == 1 ? "" : "s", o.wfile, o.wdset, o.model, o.out);
    ghf_risk_model md;
    memset(&md, 0, sizeof md);
    st = ghf_risk_check(&o, &md, 1, p->err, sizeof p->err);
    free(md.mu), free(md.gamma), free(md.sigma), free(md.B), free(md.prop), free(md.cp);
    if (st) return st;
    char kc[48] = "";
    if (md.n_components >= 2) snprintf(kc, sizeof kc, "%d-component mixture of ", md.n_components);
    ghf__check_line("model", "%s:/fits/%s: %s%s, d = %d", o.model, o.fit, kc, md.family, md.d);
    ghf__check_line("portfolios", "%s:%s: %lld portfolios x %d weights", o.wfile, o.wdset, (long long)md.P, md.d);
    ghf__check_output_line(o.out);
    if ((st = step_sample(p, o.wfile, o.wdset))) return st;
    if ((st = ghf__check_nonfinite(o.wfile, o.wdset, &p->s, 0, p->err, sizeof p->err))) { /* risk drops none */
        ghf_risk_nonfinite_msg(p->err, sizeof p->err);
        return st;
    }
    ghf__check_sample_line(&p->s, "");
    snprintf(p->ok, sizeof p->ok, "compute VaR and ES of %lld portfolios at %d level%s under %.1000s:/fits/%s",
             (long long)md.P, o.K, o.K == 1 ? "" : "s", o.model, o.fit);
    return 0;
}

int ghf__check_post(int argc, char **argv, int n_ranks, double t0)
{
    post *p = calloc(1, sizeof *p);
    if (!p) {
        ghf_error0("check: out of memory");
        return GHF_EXIT_RUNTIME;
    }
    p->ranks = n_ranks;
    const char *cmd = argv[0];
    int st = !strcmp(cmd, "eval")     ? check_eval(p, argc, argv)
             : !strcmp(cmd, "sample") ? check_sample(p, argc, argv)
             : !strcmp(cmd, "gof")    ? check_gof(p, argc, argv)
             : !strcmp(cmd, "optimize") ? ghf_optimize_check(argc, argv, p->ok, sizeof p->ok, p->err, sizeof p->err)
                                      : check_risk(p, argc, argv);
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double secs = (double)t1.tv_sec + 1e-9 * (double)t1.tv_nsec - t0;
    if (st < 0) { /* --help among the command's arguments */
        ghf__check_usage(stdout);
        st = GHF_EXIT_OK;
    } else if (st) {
        fflush(stdout);
        if (p->err[0]) ghf_error0("%s", p->err); /* else the parser printed it */
    } else {
        printf("ghfit check: ok: `ghfit %s` would %s (checked in %.2f s)\n", cmd, p->ok, secs);
    }
    ghf_fit_law_free(&p->law);
    free(p);
    return st;
}
