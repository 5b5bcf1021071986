/* cmd_check.c - `ghfit check [--ranks P] fit|run ARGS`: everything that can
 * be validated without fitting, in one process and without MPI (a login
 * node, the first step of a batch script): the options and the job file,
 * the data set (shape, type, a sample of rows), the weights and the files
 * of the job keys risk/eval/gof, the outputs and the
 * checkpoint (nothing is created, no lock is taken), the fits a sweep
 * expands to, the groups, the backends and the memory per rank.  The checks
 * are the run's own functions, in the run's order, with its messages.
 * `ghfit check eval|gof|sample|risk|optimize` is check_post.c; this file holds the
 * report's lines and sample checks that both share. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "backend.h"
#include "commands.h"
#include "ghf_version.h"
#include "h5io.h"
#include "iocheck.h"
#include "job.h"
#include "pipeline.h"
#include "postfit.h"
#include "postcmd.h"
#include "resume.h"
#include "util.h"

typedef struct check {
    ghf_pipe_mode mode;
    int ranks;
    const char *ranks_from;
    ghf_job job;
    int64_t n_rows;
    int d;
    ghf_fit_spec *specs;
    int n_specs, n_total, G;
    ghf_h5_sample sample;
    char err[1024];
} check;

void ghf__check_usage(FILE *f)
{
    fprintf(f,
            "usage: ghfit check [--ranks P] fit ARGS...        (the arguments of ghfit fit)\n"
            "       ghfit check [--ranks P] run JOB.yaml [overrides]\n"
            "       ghfit check eval|gof|sample|risk|optimize ARGS...   (the arguments of that command)\n"
            "  Checks, in seconds and without fitting, what the same `ghfit fit|run` would check\n"
            "  before it fits, and more: the options and the job file; the data set, its shape and\n"
            "  type, and a sample of its rows (all of a window of at most %d rows, else 512 rows in\n"
            "  blocks spread over it) for non-finite values and constant columns; the output and\n"
            "  the checkpoint (writable, not an input, not another program's file, not locked by a\n"
            "  running ghfit; with --resume, that the checkpoint belongs to this run); the weights\n"
            "  dataset (one value per row) and the files of the job keys risk, eval, gof; the backend\n"
            "  against this binary (%s); the fits a sweep expands to, the groups on P ranks, and\n"
            "  the memory per rank.  Creates nothing.  Run it as one process (not under mpirun).\n"
            "  For eval, gof, sample and risk: the options; the fit of --model (the file, a ghfit\n"
            "  result, the fit named or the only one, a usable law); --data (shape, type, the fit's\n"
            "  dimension, a sample of rows as above) or risk's --portfolios; the output; without\n"
            "  scoring, drawing or computing anything.  For optimize: its options, the fit (a usable\n"
            "  law whose moments the measure needs), the constraints (feasible; a target return\n"
            "  attainable), a --bounds dataset's shape, the output; without optimising.\n"
            "  --ranks P   the ranks the run will use (default: $SLURM_NTASKS, else 1)\n"
            "exit status: 0 the run would start (warnings on stderr), 2 it would not\n"
            "(one 'ghfit: error:' line, as the run would print it).\n",
            GHF_SAMPLE_ALL_ROWS, ghf_backends_compiled());
}

static void vline(const char *key, const char *fmt, va_list ap)
{
    printf("  %-11s ", key);
    vprintf(fmt, ap);
    putchar('\n');
}

void ghf__check_line(const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(key, fmt, ap);
    va_end(ap);
}

static void line(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(key, fmt, ap);
    va_end(ap);
}

void ghf__check_output_line(const char *out)
{
    struct stat sb;
    if (stat(out, &sb) != 0) line("output", "%s: a new file; its directory is writable", out);
    else line("output", "%s: an earlier output of this command (%s), to be replaced", out, ghf_path_what(out));
}

void ghf__check_sample_line(const ghf_h5_sample *s, const char *bad_note)
{
    char how[160], found[400] = "all finite";
    if (s->all) snprintf(how, sizeof how, "all %lld rows", (long long)s->n_read);
    else
        snprintf(how, sizeof how, "%lld of %lld rows, %d blocks of %d spread over them", (long long)s->n_read,
                 (long long)s->len, s->n_blocks, s->block_rows);
    if (s->n_bad > 0)
        snprintf(found, sizeof found, "%lld row%s with non-finite values (first at row %lld)%s", (long long)s->n_bad,
                 s->n_bad == 1 ? "" : "s", (long long)s->first_bad, bad_note);
    line("sample", "%s (%s, %s): %s", how, s->type, s->layout, found);
}

int ghf__check_nonfinite(const char *file, const char *dataset, const ghf_h5_sample *s, int drop, char *err,
                         size_t errlen)
{
    if (s->n_bad > 0 && !drop) {
        if (s->all) /* every row read: the reader's own message */
            snprintf(err, errlen,
                     "%s:%s: %lld %s non-finite values (first at row %lld); use --drop-nonfinite to skip them", file,
                     dataset, (long long)s->n_bad, s->n_bad == 1 ? "row contains" : "rows contain",
                     (long long)s->first_bad);
        else
            snprintf(err, errlen,
                     "%s:%s: %lld of %lld sampled rows contain non-finite values (first at row %lld); use "
                     "--drop-nonfinite to skip them", file, dataset, (long long)s->n_bad, (long long)s->n_read,
                     (long long)s->first_bad);
        return GHF_EXIT_USAGE;
    }
    if (drop && s->all && s->n_bad > 0 && s->n_bad == s->n_read) {
        snprintf(err, errlen, "%s:%s: all %lld rows contain non-finite values", file, dataset, (long long)s->n_read);
        return GHF_EXIT_USAGE;
    }
    return 0;
}

static const char *bytes(double b, char *buf, size_t len)
{
    if (b >= 1073741824.0) snprintf(buf, len, "%.3g GiB", b / 1073741824.0);
    else if (b >= 1048576.0) snprintf(buf, len, "%.3g MiB", b / 1048576.0);
    else snprintf(buf, len, "%.3g KiB", b / 1024.0);
    return buf;
}

/* The options and the job file, as `ghfit fit|run` builds its job. */
static int step_options(check *c, int argc, char **argv)
{
    const int st = c->mode == GHF_PIPE_FIT ? ghf_fit_job(argc, argv, &c->job) : ghf_run_job(1, argc, argv, &c->job);
    if (st) return st;
    const ghf_job *j = &c->job;
    if (c->mode == GHF_PIPE_FIT)
        line("options", "ok: a %s fit of %s:%s into %s", j->fit_name, j->data_file, j->dataset, j->out);
    else
        line("options", "ok: job file %s%s%s into %s", j->source, j->name ? ", job " : "", j->name ? j->name : "",
             j->out);
    return 0;
}

/* Inputs before outputs, as the run checks them, creating nothing. */
static int step_files(check *c)
{
    const ghf_job *j = &c->job;
    ghf_io_plan p = ghf_io_plan_of(j, c->mode == GHF_PIPE_FIT, c->ranks);
    p.dry = 1;
    char file[4096];
    const int st = ghf_io_check_local(&p, &c->n_rows, &c->d, file, sizeof file, c->err, sizeof c->err);
    if (st) return st;
    line("data", "%s:%s: %lld rows x %d columns%s%s", j->data_file, j->dataset, (long long)c->n_rows, c->d,
         file[0] && !ghf_same_file(file, j->data_file) ? ", held in " : "",
         file[0] && !ghf_same_file(file, j->data_file) ? file : "");
    ghf__check_output_line(j->out);
    if (c->mode == GHF_PIPE_RUN && ghf_postfit_wanted(j)) { /* the risk, eval and gof keys' files, optimize's constraints */
        const int pst = ghf_postfit_check_local(j, c->d, c->err, sizeof c->err);
        if (pst) return pst;
        char keys[64] = "";
        if (j->risk_file) strcat(keys, ", risk");
        if (j->eval == GHF_JOB_EVAL_FILE) strcat(keys, ", eval");
        if (j->gof && j->gof_file) strcat(keys, ", gof");
        if (keys[0]) line("after fits", "the files of %s: readable, %d columns", keys + 2, c->d);
        if (j->opt) line("after fits", "optimize: constraints feasible for %d assets", c->d);
    }
    return 0;
}

/* The weights (--weights, job key weights): the dataset and its length, as
 * the run reads them before it fits; their values only the run sees. */
static int step_weights(check *c)
{
    const ghf_job *j = &c->job;
    if (!j->weights) {
        if (!(j->halflife > 0)) return 0;
        int64_t shortest = -1; /* n_eff grows with the window: the shortest one decides */
        for (int i = 0; i < c->n_specs; i++)
            if (shortest < 0 || c->specs[i].row_len < shortest) shortest = c->specs[i].row_len;
        const int st = ghf_halflife_check(j, shortest, c->d, c->err, sizeof c->err);
        if (!st) line("weights", "halflife %g rows", j->halflife);
        return st;
    }
    int64_t n = 0;
    const int st = ghf_weights_probe(j, &n, c->err, sizeof c->err);
    if (!st) line("weights", "%s: %lld values, one per row", j->weights, (long long)n);
    return st;
}

/* The fits (the slice of them), every window's shape, the groups. */
static int step_fits(check *c)
{
    const ghf_job *j = &c->job;
    int st = ghf_job_expand(j, c->n_rows, &c->specs, &c->n_specs, &c->n_total, c->err, sizeof c->err);
    if (!st && c->mode == GHF_PIPE_RUN)
        st = ghf_pipeline_windows_check(j, c->specs, c->n_specs, c->d, c->ranks, c->err, sizeof c->err);
    if (!st) st = ghf_pipeline_sigma_check(c->specs, c->n_specs, c->d, j->se, c->err, sizeof c->err);
    if (st) return st;
    const ghf_fit_spec *a = &c->specs[0], *b = &c->specs[c->n_specs - 1];
    char slice[64] = "";
    if (j->slice_n > 1) snprintf(slice, sizeof slice, ", slice %d/%d", j->slice_k, j->slice_n);
    if (c->n_specs == 1)
        line("fits", "1 of %d%s: %s (rows %lld..%lld)", c->n_total, slice, a->name, (long long)a->row_start,
             (long long)(a->row_start + a->row_len - 1));
    else
        line("fits", "%d of %d%s: %s .. %s%s", c->n_specs, c->n_total, slice, a->name, b->name,
             j->has_windows ? (j->warm_start ? " (windows warm-started)" : " (windows started afresh)") : "");
    c->G = ghf_pipeline_groups(j, c->specs, c->n_specs, c->ranks);
    line("ranks", "%d (%s): %d group%s of %d%s rank%s", c->ranks, c->ranks_from, c->G, c->G == 1 ? "" : "s",
         c->ranks / c->G, c->ranks % c->G ? "+" : "", c->ranks / c->G == 1 && c->ranks % c->G == 0 ? "" : "s");
    return 0;
}

/* The checkpoint: its data fingerprint and, with --resume, the checkpoint itself. */
static int step_checkpoint(check *c)
{
    const ghf_job *j = &c->job;
    if (!j->checkpoint) {
        line("checkpoint", "none");
        return 0;
    }
    char *cfg = ghf_job_config_text(j);
    ghf_ckpt_id id = ghf_pipeline_ckpt_id(j, c->mode, c->n_rows, c->d, c->n_specs, cfg);
    int st = ghf_ckpt_data_fingerprint(j->data_file, j->dataset, &id.data_fp, &id.data_fp_rows, c->err, sizeof c->err);
    if (!st && j->resume) {
        ghf_ckpt ck;
        st = ghf_ckpt_load_local(j->checkpoint, &id, &ck, c->err, sizeof c->err);
        if (!st) {
            line("checkpoint", "%s: resumes %d finished fit%s and %d running (every %d iterations)", j->checkpoint,
                 ck.n_done, ck.n_done == 1 ? "" : "s", ck.n_run, j->checkpoint_every);
            ghf_ckpt_free(&ck);
        }
    } else if (!st) {
        struct stat sb;
        line("checkpoint", "%s every %d iterations and on SIGUSR1/SIGTERM%s", j->checkpoint, j->checkpoint_every,
             stat(j->checkpoint, &sb) == 0 ? "; one is there: add --resume to continue from it" : "");
    }
    free(cfg);
    return st;
}

/* A sample of the rows: in `ghfit fit` non-finite values (without
 * --drop-nonfinite) and, when every row was read, a constant column are
 * errors; in `ghfit run` they fail only the fits of their windows. */
static int step_sample(check *c)
{
    const ghf_job *j = &c->job;
    ghf_h5_sample *s = &c->sample;
    int st = ghf_h5_sample_rows(j->data_file, j->dataset, j->rows_start, j->rows_len, s, c->err, sizeof c->err);
    if (st) return st;
    const int fit = c->mode == GHF_PIPE_FIT;
    if (fit && (st = ghf__check_nonfinite(j->data_file, j->dataset, s, j->drop_nonfinite, c->err, sizeof c->err)))
        return st;
    if (fit && s->all && s->const_col >= 0) {
        snprintf(c->err, sizeof c->err, "%s:%s: column %d is constant: the covariance is singular", j->data_file,
                 j->dataset, s->const_col);
        return GHF_EXIT_USAGE;
    }
    ghf__check_sample_line(s, j->drop_nonfinite ? ", to be dropped" : "");
    if (!fit && s->n_bad > 0 && !j->drop_nonfinite)
        ghf_warning0("%s:%s: %lld %srow%s non-finite values (first at row %lld): the fits of the windows that "
                     "hold them will fail (status 'failed: ...', exit status 3); data.drop_nonfinite: true skips such "
                     "rows", j->data_file, j->dataset, (long long)s->n_bad, s->all ? "" : "sampled ",
                     s->n_bad == 1 ? " holds" : "s hold", (long long)s->first_bad);
    if (s->const_col >= 0 && (!fit || !s->all))
        ghf_warning0("%s:%s: column %d holds one value in all %s rows%s: a window where it is constant cannot be "
                     "fitted (the covariance is singular)", j->data_file, j->dataset, s->const_col,
                     s->all ? "the" : "sampled", s->all ? " of the data" : "");
    return 0;
}

/* The backend asked for, against this binary. */
static int step_backend(check *c)
{
    const char *b = c->job.backend, *have = ghf_backends_compiled();
    const int cuda = strstr(have, "cuda") != NULL;
    if (!strcmp(b, "cuda") && !cuda) {
        snprintf(c->err, sizeof c->err, "--backend cuda: this ghfit was built without CUDA (backends: %s)", have);
        return GHF_EXIT_USAGE;
    }
    if (!strcmp(b, "auto"))
        line("backend", "auto: %s (this binary: %s)",
             cuda ? "cuda where every rank has a GPU of its own, else cpu" : "cpu", have);
    else
        line("backend", "%s (this binary: %s)%s", b, have,
             !strcmp(b, "cuda") ? "; every rank needs a GPU of its own when the job starts" : "");
    return 0;
}

/* About what one rank holds: its share of the largest window (as doubles,
 * plus the file's values while they are converted), one-rank groups also
 * every row their fits need at once (up to 2 GB), and the d x d matrices. */
static void step_memory(check *c)
{
    const ghf_job *j = &c->job;
    const int gs = c->ranks / c->G;
    const double d = c->d;
    int64_t w = 0;
    for (int i = 0; i < c->n_specs; i++) w = c->specs[i].row_len > w ? c->specs[i].row_len : w;
    const double rows = ceil((double)w / (gs > 0 ? gs : 1));
    const double shard = rows * d * 8.0;
    double stage = 0.0, span = 0.0;
    if (strcmp(c->sample.type, "float64") != 0) stage = fmin(rows * d * c->sample.elem_size, 1073741824.0);
    int *group_of = malloc((size_t)c->n_specs * sizeof(int));
    if (gs == 1 && c->ranks % c->G == 0 && !j->drop_nonfinite && !j->weights && !j->missing_em && group_of) {
        ghf_job_assign_groups(c->specs, c->n_specs, c->G, group_of);
        for (int g = 0; g < c->G; g++) {
            int64_t lo = INT64_MAX, hi = 0;
            int ranges = 0; /* the worker reads a span only for two or more distinct row ranges */
            for (int i = 0; i < c->n_specs; i++)
                if (group_of[i] == g) {
                    if (ranges && (c->specs[i].row_start != lo || c->specs[i].row_start + c->specs[i].row_len != hi))
                        ranges = 2;
                    else if (!ranges)
                        ranges = 1;
                    lo = c->specs[i].row_start < lo ? c->specs[i].row_start : lo;
                    hi = c->specs[i].row_start + c->specs[i].row_len > hi ? c->specs[i].row_start + c->specs[i].row_len
                                                                          : hi;
                }
            const double b = ranges == 2 && hi > lo ? (double)(hi - lo) * d * 8.0 : 0.0;
            if (b < 2.0e9 && b > span) span = b;
        }
    }
    free(group_of);
    const double mats = 4.0 * d * d * 8.0;
    char t[32], a[32], e[32];
    line("memory", "about %s per rank: %.0f rows x %d columns (%s)%s%s%s", bytes(shard + stage + span + mats, t, sizeof t),
         rows, c->d, bytes(shard, a, sizeof a), span > 0 ? ", and the rows of all its windows at once (" : "",
         span > 0 ? bytes(span, e, sizeof e) : "", span > 0 ? ")" : "");
}

#define CHECK_CMDS "fit|run|eval|gof|sample|risk|optimize"

/* 1 if cmd is one of the commands that use a fit (postcmd.h) */
static int post_command(const char *cmd)
{
    return !strcmp(cmd, "eval") || !strcmp(cmd, "gof") || !strcmp(cmd, "sample") || !strcmp(cmd, "risk") ||
           !strcmp(cmd, "optimize");
}

/* check's own options before the command; the index of the command, or -1 (help), or -2 (error). */
static int own_options(check *c, int argc, char **argv)
{
    c->ranks = 1;
    c->ranks_from = "default";
    const char *env = getenv("SLURM_NTASKS");
    int n;
    if (env && ghf_parse_int(env, &n) == 0 && n >= 1) {
        c->ranks = n;
        c->ranks_from = "SLURM_NTASKS";
    }
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return -1;
        const char *v = !strcmp(argv[i], "--ranks") ? (i + 1 < argc ? argv[++i] : "")
                        : !strncmp(argv[i], "--ranks=", 8) ? argv[i] + 8 : NULL;
        if (!v) {
            ghf_error0("check: unknown option '%s' (usage: ghfit check [--ranks P] " CHECK_CMDS " ARGS...)", argv[i]);
            return -2;
        }
        if (ghf_parse_int(v, &c->ranks) || c->ranks < 1) {
            ghf_error0("--ranks: '%s' is not a positive integer", v);
            return -2;
        }
        c->ranks_from = "--ranks";
    }
    if (i >= argc || (strcmp(argv[i], "fit") && strcmp(argv[i], "run") && !post_command(argv[i]))) {
        ghf_error0("check: expected fit, run, eval, gof, sample, risk or optimize%s%s (usage: ghfit check [--ranks P] "
                   CHECK_CMDS " ARGS...)", i < argc ? ", not " : "", i < argc ? argv[i] : "");
        return -2;
    }
    c->mode = strcmp(argv[i], "fit") ? GHF_PIPE_RUN : GHF_PIPE_FIT;
    return i;
}

int ghf_cmd_check(int argc, char **argv)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    check c;
    memset(&c, 0, sizeof c);
    ghf_job_defaults(&c.job);
    const int i = own_options(&c, argc, argv);
    if (i < 0) {
        if (i == -1) ghf__check_usage(stdout);
        ghf_job_free(&c.job);
        return i == -1 ? GHF_EXIT_OK : GHF_EXIT_USAGE;
    }
    ghf_job_free(&c.job); /* the command builds it afresh */
    printf("ghfit check (%s): %s\n", GHFIT_VERSION, ghf_command_line());
    if (post_command(argv[i]))
        return ghf__check_post(argc - i, argv + i, c.ranks, (double)t0.tv_sec + 1e-9 * (double)t0.tv_nsec);
    int st = step_options(&c, argc - i, argv + i);
    if (st < 0) {
        ghf__check_usage(stdout);
        st = GHF_EXIT_OK;
    } else if (!st) {
        st = step_files(&c);
        if (!st) st = step_fits(&c);
        if (!st) st = step_checkpoint(&c);
        if (!st) st = step_weights(&c);
        if (!st) st = step_sample(&c);
        if (!st) st = step_backend(&c);
        if (!st) step_memory(&c);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (st) {
            fflush(stdout);
            ghf_error0("%s", c.err);
        } else {
            printf("ghfit check: ok: `ghfit %s` would start %d fit%s on %d rank%s (checked in %.2f s)\n",
                   c.mode == GHF_PIPE_FIT ? "fit" : "run", c.n_specs, c.n_specs == 1 ? "" : "s", c.ranks,
                   c.ranks == 1 ? "" : "s", secs);
        }
    }
    free(c.specs);
    ghf_job_free(&c.job);
    return st;
}
