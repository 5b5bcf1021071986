/* collector.c - rank 0 of `ghfit fit` and `ghfit run`: the finished fits
 * of every group, the checkpoints (a small main file and the log of finished
 * fits), and at the end the result file (see internal/pipe.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fit.h"
#include "ghf_version.h"
#include "pipe.h"
#include "record.h"
#include "summary.h"
#include "postfit.h"
#include "util.h"

static int spec_pos(const ghf_fit_spec *s, int n, int64_t index)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        const int mid = (lo + hi) / 2;
        if (s[mid].index == index) return mid;
        if (s[mid].index < index) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* Append the finished fits not yet in the log (opened on the first write:
 * a fresh log, or the loaded checkpoint's, cut to what it covers), sync it,
 * and put its state into the checkpoint.  0 or 1 with a message. */
static int coll_log_flush(collector *c, char *err, size_t errlen)
{
    ghf_ckpt *f = &c->file;
    if (!c->log && c->n_pending == 0) return 0; /* nothing finished yet: no log (a fit's checkpoint has none) */
    if (!c->log) {
        const ghf_ckpt *r = c->resume && c->resume->log_name ? c->resume : NULL;
        c->log = ghf_ckpt_log_open(c->job->checkpoint, f->hash, r ? r->log_bytes : 0, r ? r->log_crc : 0,
                                   r ? r->log_count : 0, err, errlen);
        if (!c->log) return 1;
    }
    int k = 0;
    for (; k < c->n_pending; k++) {
        const int pos = c->pending[k];
        if (ghf_ckpt_log_append(c->log, c->specs[pos].index, c->rec[pos], c->rec_len[pos], err, errlen) != 0) break;
    }
    /* keep what could not be appended for the next write */
    memmove(c->pending, c->pending + k, (size_t)(c->n_pending - k) * sizeof(int));
    c->n_pending -= k;
    if (c->n_pending > 0) return 1;
    return ghf_ckpt_log_commit(c->log, f, err, errlen);
}

/* Write the checkpoint (at most every CKPT_MIN_INTERVAL s unless forced):
 * the new finished fits to the log, then the small main file.  A periodic
 * failure is a warning (once until a write succeeds again; the sweep goes
 * on).  Returns 0, or 1 with the message in err. */
static int coll_write_ckpt(collector *c, int force, char *err, size_t errlen)
{
    const ghf_job *j = c->job;
    if (!j->checkpoint) return 0;
    const double now = MPI_Wtime();
    if (!force && now - c->last_write < CKPT_MIN_INTERVAL) return 0;
    c->last_write = now;
    ghf_ckpt *f = &c->file;
    int rc = coll_log_flush(c, err, errlen);
    if (!rc) {
        f->n_run = 0;
        f->run = calloc((size_t)c->G + 1, sizeof *f->run);
        if (!f->run) {
            snprintf(err, errlen, "out of memory");
            rc = 1;
        }
        for (int g = 0; !rc && g < c->G; g++)
            if (c->running[g].d > 0) f->run[f->n_run++] = c->running[g]; /* shallow */
        if (!rc) rc = ghf_ckpt_write(j->checkpoint, f, err, errlen);
        free(f->run);
        f->run = NULL;
        f->n_run = 0;
    }
    if (!rc) {
        c->n_written++;
        c->warned = 0;
    } else if (!force) {
        if (!c->warned && c->mode == GHF_PIPE_FIT)
            fprintf(stderr, "ghfit: warning: %s (the fit goes on; retrying every %d iterations)\n", err,
                    c->job->checkpoint_every);
        else if (!c->warned)
            fprintf(stderr, "ghfit: warning: %s (the sweep goes on; retrying)\n", err);
        c->warned = 1;
    }
    return rc;
}

static void coll_print_fit(collector *c, int pos)
{
    ghf_unpack u = {c->rec[pos], c->rec_len[pos], 0, 0};
    ghf_rec r;
    if (ghf_rec_unpack(&u, &r) != 0) return;
    c->n_printed++;
    printf("[%*d/%d] %-34s n %-8lld loglik % .12e  %5d it  %-10.10s %8.3f s\n", c->n_specs >= 10000 ? 6 : 4,
           c->n_printed, c->n_specs, r.r.name, (long long)r.r.n_obs, r.r.loglik, r.r.n_iter, r.r.status, r.r.elapsed_s);
    fflush(stdout);
    ghf_rec_free(&r);
}

/* count a finished fit whose status says it failed */
static void coll_note_failed(collector *c, int pos)
{
    ghf_unpack u = {c->rec[pos], c->rec_len[pos], 0, 0};
    ghf_rec r;
    if (ghf_rec_unpack(&u, &r) != 0) return;
    if (strncmp(r.r.status, "failed", 6) == 0) {
        if (c->n_failed == 0 || pos < c->first_failed) c->first_failed = pos;
        c->n_failed++;
    }
    ghf_rec_free(&r);
}

/* a finished fit arrived (bytes are taken over) */
void coll_add_record(collector *c, int group, unsigned char *bytes, size_t n)
{
    ghf_unpack u = {bytes, n, 0, 0};
    const int64_t magic = ghf_unpack_i64(&u);
    const int64_t index = ghf_unpack_i64(&u);
    (void)magic;
    const int pos = spec_pos(c->specs, c->n_specs, index);
    if (pos < 0 || c->rec[pos]) {
        free(bytes);
        return;
    }
    c->rec[pos] = bytes;
    c->rec_len[pos] = n;
    c->n_rec++;
    coll_note_failed(c, pos);
    if (c->pending) c->pending[c->n_pending++] = pos;
    if (group >= 0 && group < c->G && c->running[group].index == index) ghf_ckpt_run_clear(&c->running[group]);
    if (!c->job->quiet && c->mode == GHF_PIPE_RUN) coll_print_fit(c, pos);
    char err[1024];
    coll_write_ckpt(c, 0, err, sizeof err);
}

void coll_set_state(collector *c, int group, const ghf_ckpt_run *r, int stopping)
{
    if (group < 0 || group >= c->G) return;
    ghf_ckpt_run *dst = &c->running[group];
    ghf_ckpt_run_clear(dst);
    *dst = *r; /* takes over the arrays */
    char err[1024];
    /* a sweep writes at most once every CKPT_MIN_INTERVAL s; one fit every
     * --checkpoint-every iterations, as asked */
    if (c->mode == GHF_PIPE_FIT) c->last_write = -1e300;
    if (!stopping) coll_write_ckpt(c, 0, err, sizeof err);
}

static void coll_handle(collector *c, MPI_Status *ms)
{
    int n = 0;
    MPI_Get_count(ms, MPI_BYTE, &n);
    unsigned char *b = malloc((size_t)(n > 0 ? n : 1));
    if (!b) {
        fprintf(stderr, "ghfit: error: out of memory (a message of %d bytes)\n", n);
        MPI_Abort(MPI_COMM_WORLD, GHF_EXIT_RUNTIME);
    }
    ghf_live_mpi(c->live, MPI_Recv(b, n, MPI_BYTE, ms->MPI_SOURCE, ms->MPI_TAG, c->comm, MPI_STATUS_IGNORE),
                 "receiving a message");
    ghf_unpack u = {b, (size_t)n, 0, 0};
    const int group = (int)ghf_unpack_i64(&u);
    if (ms->MPI_TAG == TAG_REC) {
        const size_t off = u.off;
        unsigned char *rb = malloc((size_t)n - off + 1);
        if (rb) {
            memcpy(rb, b + off, (size_t)n - off);
            coll_add_record(c, group, rb, (size_t)n - off);
        }
    } else if (ms->MPI_TAG == TAG_STATE) {
        ghf_ckpt_run r;
        memset(&r, 0, sizeof r);
        const int stopping = (int)ghf_unpack_i64(&u);
        r.index = ghf_unpack_i64(&u);
        char *nm = ghf_unpack_str(&u);
        snprintf(r.name, sizeof r.name, "%s", nm ? nm : "");
        free(nm);
        nm = ghf_unpack_str(&u);
        snprintf(r.family, sizeof r.family, "%s", nm ? nm : "");
        free(nm);
        r.d = (int)ghf_unpack_i64(&u);
        r.disp = (int)ghf_unpack_i64(&u);
        r.nf = (int)ghf_unpack_i64(&u);
        r.iter = (int)ghf_unpack_i64(&u);
        int64_t k;
        r.cur = ghf_unpack_f64s(&u, &k);
        r.prev = ghf_unpack_f64s(&u, &k);
        r.trace = ghf_unpack_f64s(&u, &k);
        if (!u.bad && r.cur && r.prev && r.trace) coll_set_state(c, group, &r, stopping);
        else ghf_ckpt_run_clear(&r);
    } else if (ms->MPI_TAG == TAG_DONE) {
        const int status = (int)ghf_unpack_i64(&u);
        char *msg = ghf_unpack_str(&u);
        if (group >= 0 && group < c->G && c->group_status[group] < 0) {
            c->group_status[group] = status;
            c->group_msg[group] = msg;
            c->n_groups_done++;
            msg = NULL;
            ghf_live_expect(c->live, ms->MPI_SOURCE, 0); /* its last message */
        }
        free(msg);
    }
    free(b);
}

/* Between rank 0's own iterations: take what arrived, send the heartbeats,
 * check the other ranks. */
int coll_poll(collector *c)
{
    MPI_Status ms;
    int n = 0;
    for (; ghf_live_poll(c->live, MPI_ANY_SOURCE, &ms); n++) coll_handle(c, &ms);
    ghf_live_beat_all(c->live);
    ghf_live_check(c->live);
    return n;
}

static void beat(void *live) { ghf_live_beat_all((ghf_live *)live); }

/* the job's `risk` and `eval` (postfit.h) over every record: 0 or 1 */
static int post_fits(collector *c, ghf_h5_writer *w, char *err, size_t errlen)
{
    if (c->mode != GHF_PIPE_RUN || !ghf_postfit_wanted(c->job)) return 0;
    ghf_rec *all = calloc((size_t)c->n_specs, sizeof *all);
    const ghf_fit_record **recs = calloc((size_t)c->n_specs, sizeof *recs);
    int st = all && recs ? 0 : 1, n = 0;
    if (st) snprintf(err, errlen, "out of memory (%d fit records)", c->n_specs);
    for (; !st && n < c->n_specs; n++) {
        ghf_unpack u = {c->rec[n], c->rec_len[n], 0, 0};
        if (ghf_rec_unpack(&u, &all[n]) != 0) {
            snprintf(err, errlen, "internal: the record of fit %s is damaged", c->specs[n].name);
            st = 1;
            break;
        }
        recs[n] = &all[n].r;
    }
    if (!st) st = ghf_postfit_run(c->job, c->specs, recs, c->n_specs, w, beat, c->live, err, errlen);
    for (int i = 0; all && i < n; i++) ghf_rec_free(&all[i]);
    free(all);
    free(recs);
    return st;
}

static void write_result(collector *c, const char *backend, int world_size, int *st, char *err, size_t errlen)
{
    const ghf_job *j = c->job;
    char *cfg = c->mode == GHF_PIPE_RUN ? ghf_job_config_text(j) : NULL; /* a fit has no job file */
    char slice[32], hash[24];
    snprintf(slice, sizeof slice, "%d/%d", j->slice_n > 1 ? j->slice_k : 0, j->slice_n > 1 ? j->slice_n : 1);
    snprintf(hash, sizeof hash, "%016" PRIx64, ghf_job_identity(j));
    ghf_out_meta meta = {.version = GHFIT_VERSION, .git_commit = GHFIT_GIT_COMMIT, .command_line = ghf_command_line(),
                         .backend = backend, .n_ranks = world_size, .config_text = cfg,
                         .omp_threads = omp_get_max_threads(), .slice = slice, .job_hash = hash,
                         .n_fits_total = c->n_total};
    ghf_h5_writer *w = ghf_h5_out_open(j->out, &meta, err, errlen);
    free(cfg);
    if (!w) {
        *st = GHF_EXIT_RUNTIME;
        return;
    }
    for (int i = 0; i < c->n_specs; i++) {
        ghf_unpack u = {c->rec[i], c->rec_len[i], 0, 0};
        ghf_rec r;
        if (ghf_rec_unpack(&u, &r) != 0) {
            snprintf(err, errlen, "internal: the record of fit %s is damaged", c->specs[i].name);
            ghf_h5_out_abort(w);
            *st = GHF_EXIT_RUNTIME;
            return;
        }
        const int rc = ghf_h5_out_add_fit(w, &r.r, err, errlen);
        ghf_rec_free(&r);
        ghf_live_beat_all(c->live); /* the others wait for the end: rank 0 is alive */
        if (rc) {
            ghf_h5_out_abort(w);
            *st = GHF_EXIT_RUNTIME;
            return;
        }
    }
    if (post_fits(c, w, err, errlen) != 0) {
        ghf_h5_out_abort(w);
        *st = GHF_EXIT_RUNTIME;
        return;
    }
    if (ghf_h5_out_commit(w, err, errlen) != 0) *st = GHF_EXIT_RUNTIME;
}

static void print_table(collector *c)
{
    ghf_summary_row *rows = calloc((size_t)c->n_specs + 1, sizeof *rows);
    if (!rows) return;
    int n = 0;
    for (int i = 0; i < c->n_specs; i++) {
        ghf_unpack u = {c->rec[i], c->rec_len[i], 0, 0};
        ghf_rec r;
        if (ghf_rec_unpack(&u, &r) != 0) continue;
        ghf_fit_summary *s = &rows[n++].s;
        snprintf(s->name, sizeof s->name, "%s", r.r.name);
        snprintf(s->family, sizeof s->family, "%s", r.r.family);
        s->n = r.r.n_obs;
        s->d = r.r.d;
        s->loglik = r.r.loglik;
        s->aic = r.r.aic;
        s->bic = r.r.bic;
        s->n_iter = r.r.n_iter;
        s->converged = r.r.converged;
        s->seconds = r.r.elapsed_s;
        snprintf(s->status, sizeof s->status, "%s", r.r.status);
        rows[n - 1].n_components = r.r.n_components; /* a mixture: the K and icl columns */
        rows[n - 1].icl = r.r.icl;
        ghf_rec_free(&r);
    }
    ghf_summary_print(stdout, rows, n, GHF_SORT_NONE);
    free(rows);
}

/* a deep copy of a running fit's state (0, or -1 when out of memory) */
static int run_copy(ghf_ckpt_run *dst, const ghf_ckpt_run *src)
{
    const size_t np = (size_t)ghf_ckpt_run_len(src->d, src->disp, src->nf);
    *dst = *src;
    dst->cur = malloc(np * sizeof(double));
    dst->prev = malloc(np * sizeof(double));
    dst->trace = malloc((size_t)(src->iter > 0 ? src->iter : 1) * sizeof(double));
    if (!dst->cur || !dst->prev || !dst->trace) {
        ghf_ckpt_run_clear(dst);
        return -1;
    }
    memcpy(dst->cur, src->cur, np * sizeof(double));
    memcpy(dst->prev, src->prev, np * sizeof(double));
    if (src->iter > 0) memcpy(dst->trace, src->trace, (size_t)src->iter * sizeof(double));
    return 0;
}

void coll_init(collector *c, MPI_Comm comm, const ghf_job *j, ghf_pipe_mode mode, const ghf_fit_spec *specs,
               int n_specs, int G, const int *group_of, const ghf_ckpt *resume, const ghf_ckpt_id *cid)
{
    c->comm = comm;
    c->job = j;
    c->mode = mode;
    c->specs = specs;
    c->n_specs = n_specs;
    c->G = G;
    c->rec = calloc((size_t)n_specs, sizeof *c->rec);
    c->rec_len = calloc((size_t)n_specs, sizeof *c->rec_len);
    c->running = calloc((size_t)G, sizeof *c->running);
    c->group_status = malloc((size_t)G * sizeof(int));
    c->group_msg = calloc((size_t)G, sizeof(char *));
    if (j->checkpoint) c->pending = malloc((size_t)n_specs * sizeof(int));
    for (int i = 0; i < G; i++) c->group_status[i] = -1;
    c->last_write = -1e300;
    c->resume = resume;
    ghf_ckpt_set_id(&c->file, cid);
    if (!resume) return;
    for (int k = 0; k < resume->n_done; k++) {
        const int pos = spec_pos(specs, n_specs, resume->done_index[k]);
        if (pos < 0 || c->rec[pos]) continue;
        const size_t nb = (size_t)(resume->done_off[k + 1] - resume->done_off[k]);
        c->rec[pos] = malloc(nb + 1);
        memcpy(c->rec[pos], resume->done_blob + resume->done_off[k], nb);
        c->rec_len[pos] = nb;
        c->n_rec++;
        coll_note_failed(c, pos);
        /* already in the log being continued; else they go into a new one */
        if (!resume->log_name && c->pending) c->pending[c->n_pending++] = pos;
    }
    /* the unfinished fits, until their groups report newer states: a stop
     * before that keeps them in the next checkpoint */
    for (int k = 0; k < resume->n_run; k++) {
        const int pos = spec_pos(specs, n_specs, resume->run[k].index);
        if (pos < 0 || c->rec[pos] || c->running[group_of[pos]].d > 0) continue;
        run_copy(&c->running[group_of[pos]], &resume->run[k]);
    }
}

/* After every group has reported: the result file, or the checkpoint after
 * a stop.  Returns the exit status (message in err). */
/* Every fit finished: the result file, then the table (run) or the fitted
 * law (fit).  The exit status (message in err). */
static int finish_done(collector *c, int size, double t0, char *err, size_t errlen)
{
    const ghf_job *j = c->job;
    int st = 0;
    const char *bk = j->backend;
    ghf_unpack u = {c->rec[0], c->rec_len[0], 0, 0};
    ghf_rec r0;
    char bkbuf[16];
    const int have0 = ghf_rec_unpack(&u, &r0) == 0;
    if (have0) {
        snprintf(bkbuf, sizeof bkbuf, "%s", r0.r.backend ? r0.r.backend : j->backend);
        bk = bkbuf;
    }
    const double tw = MPI_Wtime();
    write_result(c, bk, size, &st, err, errlen);
    if (!st) {
        const double t_end = MPI_Wtime();
        if (c->mode == GHF_PIPE_FIT) {
            if (!j->quiet && have0) ghf_fit_record_print(&r0.r, 1);
        } else {
            print_table(c);
            if (!j->quiet)
                printf("wrote %s (%d fits) in %.2f s: fits %.2f s, result file %.2f s\n", j->out, c->n_specs,
                       t_end - t0, tw - t0, t_end - tw);
        }
        fflush(stdout);
        if (j->checkpoint) { /* the result supersedes it */
            ghf_ckpt_log_close(c->log);
            c->log = NULL;
            ghf_ckpt_remove(j->checkpoint);
        }
    }
    if (have0) ghf_rec_free(&r0);
    if (st || c->n_failed == 0) return st;
    ghf_unpack u1 = {c->rec[c->first_failed], c->rec_len[c->first_failed], 0, 0};
    ghf_rec r1;
    const int have = ghf_rec_unpack(&u1, &r1) == 0;
    snprintf(err, errlen, "%d of %d fits failed (their status in %s starts with 'failed:'); the first: %s: %.600s",
             c->n_failed, c->n_specs, j->out, c->specs[c->first_failed].name,
             !have ? "?" : strncmp(r1.r.status, "failed: ", 8) == 0 ? r1.r.status + 8 : r1.r.status);
    if (have) ghf_rec_free(&r1);
    return GHF_EXIT_SOME_FAILED;
}

/* Stopped by a signal: the checkpoint, and the note (exit 75) or the error. */
static int finish_stopped(collector *c, char *err, size_t errlen)
{
    const ghf_job *j = c->job;
    const int fit = c->mode == GHF_PIPE_FIT;
    if (!j->checkpoint) {
        if (fit)
            snprintf(err, errlen, "stopped on a signal before convergence (no checkpoint file was requested)");
        else
            snprintf(err, errlen,
                     "stopped on a signal with %d of %d fits finished (no checkpoint file was requested; nothing written)",
                     c->n_rec, c->n_specs);
        return GHF_EXIT_CHECKPOINT;
    }
    char e2[1024];
    if (coll_write_ckpt(c, 1, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "stopped on a signal, but the checkpoint could not be written: %.900s", e2);
        return GHF_EXIT_RUNTIME;
    }
    if (fit)
        snprintf(err, errlen, "stopped on a signal at iteration %d; checkpoint written to %s (rerun with --resume)",
                 c->running[0].iter, j->checkpoint);
    else
        snprintf(err, errlen,
                 "stopped on a signal with %d of %d fits finished; checkpoint written to %s (rerun with --resume)",
                 c->n_rec, c->n_specs, j->checkpoint);
    return GHF_EXIT_CHECKPOINT;
}

int coll_finish(collector *c, int size, double t0, char *err, size_t errlen)
{
    int st = 0, n_err = 0, n_stop = 0;
    for (int i = 0; i < c->G; i++) {
        if (c->group_status[i] >= GROUP_ERROR) {
            if (!n_err) {
                snprintf(err, errlen, "%s", c->group_msg[i] ? c->group_msg[i] : "a group failed");
                st = c->group_status[i] - GROUP_ERROR;
            }
            n_err++;
        }
        if (c->group_status[i] == GROUP_STOPPED) n_stop++;
    }
    if (n_err) return st == GHF_EXIT_USAGE ? st : GHF_EXIT_RUNTIME;
    if (c->n_rec == c->n_specs) return finish_done(c, size, t0, err, errlen);
    if (!n_stop) {
        snprintf(err, errlen, "internal: %d of %d fits finished", c->n_rec, c->n_specs);
        return GHF_EXIT_RUNTIME;
    }
    return finish_stopped(c, err, errlen);
}

void coll_free(collector *c)
{
    if (c->log) {
        ghf_ckpt_log_close(c->log);
        /* a log that no checkpoint refers to is of no use: not left behind */
        if (c->n_written == 0 && !(c->resume && c->resume->log_name)) {
            char lp[4200];
            ghf_ckpt_log_path(c->job->checkpoint, lp, sizeof lp);
            if (ghf_ckpt_log_is_ours(lp)) unlink(lp);
        }
    }
    for (int i = 0; i < c->n_specs; i++) free(c->rec[i]);
    for (int i = 0; i < c->G; i++) {
        ghf_ckpt_run_clear(&c->running[i]);
        free(c->group_msg[i]);
    }
    free(c->rec);
    free(c->rec_len);
    free(c->running);
    free(c->group_status);
    free(c->group_msg);
    free(c->pending);
    ghf_ckpt_free(&c->file);
}
