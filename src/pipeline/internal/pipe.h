/* pipe.h - the pipeline's own parts (private to src/pipeline): the rank-0
 * collector, a group's worker, and what they tell each other.
 *
 * Two levels of parallelism.  The world is split into G groups of ranks
 * (MPI_Comm_split); a group's size follows the data: about rows_per_rank
 * rows per rank, so a 1,000-row window is fitted by one rank and a 10^8-row
 * data set by all of them (G = 1; `ghfit fit` is always G = 1).  Each group
 * takes a fixed, deterministic share of the fits (ghf_job_assign_groups) and
 * runs them one after another on its shards, reading each distinct row range
 * once.
 *
 * World rank 0 (a member of group 0) collects: the other groups' leaders
 * send every finished fit as a serialised record (record.h), their EM state
 * for checkpoints, and a final "done" message; rank 0 polls for them at
 * every EM iteration of its own fits and waits for the rest at the end.  It
 * then writes ONE result file (atomically) or, after a stop signal, one
 * checkpoint holding the finished records and every group's unfinished fit.
 * Every wait of this point-to-point traffic watches the other ranks
 * (liveness.h), so a dead or hung rank ends the job instead of hanging it. */
#ifndef GHF_PIPE_INTERNAL_H
#define GHF_PIPE_INTERNAL_H

#include <mpi.h>
#include <signal.h>
#include <stddef.h>

#include "h5ckpt.h"
#include "h5io.h"
#include "job.h"
#include "liveness.h"
#include "pipeline.h"
#include "resume.h"

enum { TAG_REC = 101, TAG_STATE = 102, TAG_DONE = 103, TAG_FINAL = 104 }; /* heartbeats: GHF_LIVE_TAG */
/* a group's outcome; errors carry the exit status: GROUP_ERROR + status */
enum { GROUP_OK = 0, GROUP_STOPPED = 1, GROUP_ERROR = 10 };
#define CKPT_MIN_INTERVAL 1.0 /* seconds between periodic checkpoint writes of a sweep */

/* ---- rank 0: the collector (collector.c) ---- */

typedef struct collector {
    MPI_Comm comm;         /* world duplicate for the point-to-point messages */
    ghf_live *live;        /* the watch on the other ranks (liveness.h) */
    int world_size;
    const ghf_job *job;
    ghf_pipe_mode mode;
    const ghf_fit_spec *specs;
    int n_specs;
    unsigned char **rec;   /* [n_specs] packed records (NULL: not finished) */
    size_t *rec_len;
    int n_rec;
    int G;
    ghf_ckpt_run *running; /* [G] the unfinished fit of each group (d == 0: none) */
    int *group_status;     /* [G], -1 while running */
    char **group_msg;
    int n_groups_done;
    ghf_ckpt file;         /* identity (for checkpoints) */
    double last_write;
    int n_printed;
    /* the checkpoint's log of finished fits: records not yet in it, in arrival order */
    ghf_ckpt_log *log;
    const ghf_ckpt *resume; /* the loaded checkpoint (its log is continued), or NULL */
    int *pending, n_pending;
    int n_written;         /* checkpoints written by this run */
    int warned;            /* a periodic write failed since the last good one */
    int n_failed, first_failed; /* fits whose status is "failed: ..." (position of the first) */
    int n_total;           /* the fits of the whole job (every slice): result files record it */
} collector;

void coll_init(collector *c, MPI_Comm comm, const ghf_job *j, ghf_pipe_mode mode, const ghf_fit_spec *specs,
               int n_specs, int G, const int *group_of, const ghf_ckpt *resume, const ghf_ckpt_id *cid);
/* take what arrived, send the heartbeats, check the other ranks; the number of messages */
int  coll_poll(collector *c);
/* a finished fit (the packed record's bytes are taken over) */
void coll_add_record(collector *c, int group, unsigned char *bytes, size_t n);
/* a group's EM state for the checkpoint (the arrays are taken over) */
void coll_set_state(collector *c, int group, const ghf_ckpt_run *r, int stopping);
/* after every group reported: the result file, or the checkpoint after a
 * stop; the exit status (message in err) */
int  coll_finish(collector *c, int size, double t0, char *err, size_t errlen);
void coll_free(collector *c);

/* ---- a group of ranks: its share of the fits (worker.c) ---- */

typedef struct group_ctx {
    MPI_Comm gcomm, pcomm; /* the group; the world duplicate for messages */
    int wrank, grank, gsize, group;
    int d;                 /* columns of the data */
    ghf_live *live;
    const ghf_job *job;
    ghf_pipe_mode mode;
    volatile sig_atomic_t *stop;
    collector *coll;       /* world rank 0 only */
    /* the fit being run (for the on_state hook) */
    const ghf_fit_spec *cur;
    int base_iter;
    int iter_sleep_ms;
    int last_iter;
} group_ctx;

/* Runs the group's fits.  Returns GROUP_OK / GROUP_STOPPED / GROUP_ERROR + status (msg). */
int  run_group(group_ctx *g, const ghf_fit_spec *specs, const int *mine, int n_mine, const ghf_ckpt *resume,
               char *msg, size_t msglen);
/* the group leader's last message to the collector */
void deliver_done(group_ctx *g, int status, const char *msg);

/* ---- observation weights (weights.c) ---- */

/* "FILE:DATASET" of the job's weights, or "halflife H" */
void ghf__weights_label(const ghf_job *j, char *out, size_t len);
/* Collective: the weights of rows [row_start, row_start + len) of the job's
 * weights dataset into ws (ws->x, ws->nrows: the partition the data's read
 * gets with GHF_ROW_BLOCK; non-finite values kept for the check).  Status 2
 * when the dataset is not a vector of as many values as the data have rows. */
int  ghf__weights_read(MPI_Comm comm, const ghf_job *j, int64_t row_start, int64_t len, ghf_shard *ws, char *err,
                       size_t errlen);
/* Collective: status 2 (agreed) naming the first row (row0 + i) whose weight
 * is negative or not finite. */
int  ghf__weights_check(MPI_Comm comm, const ghf_job *j, const double *w, int64_t nrows, int64_t row0, char *err,
                        size_t errlen);
/* Collective: w_i = 2^(-(N-1-i)/h) for this rank's rows, i their index among
 * the N = n_global rows of the fit (ranks hold consecutive rows in rank order). */
void ghf__weights_halflife(MPI_Comm comm, double h, int64_t n_global, int64_t nrows, double *w);
/* Collective: exact sums of w and w^2 over all ranks, and *unit = 1 when every
 * weight is exactly 1.  Status 2 when every weight is 0, a sum overflows, or
 * Kish's effective sample size (sum w)^2 / sum w^2 is below d + 1. */
int  ghf__weights_sums(MPI_Comm comm, const ghf_job *j, const double *w, int64_t nrows, int d, double *sum,
                       double *sum2, int *unit, char *err, size_t errlen);

/* ---- missing coordinates (missing.c) ---- */

/* Collective: the shard's complete rows first, then the rows with NaN
 * entries, each in row order (w, when set, moved with them);
 * *n_complete: the rank's complete rows; counts[k] (k = 0..d): the rows
 * with k missing entries over all ranks. */
int ghf__missing_arrange(MPI_Comm comm, ghf_shard *sh, double *w, int64_t *n_complete, double *counts,
                         char *err, size_t errlen);

#endif
