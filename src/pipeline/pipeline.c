/* pipeline.c - see pipeline.h: checks, expansion, groups, resume, the run
 * of every group, and the end (result file or checkpoint) on rank 0. */
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "backend.h"
#include "fit.h"
#include "ghf_version.h"
#include "iocheck.h"
#include "pipe.h"
#include "postfit.h"
#include "util.h"

/* The end of the point-to-point traffic: every rank waits (watching the
 * others, liveness.h) for rank 0's "final" message, after which rank 0
 * sends nothing more; the heartbeats still in flight are completed.  Then
 * the status can be broadcast: every rank is there. */
static void final_handshake(group_ctx *g, int size)
{
    static const char byte = 0;
    if (g->wrank == 0) {
        MPI_Request *req = malloc((size_t)size * sizeof *req);
        if (!req) ghf_live_mpi(g->live, MPI_ERR_NO_MEM, "the final message");
        for (int r = 1; r < size; r++)
            ghf_live_mpi(g->live, MPI_Isend(&byte, 1, MPI_BYTE, r, TAG_FINAL, g->pcomm, &req[r]), "the final message");
        for (int r = 1; r < size; r++) ghf_live_wait(g->live, &req[r], -1);
        free(req);
    } else {
        MPI_Status ms;
        ghf_live_expect(g->live, 0, 1);
        ghf_live_probe(g->live, 0, &ms);
        char b;
        ghf_live_mpi(g->live, MPI_Recv(&b, 1, MPI_BYTE, 0, TAG_FINAL, g->pcomm, MPI_STATUS_IGNORE), "the final message");
        ghf_live_expect(g->live, 0, 0);
    }
    ghf_live_flush(g->live);
}

/* Inputs before outputs (rank 0, broadcast), then the expansion and, for a
 * sweep, every window's shape.  0 or an exit status (message in err). */
static int prepare(MPI_Comm world, const ghf_job *j, ghf_pipe_mode mode, int64_t *n_rows, int *d,
                   ghf_fit_spec **specs, int *n_specs, int *n_total, char *err, size_t errlen)
{
    int size;
    MPI_Comm_size(world, &size);
    /* `ghfit fit` checks its window (and its shape) with the inputs */
    const int fit = mode == GHF_PIPE_FIT;
    const ghf_io_plan plan = ghf_io_plan_of(j, fit, size);
    int st = ghf_io_check(world, &plan, n_rows, d, err, errlen);
    if (st) return st;
    if (!fit) st = ghf_postfit_check(world, j, *d, err, errlen);
    if (st) return st;
    st = ghf_job_expand(j, *n_rows, specs, n_specs, n_total, err, errlen);
    /* every window must be fittable: rows > d and memory (the same on every rank) */
    if (!st && !fit) st = ghf_pipeline_windows_check(j, *specs, *n_specs, *d, size, err, errlen);
    if (!st) st = ghf_pipeline_sigma_check(*specs, *n_specs, *d, j->se, err, errlen);
    return st;
}

int ghf_pipeline_groups(const ghf_job *j, const ghf_fit_spec *specs, int n_specs, int size)
{
    int64_t max_len = 0;
    for (int i = 0; i < n_specs; i++)
        if (specs[i].row_len > max_len) max_len = specs[i].row_len;
    int64_t rpg = max_len / j->rows_per_rank;
    if (rpg < 1) rpg = 1;
    if (rpg > size) rpg = size;
    int G = (int)(size / rpg);
    if (G > n_specs) G = n_specs;
    return G < 1 ? 1 : G;
}

static void run_header(const ghf_job *j, int n_specs, int n_total, int64_t n_rows, int d, int size, int G)
{
    printf("ghfit %s: run %s: %d fit%s (of %d) of %s:%s (%lld x %d) on %d rank%s: %d group%s of %d%s rank%s\n",
           GHFIT_VERSION, j->source, n_specs, n_specs == 1 ? "" : "s", n_total, j->data_file, j->dataset,
           (long long)n_rows, d, size, size == 1 ? "" : "s", G, G == 1 ? "" : "s", size / G, size % G ? "+" : "",
           size / G == 1 && size % G == 0 ? "" : "s");
}

/* The groups' work and rank 0's collecting; the exit status on every rank. */
static int run_all(MPI_Comm world, const ghf_job *j, const ghf_pipe_opts *o, const ghf_fit_spec *specs,
                   int n_specs, int n_total, int64_t n_rows, int d, double t0, char *err, size_t errlen)
{
    int rank, size;
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);
    const int G = ghf_pipeline_groups(j, specs, n_specs, size);
    const int group = (int)((int64_t)rank * G / size);
    group_ctx g;
    memset(&g, 0, sizeof g);
    MPI_Comm_split(world, group, rank, &g.gcomm);
    ghf_backend_map_devices(world, g.gcomm, j->backend ? j->backend : "auto"); /* GPUs from the world's node-local layout */
    MPI_Comm_dup(world, &g.pcomm);
    g.live = ghf_live_create(world, g.pcomm);
    g.wrank = rank;
    g.group = group;
    g.d = d;
    g.job = j;
    g.mode = o->mode;
    g.stop = o->stop;
    g.iter_sleep_ms = ghf_ckpt_test_iter_sleep_ms();
    MPI_Comm_rank(g.gcomm, &g.grank);
    MPI_Comm_size(g.gcomm, &g.gsize);
    int *group_of = malloc((size_t)n_specs * sizeof(int)), *mine = malloc((size_t)n_specs * sizeof(int));
    int n_mine = 0, st = 0;
    if (ghf_any(world, !group_of || !mine)) {
        snprintf(err, errlen, "out of memory (%d fits)", n_specs);
        st = GHF_EXIT_RUNTIME;
        goto out;
    }
    ghf_job_assign_groups(specs, n_specs, G, group_of);
    for (int i = 0; i < n_specs; i++)
        if (group_of[i] == group) mine[n_mine++] = i;

    /* identity, resume */
    char *cfg = ghf_job_config_text(j);
    ghf_ckpt_id cid = ghf_pipeline_ckpt_id(j, o->mode, n_rows, d, n_specs, cfg);
    ghf_ckpt resume;
    memset(&resume, 0, sizeof resume);
    int have_resume = 0;
    char wlabel[1600];
    if (j->weights) {
        ghf__weights_label(j, wlabel, sizeof wlabel);
        cid.weights = wlabel;
    }
    if (j->checkpoint) st = ghf_ckpt_id_fingerprint(world, &cid, err, errlen);
    if (!st && j->resume) {
        st = ghf_ckpt_load(world, j->checkpoint, &cid, &resume, err, errlen);
        have_resume = st == 0;
    }
    if (st) {
        free(cfg);
        goto out;
    }
    collector coll;
    memset(&coll, 0, sizeof coll);
    if (rank == 0) {
        coll_init(&coll, g.pcomm, j, o->mode, specs, n_specs, G, group_of, have_resume ? &resume : NULL, &cid);
        coll.live = g.live;
        coll.n_total = n_total;
        coll.world_size = size;
        for (int k = 1; k < G; k++) ghf_live_expect(g.live, (int)(((int64_t)k * size + G - 1) / G), 1); /* leaders */
        g.coll = &coll;
        if (!j->quiet && o->mode == GHF_PIPE_RUN) {
            run_header(j, n_specs, n_total, n_rows, d, size, G);
            if (have_resume)
                printf("resuming from %s: %d fit%s finished, %d in progress\n", j->checkpoint, coll.n_rec,
                       coll.n_rec == 1 ? "" : "s", resume.n_run);
        }
        fflush(stdout);
    }
    char msg[1024] = "";
    const int gst = run_group(&g, specs, mine, n_mine, have_resume ? &resume : NULL, msg, sizeof msg);
    if (g.grank == 0) deliver_done(&g, gst, msg);
    /* rank 0: wait for every group, then write the result or the checkpoint */
    if (rank == 0) {
        for (int k = 0; coll.n_groups_done < G;) {
            if (coll_poll(&coll) > 0) k = 0;
            else ghf_live_nap(&k);
        }
        st = coll_finish(&coll, size, t0, err, errlen);
        fflush(stdout);
    }
    final_handshake(&g, size);
    ghf_bcast_status(world, &st, err, errlen);
    if (rank == 0) coll_free(&coll);
    if (have_resume) ghf_ckpt_free(&resume);
    free(cfg);
out:
    free(group_of);
    free(mine);
    ghf_live_free(g.live);
    MPI_Comm_free(&g.gcomm);
    MPI_Comm_free(&g.pcomm);
    return st;
}

int ghf_pipeline_run(MPI_Comm world, const ghf_job *j, const ghf_pipe_opts *o)
{
    const double t0 = MPI_Wtime();
    char err[1024] = "";
    int64_t n_rows = 0;
    int d = 0;
    ghf_fit_spec *specs = NULL;
    int n_specs = 0, n_total = 0;
    int st = prepare(world, j, o->mode, &n_rows, &d, &specs, &n_specs, &n_total, err, sizeof err);
    if (!st) st = run_all(world, j, o, specs, n_specs, n_total, n_rows, d, t0, err, sizeof err);
    if (st == GHF_EXIT_CHECKPOINT) ghf_note0("%s", err); /* a planned stop */
    else if (st) ghf_error0("%s", err);
    free(specs);
    return st;
}
