/* worker.c - a group of ranks of `ghfit fit` / `ghfit run`: its share of
 * the fits, one after another on its shards (read once per row range), with
 * warm starts along a chain of windows, checkpoint states and finished
 * records sent to the collector on rank 0 (see internal/pipe.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "backend.h"
#include "em.h"
#include "fit.h"
#include "ghf_version.h"
#include "h5io.h"
#include "pipe.h"
#include "record.h"
#include "util.h"
#include "xreduce.h"

/* The rows a group has loaded: one prepared window (+ its backend), and for
 * one-rank groups a span of rows read once that covers all its windows. */
typedef struct data_cache {
    int have;
    int64_t start, len;
    ghf_shard shard;
    ghf_data data;
    ghf_backend *be;
    int have_span;
    ghf_shard span;
    int64_t span_start, span_len;
    double t_load;
    /* weighted EM: the window's weights (owned; NULL: unweighted), their exact
     * sums, whether all are 1 (then EM runs unweighted: the same bits), and
     * their label for the result file */
    double *w;
    double wsum, wsum2;
    int wunit;
    char wlabel[1600];
    /* --missing em: whether the fit has rows with NaN entries (every rank),
     * the rank's complete rows (first in the shard), the set of the others,
     * rows by number of missing entries [d + 1] */
    int has_missing;
    int64_t n_complete;
    ghf_missing *miss;
    double *mcounts;
} data_cache;

/* Warm start: the previous fit's parameters in data coordinates. */
typedef struct warm {
    int valid;
    int chain;
    ghf_params t; /* mu in data coordinates */
} warm;

/* For each of the group's fits, where a resumed checkpoint has it: done_k[q]
 * (its record) and run_k[q] (its state), -1 where it has not.  Sorting keeps
 * this O(n log n): a resume of 100,000 finished fits is instant. */
typedef struct idx_pos {
    int64_t index;
    int k;
} idx_pos;

/* Deliver bytes [group | payload] to the collector (rank 0 keeps them). */
static void send_to_rank0(group_ctx *g, int tag, ghf_pack *b)
{
    MPI_Request req;
    ghf_live_mpi(g->live, MPI_Isend(b->p, (int)b->n, MPI_BYTE, 0, tag, g->pcomm, &req), "a message to rank 0");
    ghf_live_expect(g->live, 0, 1);
    ghf_live_wait(g->live, &req, 0);
    ghf_live_expect(g->live, 0, 0);
}

/* A group's ranks between two steps: rank 0 collects; the others take rank
 * 0's heartbeats, and the leaders send theirs. */
static void group_tick(group_ctx *g)
{
    if (g->wrank == 0) {
        coll_poll(g->coll);
        return;
    }
    ghf_live_drain(g->live, 0);
    if (g->grank == 0) ghf_live_beat(g->live, 0);
}

static void deliver_state(group_ctx *g, const ghf_em_state *st, int stopping)
{
    ghf_ckpt_run r;
    memset(&r, 0, sizeof r);
    if (ghf_ckpt_run_set(&r, g->cur->index, g->cur->name, st) != 0) {
        ghf_ckpt_run_clear(&r);
        return;
    }
    snprintf(r.family, sizeof r.family, "%s", ghf_family_name(g->cur->family));
    if (g->wrank == 0) {
        coll_set_state(g->coll, g->group, &r, stopping);
        return;
    }
    ghf_pack b = {0};
    const int np = ghf_ckpt_run_len(r.d, r.disp, r.nf);
    ghf_pack_i64(&b, g->group);
    ghf_pack_i64(&b, stopping);
    ghf_pack_i64(&b, r.index);
    ghf_pack_str(&b, r.name);
    ghf_pack_str(&b, r.family);
    ghf_pack_i64(&b, r.d);
    ghf_pack_i64(&b, r.disp);
    ghf_pack_i64(&b, r.nf);
    ghf_pack_i64(&b, r.iter);
    ghf_pack_f64s(&b, r.cur, np);
    ghf_pack_f64s(&b, r.prev, np);
    ghf_pack_f64s(&b, r.trace, r.iter);
    if (!b.oom) send_to_rank0(g, TAG_STATE, &b);
    ghf_pack_free(&b);
    ghf_ckpt_run_clear(&r);
}

static int group_on_state(void *ctx, const ghf_em_state *st, int stopping)
{
    group_ctx *g = ctx;
    g->last_iter = st->iter;
    if (!stopping && g->iter_sleep_ms > 0) ghf_sleep_ms(g->iter_sleep_ms);
    group_tick(g);
    if (g->grank != 0 || !g->job->checkpoint) return 0;
    if (g->base_iter < 0) g->base_iter = st->iter;
    if (!stopping && st->iter - g->base_iter < g->job->checkpoint_every) return 0;
    g->base_iter = st->iter;
    deliver_state(g, st, stopping);
    return 0;
}

/* ghf_em_opts.beat of the fits that do not hand states to on_state (a
 * mixture): the group's heartbeats and rank 0's collecting, per E-step */
static void group_beat(void *arg)
{
    group_ctx *g = arg;
    if (g->iter_sleep_ms > 0) ghf_sleep_ms(g->iter_sleep_ms);
    group_tick(g);
}

static void deliver_record(group_ctx *g, int64_t index, const ghf_fit_record *rec)
{
    ghf_pack b = {0};
    if (g->wrank != 0) ghf_pack_i64(&b, g->group);
    ghf_rec_pack(&b, index, rec);
    if (b.oom) {
        ghf_pack_free(&b);
        return;
    }
    if (g->wrank == 0) {
        coll_add_record(g->coll, g->group, b.p, b.n); /* takes the bytes */
        return;
    }
    send_to_rank0(g, TAG_REC, &b);
    ghf_pack_free(&b);
}

/* A fit that failed on its data (a window with a constant column, too few
 * rows, non-finite values; a warm start the window cannot use): recorded
 * with status "failed: <why>" and NaN parameters and log-likelihood, so that
 * the other fits go on.  Group leader only. */
static void deliver_failed(group_ctx *g, const ghf_fit_spec *s, const char *why, double seconds)
{
    const int d = g->d;
    const size_t nv = (size_t)d * (size_t)(d + 2), np = (size_t)g->gsize * GHF_NPHASES;
    double *nan = malloc(nv * sizeof(double)), *ph = calloc(np, sizeof(double));
    char status[1200];
    snprintf(status, sizeof status, "failed: %s", why);
    if (!nan || !ph) { /* the collector then reports the fit as missing */
        free(nan);
        free(ph);
        return;
    }
    for (size_t i = 0; i < nv; i++) nan[i] = NAN;
    for (int k = 0; k < g->gsize; k++) ph[(size_t)k * GHF_NPHASES + GHF_PH_TOTAL] = seconds; /* leader's time */
    ghf_fit_record r;
    memset(&r, 0, sizeof r);
    r.name = s->name;
    r.family = ghf_family_name(s->family);
    r.n_obs = s->row_len;
    r.d = d;
    r.symmetric = s->symmetric;
    const ghf_model m = {s->family, s->symmetric, s->fix_p, s->p};
    r.p_fixed = ghf_model_fixed_p(&m, d); /* NaN: p free */
    r.status = status;
    r.loglik = r.aic = r.bic = NAN;
    r.elapsed_s = seconds;
    r.mu = nan;
    r.gamma = nan + d;
    r.sigma = nan + 2 * d;
    r.p = r.a = r.b = NAN;
    r.n_phases = GHF_NPHASES;
    r.phase_names = ghf_phase_names;
    r.n_ranks = g->gsize;
    r.phase_s = ph;
    r.backend = g->job->backend;
    r.data_file = g->job->data_file;
    r.dataset = g->job->dataset;
    r.row_start = s->row_start;
    r.row_count = s->row_len;
    ghf_se se; /* standard errors asked for: NaN, with the reason */
    const int have_se = g->job->se && ghf_se_nan(d, "none", "the fit failed: no standard errors", &se) == 0;
    if (have_se) r.se = &se.v;
    deliver_record(g, s->index, &r);
    if (have_se) ghf_se_free(&se);
    free(nan);
    free(ph);
}

void deliver_done(group_ctx *g, int status, const char *msg)
{
    if (g->wrank == 0) {
        collector *c = g->coll;
        c->group_status[g->group] = status;
        c->group_msg[g->group] = strdup(msg ? msg : "");
        c->n_groups_done++;
        return;
    }
    ghf_pack b = {0};
    ghf_pack_i64(&b, g->group);
    ghf_pack_i64(&b, status);
    ghf_pack_str(&b, msg ? msg : "");
    send_to_rank0(g, TAG_DONE, &b);
    ghf_pack_free(&b);
}

/* Everything a window holds (backend, weights, rows), loaded or half-loaded. */
static void cache_free_window(data_cache *dc)
{
    if (dc->be) dc->be->destroy(dc->be);
    dc->be = NULL;
    free(dc->w);
    dc->w = NULL;
    ghf_missing_free(dc->miss);
    dc->miss = NULL;
    free(dc->mcounts);
    dc->mcounts = NULL;
    dc->has_missing = 0;
    ghf_data_free(&dc->data);
    ghf_shard_free(&dc->shard);
    dc->have = 0;
}

static void cache_drop_window(data_cache *dc)
{
    if (dc->have) cache_free_window(dc);
}

static void cache_free(data_cache *dc)
{
    cache_drop_window(dc);
    if (dc->have_span) ghf_shard_free(&dc->span);
    dc->have_span = 0;
}

/* The weights of the rows of spec s from the job's weights dataset into
 * dc->w (checked).  Collective over gcomm; 0 or an exit status. */
static int load_weights(group_ctx *g, data_cache *dc, const ghf_fit_spec *s, char *err, size_t errlen)
{
    ghf_shard ws;
    int st = ghf__weights_read(g->gcomm, g->job, s->row_start, s->row_len, &ws, err, errlen);
    if (st) return st;
    st = ghf__weights_check(g->gcomm, g->job, ws.x, ws.nrows, s->row_start + ws.row0, err, errlen);
    if (st) {
        ghf_shard_free(&ws);
        return st;
    }
    dc->w = ws.x; /* NULL on a rank without rows: then a non-NULL one, so that every rank takes the weighted path */
    if (!dc->w) dc->w = malloc(sizeof(double));
    if (ghf_any(g->gcomm, !dc->w)) {
        snprintf(err, errlen, "out of memory");
        free(dc->w);
        dc->w = NULL;
        return GHF_EXIT_RUNTIME;
    }
    return 0;
}

/* After the rows were read: the half-life weights (made here), the exact
 * sums and the label.  Collective over gcomm; 0 or an exit status. */
static int finish_weights(group_ctx *g, data_cache *dc, char *err, size_t errlen)
{
    const ghf_job *j = g->job;
    const ghf_shard *sh = &dc->shard;
    if (!j->weights) {
        free(dc->w);
        dc->w = malloc((size_t)(sh->nrows > 0 ? sh->nrows : 1) * sizeof(double));
        if (ghf_any(g->gcomm, !dc->w)) {
            snprintf(err, errlen, "out of memory (weights of %lld rows)", (long long)sh->nrows);
            free(dc->w);
            dc->w = NULL;
            return GHF_EXIT_RUNTIME;
        }
        ghf__weights_halflife(g->gcomm, j->halflife, sh->n_global, sh->nrows, dc->w);
    }
    ghf__weights_label(j, dc->wlabel, sizeof dc->wlabel);
    const int st = ghf__weights_sums(g->gcomm, j, dc->w, sh->nrows, sh->d, &dc->wsum, &dc->wsum2, &dc->wunit, err, errlen);
    if (st) {
        free(dc->w);
        dc->w = NULL;
    }
    return st;
}

/* --missing em: complete rows first, the counts; has_missing when some
 * rank has a row with a NaN entry.  Collective; 0 or an exit status. */
static int arrange_missing(group_ctx *g, data_cache *dc, char *err, size_t errlen)
{
    const int d = dc->shard.d;
    dc->mcounts = malloc((size_t)(d + 1) * sizeof(double));
    if (ghf_any(g->gcomm, !dc->mcounts)) {
        snprintf(err, errlen, "out of memory");
        return GHF_EXIT_RUNTIME;
    }
    const int st = ghf__missing_arrange(g->gcomm, &dc->shard, dc->w, &dc->n_complete, dc->mcounts, err, errlen);
    if (st) return st;
    dc->has_missing = dc->mcounts[0] < (double)dc->shard.n_global;
    return 0;
}

/* --missing em on the CUDA backend: the complete rows run on the device, the
 * rows with missing entries on the host (ghf_missing_estep), their
 * statistics added to the device's; world rank 0 says so once. */
static void missing_note(const group_ctx *g, const data_cache *dc)
{
    static int said;
    if (!said && g->wrank == 0 && !g->job->quiet && dc->has_missing && !strcmp(dc->be->name, "cuda")) {
        printf("ghfit: note: --missing em on the CUDA backend: the complete rows run on the GPU, the rows with "
               "missing entries on the host (CPU); their statistics are summed\n");
        fflush(stdout);
        said = 1;
    }
}

/* Where the backend may be CUDA (not `cpu`, and this rank has a GPU), a
 * float32 dataset is read as float32 (to be kept float32 on the device,
 * ghf_backend_create_f32) and widened on the host for the preparation; the
 * float32 copy is freed once the backend exists.  Not with --missing em
 * (its rows are rearranged on the host).  Either read makes the same
 * collective calls, so ranks may differ here. */
static int read_f32(const ghf_job *j)
{
    return (!j->backend || strcmp(j->backend, "cpu") != 0) && !j->missing_em && ghf_backend_gpu_count() > 0;
}

/* Load rows [start, start+len) on the group.  Collective over gcomm.
 * Returns 0 or a status with a message; *data_bad = 1 when the rows
 * themselves are the cause (reading or preparing them gave status 2). */
static int cache_load(group_ctx *g, data_cache *dc, const ghf_fit_spec *s, const char *what, int *data_bad, char *err,
                      size_t errlen)
{
    const ghf_job *j = g->job;
    const int64_t len = s->row_len;
    if (dc->have && dc->start == s->row_start && dc->len == len) {
        dc->t_load = 0.0;
        return 0;
    }
    const double t0 = MPI_Wtime();
    cache_drop_window(dc);
    int st;
    if (dc->have_span && s->row_start >= dc->span_start && s->row_start + len <= dc->span_start + dc->span_len) {
        ghf_shard *sh = &dc->shard;
        memset(sh, 0, sizeof *sh);
        const int d = dc->span.d;
        sh->x = malloc((size_t)len * (size_t)d * sizeof(double));
        if (!sh->x) {
            snprintf(err, errlen, "out of memory (%lld x %d window)", (long long)len, d);
            return 1;
        }
        memcpy(sh->x, dc->span.x + (size_t)(s->row_start - dc->span_start) * (size_t)d,
               (size_t)len * (size_t)d * sizeof(double));
        sh->n_global = len;
        sh->d = d;
        sh->row0 = 0;
        sh->nrows = len;
        sh->file_dtype_bits = dc->span.file_dtype_bits;
    } else {
        if (j->weights && (st = load_weights(g, dc, s, err, errlen)) != 0) return st;
        ghf_read_opts ro = {.path = j->data_file, .dataset = j->dataset, .win_start = s->row_start, .win_len = len,
                            .drop_nonfinite = j->missing_em ? 3 : j->drop_nonfinite, .granule = GHF_ROW_BLOCK,
                            .companion = dc->w};
        st = read_f32(j) ? ghf_h5_read_shard_f32(g->gcomm, &ro, &dc->shard, err, errlen)
                         : ghf_h5_read_shard(g->gcomm, &ro, &dc->shard, err, errlen);
        if (st == 0 && ghf_any(g->gcomm, ghf_shard_widen_keep(&dc->shard) != 0)) {
            snprintf(err, errlen, "out of memory (widening the float32 rows)");
            ghf_shard_free(&dc->shard);
            st = GHF_EXIT_RUNTIME;
        }
        *data_bad = st == GHF_EXIT_USAGE;
        if (st && *data_bad && g->mode == GHF_PIPE_RUN) { /* name the window the rows belong to */
            char tmp[1024];
            snprintf(tmp, sizeof tmp, "rows %lld..%lld: %s", (long long)s->row_start, (long long)(s->row_start + len - 1),
                     err);
            snprintf(err, errlen, "%s", tmp);
        }
        if (st) {
            free(dc->w);
            dc->w = NULL;
            return st;
        }
    }
    if ((j->weights || j->halflife > 0.0) && (st = finish_weights(g, dc, err, errlen)) != 0) {
        ghf_shard_free(&dc->shard);
        return st;
    }
    if (j->missing_em && (st = arrange_missing(g, dc, err, errlen)) != 0) {
        ghf_shard_free(&dc->shard);
        free(dc->w);
        dc->w = NULL;
        return st;
    }
    const double *wuse = dc->w && !dc->wunit ? dc->w : NULL;
    if (dc->has_missing)
        st = ghf_data_prepare_missing(g->gcomm, &dc->shard, wuse, what, &dc->data, err, errlen);
    else
    {
        /* N < d + 1 rows only when every fit of the job has the factor form */
        st = ghf_data_prepare_rows(g->gcomm, &dc->shard, wuse, what, ghf_job_factor_only(j) ? 2 : (int64_t)dc->shard.d + 1, &dc->data,
                                   err, errlen);
    }
    if (st) {
        *data_bad = st == GHF_EXIT_USAGE;
        ghf_shard_free(&dc->shard);
        free(dc->w);
        dc->w = NULL;
        return st;
    }
    const int64_t nfast = dc->has_missing ? dc->n_complete : dc->data.nrows; /* the backend's rows */
    /* float32 on the device: the shard's float32 copy and the centring (the
     * data were not rescaled: float32 values never need it) */
    const float *x32 = dc->shard.x32 && dc->data.scale_log2 == 0 ? dc->shard.x32 : NULL;
    dc->be = ghf_backend_create_f32(g->gcomm, j->backend, dc->data.x, x32, dc->data.shift, nfast, dc->data.d, &st,
                                    err, errlen);
    free(dc->shard.x32); /* only read while the backend was created */
    dc->shard.x32 = NULL;
    if (dc->be) dc->be->weights = wuse;
    if (dc->be) missing_note(g, dc);
    if (dc->be && dc->has_missing) {
        const int d = dc->data.d;
        dc->miss = ghf_missing_create(dc->data.x + (size_t)nfast * d, wuse ? wuse + nfast : NULL,
                                      dc->data.nrows - nfast, d);
        if (ghf_any(g->gcomm, !dc->miss)) {
            snprintf(err, errlen, "out of memory (the rows with missing entries)");
            dc->be->destroy(dc->be);
            dc->be = NULL;
            st = GHF_EXIT_RUNTIME;
        }
    }
    if (!dc->be) {
        cache_free_window(dc);
        return st ? st : 1;
    }
    dc->have = 1;
    dc->start = s->row_start;
    dc->len = len;
    dc->t_load = MPI_Wtime() - t0;
    return 0;
}

static void warm_set(warm *w, int chain, const double *mu_data, const ghf_params *t, int usable)
{
    w->valid = 0;
    if (!usable) return;
    const int d = t->d;
    if (w->t.d != d) {
        ghf_params_free(&w->t);
        if (ghf_params_alloc(&w->t, d)) return;
    }
    ghf_params_copy(&w->t, t);
    memcpy(w->t.mu, mu_data, (size_t)d * sizeof(double));
    w->chain = chain;
    w->valid = ghf_params_finite(&w->t);
}

static int cmp_idx(const void *a, const void *b)
{
    const int64_t x = ((const idx_pos *)a)->index, y = ((const idx_pos *)b)->index;
    return (x > y) - (x < y);
}

static int find_idx(const idx_pos *v, int n, int64_t index)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        const int mid = lo + (hi - lo) / 2;
        if (v[mid].index == index) return v[mid].k;
        if (v[mid].index < index) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

static int resume_lookup(const ghf_ckpt *resume, const ghf_fit_spec *specs, const int *mine, int n_mine, int *done_k,
                         int *run_k)
{
    for (int q = 0; q < n_mine; q++) done_k[q] = run_k[q] = -1;
    if (!resume) return 0;
    idx_pos *v = malloc((size_t)(resume->n_done + 1) * sizeof *v);
    if (!v) return -1;
    for (int k = 0; k < resume->n_done; k++) v[k] = (idx_pos){resume->done_index[k], k};
    qsort(v, (size_t)resume->n_done, sizeof *v, cmp_idx);
    for (int q = 0; q < n_mine; q++) {
        const int64_t index = specs[mine[q]].index;
        done_k[q] = find_idx(v, resume->n_done, index);
        for (int k = 0; k < resume->n_run && run_k[q] < 0; k++)
            if (resume->run[k].index == index) run_k[q] = k;
    }
    free(v);
    return 0;
}

/* One-rank groups whose unfinished fits need more than one row range read
 * every row those fits need at once. */
static void preload_span(group_ctx *g, data_cache *dc, const ghf_fit_spec *specs, const int *mine, int n_mine,
                         const int *done_k)
{
    const ghf_job *j = g->job;
    if (g->gsize != 1 || j->drop_nonfinite || j->weights || j->missing_em || n_mine == 0) return;
    int64_t lo = INT64_MAX, hi = 0;
    int need = 0, windows = 0; /* windows: 2 once two distinct row ranges are needed */
    for (int q = 0; q < n_mine; q++) {
        const ghf_fit_spec *s = &specs[mine[q]];
        if (done_k[q] >= 0) continue;
        if (need && (s->row_start != lo || s->row_start + s->row_len != hi)) windows = 2;
        need = 1;
        if (s->row_start < lo) lo = s->row_start;
        if (s->row_start + s->row_len > hi) hi = s->row_start + s->row_len;
    }
    if (windows < 2) return; /* one row range: the window cache holds it, a span would be a second copy */
    int64_t n0;
    int d0;
    char e2[512];
    if (!need || ghf_h5_probe(j->data_file, j->dataset, &n0, &d0, e2, sizeof e2) != 0 ||
        (double)(hi - lo) * d0 * 8.0 >= 2.0e9)
        return;
    ghf_read_opts ro = {.path = j->data_file, .dataset = j->dataset, .win_start = lo, .win_len = hi - lo};
    if (ghf_h5_read_shard(MPI_COMM_SELF, &ro, &dc->span, e2, sizeof e2) == 0) { /* else: window by window */
        dc->have_span = 1;
        dc->span_start = lo;
        dc->span_len = hi - lo;
    }
}

/* A fit that failed on its data: recorded (group leader), the next window
 * starts cold. */
static void fit_failed(group_ctx *g, const ghf_fit_spec *s, char *msg, double t0, warm *w)
{
    if (g->grank == 0) deliver_failed(g, s, msg, MPI_Wtime() - t0);
    msg[0] = '\0';
    w->valid = 0;
    group_tick(g);
}

/* The EM options of a spec (the caller sets init/resume). */
static void spec_em_opts(group_ctx *g, const ghf_fit_spec *s, const ghf_data *data, char *label, size_t lablen,
                         ghf_em_opts *eo)
{
    const ghf_job *j = g->job;
    ghf_em_opts_defaults(eo);
    eo->family = s->family;
    eo->symmetric = s->symmetric;
    eo->max_iter = j->max_iter;
    eo->tol = s->tol;
    eo->seed = (uint64_t)s->seed;
    eo->n_starts = j->starts;
    eo->accel = j->accel;
    eo->log_time = j->log_time;
    if (g->mode == GHF_PIPE_FIT) {
        eo->quiet = j->quiet;
    } else {
        eo->quiet = !j->log_iterations;
        snprintf(label, lablen, "%s: ", s->name);
        eo->label = label;
    }
    ghf_data_em_opts(data, eo);
    eo->stop_flag = g->stop;
    if (s->fix_p) {
        eo->fix_p = 1;
        eo->p_fixed = s->p;
    }
    eo->on_state = group_on_state;
    eo->on_state_ctx = g;
}

/* --missing em: what the result records */
static void missing_record(const data_cache *dc, ghf_fit_out *out)
{
    if (!dc->mcounts) return;
    const int d = dc->data.d;
    double nmiss = 0.0, ninc = 0.0;
    for (int k = 1; k <= d; k++) {
        nmiss += k * dc->mcounts[k];
        ninc += dc->mcounts[k];
    }
    out->missing = "em";
    out->n_incomplete = (int64_t)ninc;
    out->missing_fraction = dc->data.n_global > 0 ? nmiss / ((double)dc->data.n_global * d) : 0.0;
    out->missing_counts = dc->mcounts;
}

/* The outcome of one fit: done (record delivered), failed on its data
 * (recorded, the sweep goes on), stopped, or an error of the group. */
enum { FIT_DONE, FIT_FAILED, FIT_STOPPED, FIT_ERROR };

/* Fits one spec on the group's loaded rows (dc).  Collective over the
 * group.  *status holds GROUP_ERROR + exit status for FIT_ERROR. */
/* --sigma's spelling of a form (-1 full, 0 diag, R factors) */
static void form_name(int r, char *b, size_t n)
{
    if (r < 0) snprintf(b, n, "full");
    else if (r == 0) snprintf(b, n, "diag");
    else snprintf(b, n, "factor:%d", r);
}

static int fit_one(group_ctx *g, const ghf_fit_spec *s, data_cache *dc, const ghf_ckpt_run *rs, warm *w,
                   double t0, const char *what, int *status, char *msg, size_t msglen)
{
    const ghf_job *j = g->job;
    const int fit_mode = g->mode == GHF_PIPE_FIT;
    const ghf_data *data = &dc->data;
    ghf_em_opts eo;
    char label[80];
    spec_em_opts(g, s, data, label, sizeof label, &eo);
    eo.missing = dc->miss;
    eo.has_missing = dc->has_missing;
    g->cur = s;
    g->base_iter = -1;
    if (fit_mode && g->wrank == 0 && !j->quiet) {
        int size;
        MPI_Comm_size(g->gcomm, &size);
        printf("ghfit %s: %s fit of %s (%lld x %d) on %d rank%s, backend %s\n", GHFIT_VERSION, s->name, what,
               (long long)data->n_global, data->d, size, size == 1 ? "" : "s", dc->be->name);
        if (rs) printf("resuming from %s at iteration %d\n", j->checkpoint, rs->iter);
        fflush(stdout);
    }
    ghf_params init;
    int have_init = 0;
    ghf_em_state rstate;
    int have_rstate = 0;
    /* the checkpoint's form of Sigma against this run's --sigma (the same verdict on every rank) */
    const int rs_form = rs ? (rs->disp ? rs->nf : -1) : s->sigma_r;
    if (rs && rs_form != s->sigma_r) {
        /* refused below */
    } else if (rs && rs->d == data->d) {
        if (ghf_ckpt_run_to_state(rs, j->max_iter, &rstate) == 0) {
            have_rstate = 1;
            eo.resume = &rstate;
        }
    } else if (j->warm_start && w->valid && w->chain == s->chain && w->t.d == data->d &&
               ghf_params_alloc(&init, data->d) == 0) {
        ghf_data_params_to_internal(data, &w->t, &init); /* w->t is in data coordinates */
        const ghf_model m = {s->family, s->symmetric, s->fix_p, s->p};
        const double fp = ghf_model_fixed_p(&m, data->d);
        if (!isnan(fp)) init.p = fp;
        have_init = 1;
        eo.init = &init;
    }
    ghf_fit_out out;
    memset(&out, 0, sizeof out);
    snprintf(out.name, sizeof out.name, "%s", s->name);
    out.family = s->family;
    out.symmetric = s->symmetric;
    out.fix_p = s->fix_p;
    out.p_fixed = s->p;
    out.n_dropped = dc->shard.n_dropped;
    out.sigma_r = s->sigma_r;
    int st;
    char fa[32], fb[32];
    if (rs_form != s->sigma_r) {
        form_name(rs_form, fa, sizeof fa);
        form_name(s->sigma_r, fb, sizeof fb);
        snprintf(msg, msglen, "%s: the checkpoint's fit %s has --sigma %s, this run --sigma %s (remove it, or run without --resume)",
                 j->checkpoint, s->name, fa, fb);
        st = GHF_EXIT_USAGE;
    } else if (s->sigma_r >= data->d) { /* the same verdict on every rank */
        snprintf(msg, msglen, "--sigma factor:%d: a factor form needs fewer factors than the %d columns of the data",
                 s->sigma_r, data->d);
        st = GHF_EXIT_USAGE;
    } else if (s->components > 1) {
        /* a K-component mixture: its own EM on the host rows (em_mixture.c);
         * the backend, if CUDA under --backend auto, is not used for it */
        if (g->grank == 0 && !j->quiet && !strcmp(dc->be->name, "cuda")) {
            printf("ghfit: note: %s: --components %d runs on the CPU (the CUDA backend has no mixture E-step)\n",
                   s->name, s->components);
            fflush(stdout);
        }
        out.components = s->components;
        eo.quiet = j->quiet; /* one line per start, unless --quiet */
        eo.beat = group_beat;  /* the heartbeats that on_state gives a single law's fit */
        eo.beat_arg = g;
        st = ghf_em_fit_mixture(g->gcomm, data->x, data->w, data->nrows, data->d, s->components, &eo, &out.em,
                                &out.mix, msg, msglen);
        if (st == 0 && out.em.outcome == GHF_EM_FAILED) {
            /* every start collapsed: bad input for this K (exit 2 for `ghfit fit`; a failed fit of a run) */
            const char *why = out.em.status;
            if (!strncmp(why, "failed: ", 8)) why += 8; /* a run's failed record says "failed: " once */
            snprintf(msg, msglen, "%s: %s", what, why);
            st = GHF_EXIT_USAGE;
        }
    } else if (s->sigma_r >= 0) {
        /* Sigma = B B' + D (diag: no B): the factor EM on the host rows; the
         * backend, if CUDA under --backend auto, is not used for it */
        if (g->grank == 0 && !j->quiet && !strcmp(dc->be->name, "cuda")) {
            printf("ghfit: note: %s: --sigma %s runs on the CPU (the CUDA backend has no factor E-step)\n", s->name,
                   s->sigma_r ? "factor" : "diag");
            fflush(stdout);
        }
        /* --missing em: the complete rows first (ghf_em_fit_factor's x), the others in dc->miss */
        st = ghf_em_fit_factor(g->gcomm, data->x, data->w, dc->has_missing ? dc->n_complete : data->nrows, data->d,
                               s->sigma_r, &eo, &out.em, msg, msglen);
    } else {
        st = ghf_em_fit(g->gcomm, dc->be, data->d, &eo, &out.em, msg, msglen);
    }
    if (have_init) ghf_params_free(&init);
    if (have_rstate) ghf_em_state_free(&rstate);
    int outcome = FIT_DONE;
    if (st == GHF_EXIT_USAGE && !fit_mode) { /* e.g. a warm start this window cannot use */
        outcome = FIT_FAILED;
    } else if (st) {
        if (!fit_mode) {
            char tmp[1024];
            snprintf(tmp, sizeof tmp, "fit %s: %s", s->name, msg);
            snprintf(msg, msglen, "%s", tmp);
        }
        *status = GROUP_ERROR + (st == GHF_EXIT_USAGE ? GHF_EXIT_USAGE : GHF_EXIT_RUNTIME);
        outcome = FIT_ERROR;
    } else if (out.em.outcome == GHF_EM_INTERRUPTED) {
        outcome = FIT_STOPPED;
    } else if (fit_mode && out.em.outcome == GHF_EM_FAILED) { /* `ghfit fit`: an error, no result file */
        snprintf(msg, msglen, "%s: %s", what, out.em.status);
        *status = GROUP_ERROR + GHF_EXIT_RUNTIME;
        outcome = FIT_ERROR;
    }
    if (outcome != FIT_DONE) {
        ghf_fit_out_free(&out);
        return outcome;
    }
    out.phases[GHF_PH_READ] = dc->t_load;
    out.phases[GHF_PH_INIT] = out.em.t_init;
    out.phases[GHF_PH_ESTEP] = out.em.t_estep;
    out.phases[GHF_PH_ALLREDUCE] = out.em.t_allreduce;
    out.phases[GHF_PH_MSTEP] = out.em.t_mstep;
    out.phases[GHF_PH_WRITE] = 0.0;
    out.phases[GHF_PH_TOTAL] = MPI_Wtime() - t0;
    if (j->weights || j->halflife > 0.0) { /* weighted EM: the unweighted log-likelihood of the same parameters */
        out.weights = dc->wlabel;
        out.weight_sum = dc->wsum;
        out.n_eff = dc->wsum * dc->wsum / dc->wsum2;
        if ((s->components > 1 ? ghf_em_mixture_loglik(g->gcomm, data->x, data->nrows, &out.mix.m, s->family,
                                                       &out.loglik_unweighted, msg, msglen)
             : s->sigma_r >= 0 ? ghf_em_factor_loglik(g->gcomm, data->x, dc->has_missing ? dc->n_complete : data->nrows,
                                                    dc->miss, dc->has_missing, &out.em.params,
                                                    &out.loglik_unweighted, msg, msglen)
                             : ghf_em_loglik_unweighted(g->gcomm, dc->be, dc->miss, dc->has_missing, &out.em.params,
                                                        &out.loglik_unweighted, msg, msglen)) > 0) {
            ghf_fit_out_free(&out);
            *status = GROUP_ERROR + GHF_EXIT_RUNTIME;
            return FIT_ERROR;
        }
    }
    missing_record(dc, &out);
    const int oom = ghf_fit_out_finish(&out, data) != 0;
    if (ghf_any(g->gcomm, oom)) {
        snprintf(msg, msglen, "out of memory");
        ghf_fit_out_free(&out);
        *status = GROUP_ERROR + GHF_EXIT_RUNTIME;
        return FIT_ERROR;
    }
    if (j->se && g->grank == 0 && !j->quiet && !strcmp(dc->be->name, "cuda")) { /* docs/design.md */
        printf("ghfit: %s: standard errors on the host CPUs (OpenMP): the CUDA backend has no SE pass\n", s->name);
        fflush(stdout);
    }
    if (ghf_fit_out_se(g->gcomm, &out, data, j->se, fit_mode && !j->quiet, msg, msglen) != 0) { /* --se, se: */
        ghf_fit_out_free(&out);
        *status = GROUP_ERROR + GHF_EXIT_RUNTIME;
        return FIT_ERROR;
    }
    if (ghf_fit_out_gather(g->gcomm, &out) != 0) { /* collective: 1 on every rank */
        snprintf(msg, msglen, "out of memory (the per-rank timings of fit %s)", s->name);
        ghf_fit_out_free(&out);
        *status = GROUP_ERROR + GHF_EXIT_RUNTIME;
        return FIT_ERROR;
    }
    warm_set(w, s->chain, out.outp.mu, &out.outp, out.em.outcome != GHF_EM_FAILED && s->components <= 1);
    if (g->grank == 0) {
        if (fit_mode && out.em.n_decrease > 0)
            fprintf(stderr, "ghfit: warning: the log-likelihood decreased in %d iteration(s)\n", out.em.n_decrease);
        ghf_fit_record rec;
        ghf_fit_out_record(&out, dc->be->name, &rec);
        rec.data_file = j->data_file;
        rec.dataset = j->dataset;
        rec.row_start = s->row_start;
        rec.row_count = s->row_len;
        rec.device = dc->be->device;
        deliver_record(g, s->index, &rec);
    }
    ghf_fit_out_free(&out);
    return FIT_DONE;
}

/* A fit finished before a restart: skipped, its parameters kept for a warm start. */
static void resumed_done(const ghf_ckpt *resume, int dk, const ghf_fit_spec *s, warm *w)
{
    ghf_unpack u = {resume->done_blob + resume->done_off[dk], (size_t)(resume->done_off[dk + 1] - resume->done_off[dk]),
                    0, 0};
    ghf_rec r;
    if (ghf_rec_unpack(&u, &r) != 0) {
        w->valid = 0;
        return;
    }
    ghf_params t = {r.r.d, (double *)r.r.mu, (double *)r.r.gamma, (double *)r.r.sigma, r.r.p, r.r.a, r.r.b, 0, 0, NULL, NULL};
    warm_set(w, s->chain, r.r.mu, &t, strncmp(r.r.status, "failed", 6) != 0);
    ghf_rec_free(&r);
}

int run_group(group_ctx *g, const ghf_fit_spec *specs, const int *mine, int n_mine, const ghf_ckpt *resume,
              char *msg, size_t msglen)
{
    const ghf_job *j = g->job;
    data_cache dc;
    memset(&dc, 0, sizeof dc);
    warm w;
    memset(&w, 0, sizeof w);
    int status = GROUP_OK;
    int *done_k = malloc((size_t)(n_mine + 1) * sizeof(int)), *run_k = malloc((size_t)(n_mine + 1) * sizeof(int));
    const int oom = !done_k || !run_k || resume_lookup(resume, specs, mine, n_mine, done_k, run_k) != 0;
    if (ghf_any(g->gcomm, oom)) { /* the group's ranks agree */
        snprintf(msg, msglen, "out of memory");
        status = GROUP_ERROR + GHF_EXIT_RUNTIME;
        n_mine = 0;
    }
    preload_span(g, &dc, specs, mine, n_mine, done_k);
    for (int q = 0; q < n_mine; q++) {
        const ghf_fit_spec *s = &specs[mine[q]];
        if (done_k[q] >= 0) {
            resumed_done(resume, done_k[q], s, &w);
            continue;
        }
        /* a stop between fits of a sweep; a single fit stops in EM, after its
         * start, so that its checkpoint holds iteration 0 */
        if (g->mode == GHF_PIPE_RUN && ghf_any(g->gcomm, *g->stop != 0)) {
            status = GROUP_STOPPED;
            break;
        }
        const double t0 = MPI_Wtime();
        char what[1024];
        if (g->mode == GHF_PIPE_FIT)
            snprintf(what, sizeof what, "%s:%s", j->data_file, j->dataset);
        else
            snprintf(what, sizeof what, "%s:%s rows %lld..%lld (fit %s)", j->data_file, j->dataset,
                     (long long)s->row_start, (long long)(s->row_start + s->row_len - 1), s->name);
        int data_bad = 0;
        const int st = cache_load(g, &dc, s, what, &data_bad, msg, msglen);
        if (st && data_bad && g->mode == GHF_PIPE_RUN) { /* this window's data: the fit fails, the others go on */
            fit_failed(g, s, msg, t0, &w);
            continue;
        }
        if (st) {
            status = GROUP_ERROR + st;
            break;
        }
        const ghf_ckpt_run *rs = run_k[q] >= 0 ? &resume->run[run_k[q]] : NULL;
        const int outcome = fit_one(g, s, &dc, rs, &w, t0, what, &status, msg, msglen);
        if (outcome == FIT_FAILED) {
            fit_failed(g, s, msg, t0, &w);
            continue;
        }
        if (outcome == FIT_STOPPED) status = GROUP_STOPPED;
        if (outcome != FIT_DONE) break;
        group_tick(g);
    }
    ghf_params_free(&w.t);
    cache_free(&dc);
    free(done_k);
    free(run_k);
    return status;
}
