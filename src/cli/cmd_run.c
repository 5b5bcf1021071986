/* cmd_run.c - `ghfit run JOB` (job files and sweeps) and `ghfit summary`.
 *
 * Two levels of parallelism.  The world is split into G groups of ranks
 * (MPI_Comm_split); a group's size follows the data: about rows_per_rank
 * rows per rank, so a 1,000-row window is fitted by one rank and a
 * 10^8-row data set by all of them (G = 1).  Each group takes a fixed,
 * deterministic share of the fits (per chain of rolling windows a contiguous
 * block, so warm starts follow consecutive windows; round robin when there
 * are fewer windows than groups) and runs them one after another on its
 * shards, reading each distinct row range once.
 *
 * World rank 0 (a member of group 0) collects: the other groups' leaders
 * send every finished fit as a serialised record (sweep.h), their EM state
 * for checkpoints, and a final "done" message; rank 0 polls for them at every
 * EM iteration of its own fits and waits for the rest at the end.  It then
 * writes ONE result file (atomically) or, after a stop signal, one
 * checkpoint holding the finished records and every group's unfinished
 * fit. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "resume.h"
#include "commands.h"
#include "em.h"
#include "fit.h"
#include "ghf_version.h"
#include "h5io.h"
#include "iocheck.h"
#include "job.h"
#include "liveness.h"
#include "record.h"
#include "summary.h"
#include "agree.h"
#include "util.h"
#include "xreduce.h"

enum { TAG_REC = 101, TAG_STATE = 102, TAG_DONE = 103, TAG_FINAL = 104 }; /* heartbeats: GHF_LIVE_TAG */
/* a group's outcome; errors carry the exit status: GROUP_ERROR + status */
enum { GROUP_OK = 0, GROUP_STOPPED = 1, GROUP_ERROR = 10 };
#define CKPT_MIN_INTERVAL 1.0 /* seconds between periodic checkpoint writes of a sweep */

/* ---------------------------------------------------------------------------
 * Command line
 * ------------------------------------------------------------------------- */

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np P ghfit run JOB.yaml [overrides]\n"
            "  Runs the fits of a job file (reference: docs/job-files.md): every combination of\n"
            "  family x p x tol x seed x rolling window, in groups of ranks sized to the data.\n"
            "overrides (they replace the job file's keys):\n"
            "  --data FILE  --dataset NAME  --out FILE  --tol T (one value)  --max-iter K  --starts K\n"
            "  --backend auto|cpu|cuda  --accel squarem|none  --rows-per-rank R\n"
            "  --warm-start | --no-warm-start  --quiet  --log-iterations\n"
            "  --checkpoint FILE  --checkpoint-every K  --resume\n"
            "  --slice K/N          fit only the fits i with i %% N == K (job arrays: one result file per slice)\n"
            "exit status: 0 done, 1 run-time failure, 2 bad job file or usage,\n"
            "3 finished and wrote the result, but some fits failed (their status starts with 'failed:'),\n"
            "75 stopped on SIGUSR1/SIGTERM (checkpoint written when requested: rerun with --resume)\n");
}

/* Read the job file (rank 0): a regular file of at most GHF_JOB_MAX_BYTES
 * bytes (opened without blocking, so a FIFO cannot hold the run).  Returns 0,
 * or 2/1 with one message naming the file. */
static int read_job_file(const char *path, char **text, size_t *len, char *err, size_t errlen)
{
    *text = NULL;
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        snprintf(err, errlen, "%s: cannot read the job file: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return GHF_EXIT_USAGE;
    }
    if (!S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%s: the job file is not a regular file", path);
        close(fd);
        return GHF_EXIT_USAGE;
    }
    if (sb.st_size > GHF_JOB_MAX_BYTES) {
        snprintf(err, errlen, "%s: the job file has %lld bytes, more than the limit of %d (1 MiB)", path,
                 (long long)sb.st_size, GHF_JOB_MAX_BYTES);
        close(fd);
        return GHF_EXIT_USAGE;
    }
    /* one byte more than the limit tells a file that grew since fstat */
    char *b = malloc((size_t)GHF_JOB_MAX_BYTES + 2);
    size_t n = 0;
    int bad = b == NULL;
    while (!bad && n <= (size_t)GHF_JOB_MAX_BYTES) {
        const ssize_t k = read(fd, b + n, (size_t)GHF_JOB_MAX_BYTES + 1 - n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) bad = 1;
        if (k <= 0) break;
        n += (size_t)k;
    }
    close(fd);
    if (bad) {
        snprintf(err, errlen, "%s: cannot read the job file: %s", path, b ? strerror(errno) : "out of memory");
        free(b);
        return b ? GHF_EXIT_USAGE : GHF_EXIT_RUNTIME;
    }
    if (n > (size_t)GHF_JOB_MAX_BYTES) {
        snprintf(err, errlen, "%s: the job file has more than %d bytes (the limit, 1 MiB)", path, GHF_JOB_MAX_BYTES);
        free(b);
        return GHF_EXIT_USAGE;
    }
    b[n] = '\0';
    *text = b;
    *len = n;
    return 0;
}

static int set_str(char **dst, const char *v)
{
    free(*dst);
    *dst = strdup(v);
    return *dst ? 0 : -1;
}

/* Parse the command line, read and parse the job file, apply the overrides.
 * Returns 0, -1 for --help, or an exit status (message printed). */
static int load_job(MPI_Comm comm, int argc, char **argv, ghf_job *j)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    enum { O_DATA = 256, O_DATASET, O_OUT, O_TOL, O_MAXIT, O_STARTS, O_BACKEND, O_ACCEL, O_RPR, O_WARM, O_NOWARM,
           O_QUIET, O_LOGIT, O_CKPT, O_CKPT_EVERY, O_RESUME, O_SLICE, O_HELP };
    static const struct option opts[] = {
        {"data", required_argument, 0, O_DATA},         {"dataset", required_argument, 0, O_DATASET},
        {"out", required_argument, 0, O_OUT},           {"tol", required_argument, 0, O_TOL},
        {"max-iter", required_argument, 0, O_MAXIT},    {"starts", required_argument, 0, O_STARTS},
        {"backend", required_argument, 0, O_BACKEND},   {"accel", required_argument, 0, O_ACCEL},
        {"rows-per-rank", required_argument, 0, O_RPR}, {"warm-start", no_argument, 0, O_WARM},
        {"no-warm-start", no_argument, 0, O_NOWARM},    {"quiet", no_argument, 0, O_QUIET},
        {"log-iterations", no_argument, 0, O_LOGIT},    {"checkpoint", required_argument, 0, O_CKPT},
        {"checkpoint-every", required_argument, 0, O_CKPT_EVERY},
        {"resume", no_argument, 0, O_RESUME},           {"slice", required_argument, 0, O_SLICE},
        {"help", no_argument, 0, O_HELP},               {0, 0, 0, 0}};
    /* first pass: find the job file and --help */
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == O_HELP) return -1;
        if (c == '?' || c == ':') {
            ghf_error0("run: unknown or incomplete option '%s' (see ghfit run --help)", argv[optind - 1]);
            return GHF_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        ghf_error0("run: the job file is missing (usage: ghfit run JOB.yaml [overrides])");
        return GHF_EXIT_USAGE;
    }
    if (optind + 1 < argc) {
        ghf_error0("run: unexpected argument '%s' (one job file per run)", argv[optind + 1]);
        return GHF_EXIT_USAGE;
    }
    const char *path = argv[optind];
    /* rank 0 reads the job file and broadcasts its text; every rank parses it */
    char *text = NULL;
    size_t len = 0;
    int st = 0;
    char err[1024] = "";
    if (rank == 0) st = read_job_file(path, &text, &len, err, sizeof err);
    ghf_bcast_status(comm, &st, err, sizeof err);
    if (st) {
        ghf_error0("%s", err);
        free(text);
        return st;
    }
    int64_t n = (int64_t)len;
    MPI_Bcast(&n, 1, MPI_INT64_T, 0, comm);
    if (rank != 0) text = calloc((size_t)n + 1, 1);
    MPI_Bcast(text, (int)n, MPI_CHAR, 0, comm);
    st = ghf_job_parse(text, (size_t)n, path, j, err, sizeof err);
    free(text);
    if (st) {
        ghf_error0("%s", err);
        return st;
    }
    /* second pass: the overrides, in order */
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        double dv;
        int iv;
        int64_t lv;
        switch (c) {
        case O_DATA: set_str(&j->data_file, optarg); break;
        case O_DATASET: set_str(&j->dataset, optarg); break;
        case O_OUT: set_str(&j->out, optarg); break;
        case O_CKPT: set_str(&j->checkpoint, optarg); break;
        case O_TOL:
            if (ghf_parse_double(optarg, &dv) || dv < 0) {
                ghf_error0("--tol: '%s' is not a non-negative number", optarg);
                return GHF_EXIT_USAGE;
            }
            j->n_tol = 1;
            j->tol[0] = dv;
            break;
        case O_MAXIT:
            if (ghf_parse_int(optarg, &iv) || iv < 0) {
                ghf_error0("--max-iter: '%s' is not a non-negative integer", optarg);
                return GHF_EXIT_USAGE;
            }
            j->max_iter = iv;
            break;
        case O_STARTS:
            if (ghf_parse_int(optarg, &iv) || iv < 1 || iv > 16) {
                ghf_error0("--starts: '%s' is not an integer in 1..16", optarg);
                return GHF_EXIT_USAGE;
            }
            j->starts = iv;
            break;
        case O_BACKEND:
            if (strcmp(optarg, "auto") && strcmp(optarg, "cpu") && strcmp(optarg, "cuda")) {
                ghf_error0("--backend: unknown backend '%s' (expected auto, cpu or cuda)", optarg);
                return GHF_EXIT_USAGE;
            }
            set_str(&j->backend, optarg);
            break;
        case O_ACCEL:
            if (!strcmp(optarg, "squarem")) j->accel = 1;
            else if (!strcmp(optarg, "none")) j->accel = 0;
            else {
                ghf_error0("--accel: '%s' is not squarem or none", optarg);
                return GHF_EXIT_USAGE;
            }
            break;
        case O_RPR:
            if (ghf_parse_int64(optarg, &lv) || lv < 1) {
                ghf_error0("--rows-per-rank: '%s' is not a positive integer", optarg);
                return GHF_EXIT_USAGE;
            }
            j->rows_per_rank = lv;
            break;
        case O_WARM: j->warm_start = 1; break;
        case O_NOWARM: j->warm_start = 0; break;
        case O_QUIET: j->quiet = 1; break;
        case O_LOGIT: j->log_iterations = 1; break;
        case O_RESUME: j->resume = 1; break;
        case O_CKPT_EVERY:
            if (ghf_parse_int(optarg, &iv) || iv < 1) {
                ghf_error0("--checkpoint-every: '%s' is not a positive integer", optarg);
                return GHF_EXIT_USAGE;
            }
            j->checkpoint_every = iv;
            break;
        case O_SLICE:
            if (ghf_parse_slice(optarg, &j->slice_k, &j->slice_n)) {
                ghf_error0("--slice: '%s' is not K/N with 0 <= K < N", optarg);
                return GHF_EXIT_USAGE;
            }
            break;
        default: break;
        }
    }
    if (!j->backend) set_str(&j->backend, "auto");
    if (!j->dataset) set_str(&j->dataset, "/X");
    st = ghf_job_validate(j, err, sizeof err);
    if (st) ghf_error0("%s", err);
    return st;
}

/* ---------------------------------------------------------------------------
 * Work distribution
 * ------------------------------------------------------------------------- */

/* group_of[i] for every spec: per chain a contiguous block of its windows when
 * every chain has at least G fits, else round robin over the list. */
static void assign_groups(const ghf_fit_spec *s, int n, int G, int *group_of)
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

/* ---------------------------------------------------------------------------
 * Rank 0: the collector
 * ------------------------------------------------------------------------- */

typedef struct collector {
    MPI_Comm comm;         /* world duplicate for the point-to-point messages */
    ghf_live *live;        /* the watch on the other ranks (liveness.h) */
    int world_size;
    const ghf_job *job;
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
} collector;

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
        if (!c->warned) fprintf(stderr, "ghfit: warning: %s (the sweep goes on; retrying)\n", err);
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
static void coll_add_record(collector *c, int group, unsigned char *bytes, size_t n)
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
    if (!c->job->quiet) coll_print_fit(c, pos);
    char err[1024];
    coll_write_ckpt(c, 0, err, sizeof err);
}

static void coll_set_state(collector *c, int group, const ghf_ckpt_run *r, int stopping)
{
    if (group < 0 || group >= c->G) return;
    ghf_ckpt_run *dst = &c->running[group];
    ghf_ckpt_run_clear(dst);
    *dst = *r; /* takes over the arrays */
    char err[1024];
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
static int coll_poll(collector *c)
{
    MPI_Status ms;
    int n = 0;
    for (; ghf_live_poll(c->live, MPI_ANY_SOURCE, &ms); n++) coll_handle(c, &ms);
    ghf_live_beat_all(c->live);
    ghf_live_check(c->live);
    return n;
}

/* ---------------------------------------------------------------------------
 * A group's work
 * ------------------------------------------------------------------------- */

typedef struct group_ctx {
    MPI_Comm gcomm, pcomm; /* the group; the world duplicate for messages */
    int wrank, grank, gsize, group;
    int d;                 /* columns of the data */
    ghf_live *live;
    const ghf_job *job;
    collector *coll;       /* world rank 0 only */
    /* the fit being run (for the on_state hook) */
    const ghf_fit_spec *cur;
    int base_iter;
    int iter_sleep_ms;
    int last_iter;
} group_ctx;

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
    const int np = ghf_ckpt_param_len(r.d);
    ghf_pack_i64(&b, g->group);
    ghf_pack_i64(&b, stopping);
    ghf_pack_i64(&b, r.index);
    ghf_pack_str(&b, r.name);
    ghf_pack_str(&b, r.family);
    ghf_pack_i64(&b, r.d);
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
    deliver_record(g, s->index, &r);
    free(nan);
    free(ph);
}

static void deliver_done(group_ctx *g, int status, const char *msg)
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
} data_cache;

static void cache_drop_window(data_cache *dc)
{
    if (!dc->have) return;
    if (dc->be) dc->be->destroy(dc->be);
    dc->be = NULL;
    ghf_data_free(&dc->data);
    ghf_shard_free(&dc->shard);
    dc->have = 0;
}

static void cache_free(data_cache *dc)
{
    cache_drop_window(dc);
    if (dc->have_span) ghf_shard_free(&dc->span);
    dc->have_span = 0;
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
        ghf_read_opts ro = {j->data_file, j->dataset, s->row_start, len, 0, j->drop_nonfinite, GHF_ROW_BLOCK};
        st = ghf_h5_read_shard(g->gcomm, &ro, &dc->shard, err, errlen);
        *data_bad = st == GHF_EXIT_USAGE;
        if (st && *data_bad) { /* name the window the rows belong to */
            char tmp[1024];
            snprintf(tmp, sizeof tmp, "rows %lld..%lld: %s", (long long)s->row_start, (long long)(s->row_start + len - 1),
                     err);
            snprintf(err, errlen, "%s", tmp);
        }
        if (st) return st;
    }
    st = ghf_data_prepare(g->gcomm, &dc->shard, what, &dc->data, err, errlen);
    if (st) {
        *data_bad = st == GHF_EXIT_USAGE;
        ghf_shard_free(&dc->shard);
        return st;
    }
    dc->be = ghf_backend_create(g->gcomm, j->backend, dc->data.x, dc->data.nrows, dc->data.d, &st, err, errlen);
    if (!dc->be) {
        ghf_data_free(&dc->data);
        ghf_shard_free(&dc->shard);
        return st ? st : 1;
    }
    dc->have = 1;
    dc->start = s->row_start;
    dc->len = len;
    dc->t_load = MPI_Wtime() - t0;
    return 0;
}

/* Warm start: the previous fit's parameters in data coordinates. */
typedef struct warm {
    int valid;
    int chain;
    ghf_params t; /* mu in data coordinates */
} warm;

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

/* For each of the group's fits, where a resumed checkpoint has it: done_k[q]
 * (its record) and run_k[q] (its state), -1 where it has not.  Sorting keeps
 * this O(n log n): a resume of 100,000 finished fits is instant. */
typedef struct idx_pos {
    int64_t index;
    int k;
} idx_pos;

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

/* One-rank groups read every row their unfinished fits need at once. */
static void preload_span(group_ctx *g, data_cache *dc, const ghf_fit_spec *specs, const int *mine, int n_mine,
                         const int *done_k)
{
    const ghf_job *j = g->job;
    if (g->gsize != 1 || j->drop_nonfinite || n_mine == 0) return;
    int64_t lo = INT64_MAX, hi = 0;
    int need = 0;
    for (int q = 0; q < n_mine; q++) {
        const ghf_fit_spec *s = &specs[mine[q]];
        if (done_k[q] >= 0) continue;
        need = 1;
        if (s->row_start < lo) lo = s->row_start;
        if (s->row_start + s->row_len > hi) hi = s->row_start + s->row_len;
    }
    int64_t n0;
    int d0;
    char e2[512];
    if (!need || ghf_h5_probe(j->data_file, j->dataset, &n0, &d0, e2, sizeof e2) != 0 ||
        (double)(hi - lo) * d0 * 8.0 >= 2.0e9)
        return;
    ghf_read_opts ro = {j->data_file, j->dataset, lo, hi - lo, 0, 0, 0};
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

/* Runs the group's fits.  Returns GROUP_OK / GROUP_STOPPED / GROUP_ERROR (msg). */
static int run_group(group_ctx *g, const ghf_fit_spec *specs, const int *mine, int n_mine, const ghf_ckpt *resume,
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
        /* finished before a restart: skip, but keep its parameters for a warm start */
        const ghf_ckpt_run *rs = run_k[q] >= 0 ? &resume->run[run_k[q]] : NULL;
        const int dk = done_k[q];
        if (dk >= 0) {
            ghf_unpack u = {resume->done_blob + resume->done_off[dk],
                            (size_t)(resume->done_off[dk + 1] - resume->done_off[dk]), 0, 0};
            ghf_rec r;
            if (ghf_rec_unpack(&u, &r) == 0) {
                ghf_params t = {r.r.d, (double *)r.r.mu, (double *)r.r.gamma, (double *)r.r.sigma, r.r.p, r.r.a, r.r.b};
                warm_set(&w, s->chain, r.r.mu, &t, strncmp(r.r.status, "failed", 6) != 0);
                ghf_rec_free(&r);
            } else {
                w.valid = 0;
            }
            continue;
        }
        if (ghf_any(g->gcomm, ghf_stop_requested != 0)) {
            status = GROUP_STOPPED;
            break;
        }
        const double t0 = MPI_Wtime();
        char what[1024];
        snprintf(what, sizeof what, "%s:%s rows %lld..%lld (fit %s)", j->data_file, j->dataset,
                 (long long)s->row_start, (long long)(s->row_start + s->row_len - 1), s->name);
        int data_bad = 0;
        int st = cache_load(g, &dc, s, what, &data_bad, msg, msglen);
        if (st && data_bad) { /* this window's data: the fit fails, the others go on */
            fit_failed(g, s, msg, t0, &w);
            continue;
        }
        if (st) {
            status = GROUP_ERROR + st;
            break;
        }
        const ghf_data *data = &dc.data;
        ghf_em_opts eo;
        ghf_em_opts_defaults(&eo);
        eo.family = s->family;
        eo.max_iter = j->max_iter;
        eo.tol = s->tol;
        eo.seed = (uint64_t)s->seed;
        eo.n_starts = j->starts;
        eo.accel = j->accel;
        eo.quiet = !j->log_iterations;
        char label[80];
        snprintf(label, sizeof label, "%s: ", s->name);
        eo.label = label;
        ghf_data_em_opts(data, &eo);
        eo.stop_flag = &ghf_stop_requested;
        if (s->fix_p) {
            eo.fix_p = 1;
            eo.p_fixed = s->p;
        }
        eo.on_state = group_on_state;
        eo.on_state_ctx = g;
        g->cur = s;
        g->base_iter = -1;
        ghf_params init;
        int have_init = 0;
        ghf_em_state rstate;
        int have_rstate = 0;
        if (rs && rs->d == data->d) {
            if (ghf_ckpt_run_to_state(rs, j->max_iter, &rstate) == 0) {
                have_rstate = 1;
                eo.resume = &rstate;
            }
        } else if (j->warm_start && w.valid && w.chain == s->chain && w.t.d == data->d &&
                   ghf_params_alloc(&init, data->d) == 0) {
            ghf_data_params_to_internal(data, &w.t, &init); /* w.t is in data coordinates */
            const ghf_model m = {s->family, 0, s->fix_p, s->p};
            const double fp = ghf_model_fixed_p(&m, data->d);
            if (!isnan(fp)) init.p = fp;
            have_init = 1;
            eo.init = &init;
        }
        ghf_fit_out out;
        memset(&out, 0, sizeof out);
        snprintf(out.name, sizeof out.name, "%s", s->name);
        out.family = s->family;
        out.fix_p = s->fix_p;
        out.p_fixed = s->p;
        out.n_dropped = dc.shard.n_dropped;
        st = ghf_em_fit(g->gcomm, dc.be, data->d, &eo, &out.em, msg, msglen);
        if (have_init) ghf_params_free(&init);
        if (have_rstate) ghf_em_state_free(&rstate);
        if (st == GHF_EXIT_USAGE) { /* e.g. a warm start this window cannot use */
            ghf_fit_out_free(&out);
            fit_failed(g, s, msg, t0, &w);
            continue;
        }
        if (st) {
            char tmp[1024];
            snprintf(tmp, sizeof tmp, "fit %s: %s", s->name, msg);
            snprintf(msg, msglen, "%s", tmp);
            ghf_fit_out_free(&out);
            status = GROUP_ERROR + (st == 2 ? GHF_EXIT_USAGE : GHF_EXIT_RUNTIME);
            break;
        }
        if (out.em.outcome == GHF_EM_INTERRUPTED) {
            ghf_fit_out_free(&out);
            status = GROUP_STOPPED;
            break;
        }
        out.phases[GHF_PH_READ] = dc.t_load;
        out.phases[GHF_PH_INIT] = out.em.t_init;
        out.phases[GHF_PH_ESTEP] = out.em.t_estep;
        out.phases[GHF_PH_ALLREDUCE] = out.em.t_allreduce;
        out.phases[GHF_PH_MSTEP] = out.em.t_mstep;
        out.phases[GHF_PH_WRITE] = 0.0;
        out.phases[GHF_PH_TOTAL] = MPI_Wtime() - t0;
        if (ghf_fit_out_finish(&out, data) != 0) {
            snprintf(msg, msglen, "out of memory");
            ghf_fit_out_free(&out);
            status = GROUP_ERROR + GHF_EXIT_RUNTIME;
            break;
        }
        ghf_fit_out_gather(g->gcomm, &out);
        warm_set(&w, s->chain, out.outp.mu, &out.outp, out.em.outcome != GHF_EM_FAILED);
        if (g->grank == 0) {
            ghf_fit_record rec;
            ghf_fit_out_record(&out, dc.be->name, &rec);
            rec.device = dc.be->device;
            deliver_record(g, s->index, &rec);
        }
        ghf_fit_out_free(&out);
        group_tick(g);
    }
    ghf_params_free(&w.t);
    cache_free(&dc);
    free(done_k);
    free(run_k);
    return status;
}

/* ---------------------------------------------------------------------------
 * ghfit run
 * ------------------------------------------------------------------------- */

static void write_result(collector *c, const char *backend, int world_size, int *st, char *err, size_t errlen)
{
    const ghf_job *j = c->job;
    char *cfg = ghf_job_config_text(j);
    ghf_out_meta meta = {GHFIT_VERSION, GHFIT_GIT_COMMIT, ghf_command_line(), backend, world_size, cfg};
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
        ghf_rec_free(&r);
    }
    ghf_summary_print(stdout, rows, n, GHF_SORT_NONE);
    free(rows);
}

/* ---------------------------------------------------------------------------
 * The collector's life: start (with the finished fits of a resumed
 * checkpoint), the end of the run, and cleaning up.
 * ------------------------------------------------------------------------- */

/* a deep copy of a running fit's state (0, or -1 when out of memory) */
static int run_copy(ghf_ckpt_run *dst, const ghf_ckpt_run *src)
{
    const size_t np = (size_t)ghf_ckpt_param_len(src->d);
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

static void coll_init(collector *c, MPI_Comm comm, const ghf_job *j, const ghf_fit_spec *specs, int n_specs, int G,
                      const int *group_of, const ghf_ckpt *resume, const ghf_ckpt_id *cid)
{
    c->comm = comm;
    c->job = j;
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
static int coll_finish(collector *c, int size, double t0, char *err, size_t errlen)
{
    const ghf_job *j = c->job;
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
    if (c->n_rec == c->n_specs) {
        const char *bk = j->backend;
        ghf_unpack u = {c->rec[0], c->rec_len[0], 0, 0};
        ghf_rec r0;
        char bkbuf[16];
        if (ghf_rec_unpack(&u, &r0) == 0) {
            snprintf(bkbuf, sizeof bkbuf, "%s", r0.r.backend ? r0.r.backend : j->backend);
            bk = bkbuf;
            ghf_rec_free(&r0);
        }
        const double tw = MPI_Wtime();
        write_result(c, bk, size, &st, err, errlen);
        if (st) return st;
        const double t_end = MPI_Wtime();
        print_table(c);
        if (!j->quiet)
            printf("wrote %s (%d fits) in %.2f s: fits %.2f s, result file %.2f s\n", j->out, c->n_specs, t_end - t0,
                   tw - t0, t_end - tw);
        if (j->checkpoint) {
            ghf_ckpt_log_close(c->log);
            c->log = NULL;
            ghf_ckpt_remove(j->checkpoint);
        }
        if (c->n_failed == 0) return 0;
        ghf_unpack u1 = {c->rec[c->first_failed], c->rec_len[c->first_failed], 0, 0};
        ghf_rec r1;
        const int have = ghf_rec_unpack(&u1, &r1) == 0;
        snprintf(err, errlen, "%d of %d fits failed (their status in %s starts with 'failed:'); the first: %s: %.600s",
                 c->n_failed, c->n_specs, j->out, c->specs[c->first_failed].name,
                 !have ? "?" : strncmp(r1.r.status, "failed: ", 8) == 0 ? r1.r.status + 8 : r1.r.status);
        if (have) ghf_rec_free(&r1);
        return GHF_EXIT_SOME_FAILED;
    }
    if (!n_stop) {
        snprintf(err, errlen, "internal: %d of %d fits finished", c->n_rec, c->n_specs);
        return GHF_EXIT_RUNTIME;
    }
    if (!j->checkpoint) {
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
    snprintf(err, errlen, "stopped on a signal with %d of %d fits finished; checkpoint written to %s (rerun with --resume)",
             c->n_rec, c->n_specs, j->checkpoint);
    return GHF_EXIT_CHECKPOINT;
}

static void coll_free(collector *c)
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

int ghf_cmd_run(int argc, char **argv)
{
    MPI_Comm world = MPI_COMM_WORLD;
    int rank, size;
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &size);
    ghf_job job;
    ghf_job_defaults(&job);
    int st = load_job(world, argc, argv, &job);
    if (st < 0) {
        if (rank == 0) run_usage(stdout);
        ghf_job_free(&job);
        return GHF_EXIT_OK;
    }
    if (st) {
        ghf_job_free(&job);
        return st;
    }
    const double t0 = MPI_Wtime();
    char err[1024] = "";
    /* the data and its shape, then the outputs (rank 0, broadcast) */
    int64_t n_rows = 0;
    int d = 0;
    const ghf_io_plan plan = {job.data_file, job.dataset, 0, -1, 0, size, job.source,
                              job.out, GHF_PATH_RESULT, NULL, job.checkpoint};
    st = ghf_io_check(world, &plan, &n_rows, &d, err, sizeof err);
    if (st) {
        ghf_error0("%s", err);
        ghf_job_free(&job);
        return st;
    }
    ghf_fit_spec *specs = NULL;
    int n_specs = 0, n_total = 0;
    st = ghf_job_expand(&job, n_rows, &specs, &n_specs, &n_total, err, sizeof err);
    /* every window must be fittable: rows > d and memory (the same on every rank) */
    for (int i = 0; !st && i < n_specs; i++)
        if (i == 0 || specs[i].row_len != specs[i - 1].row_len) {
            char what[1200];
            snprintf(what, sizeof what, "%s: the window of fit %d (rows %lld + %lld of %s:%s)", job.source, i,
                     (long long)specs[i].row_start, (long long)specs[i].row_len, job.data_file, job.dataset);
            st = ghf_fit_shape_check(what, specs[i].row_len, d, size, err, sizeof err);
        }
    if (st) {
        ghf_error0("%s", err);
        free(specs);
        ghf_job_free(&job);
        return st;
    }
    /* group size from the data size */
    int64_t max_len = 0;
    for (int i = 0; i < n_specs; i++)
        if (specs[i].row_len > max_len) max_len = specs[i].row_len;
    int64_t rpg = max_len / job.rows_per_rank;
    if (rpg < 1) rpg = 1;
    if (rpg > size) rpg = size;
    int G = (int)(size / rpg);
    if (G > n_specs) G = n_specs;
    if (G < 1) G = 1;
    const int group = (int)((int64_t)rank * G / size);
    group_ctx g;
    memset(&g, 0, sizeof g);
    MPI_Comm_split(world, group, rank, &g.gcomm);
    ghf_backend_map_devices(world, g.gcomm, job.backend);
    MPI_Comm_dup(world, &g.pcomm);
    g.live = ghf_live_create(world, g.pcomm);
    g.wrank = rank;
    g.group = group;
    g.d = d;
    g.job = &job;
    g.iter_sleep_ms = ghf_ckpt_test_iter_sleep_ms();
    MPI_Comm_rank(g.gcomm, &g.grank);
    MPI_Comm_size(g.gcomm, &g.gsize);
    int *group_of = malloc((size_t)n_specs * sizeof(int));
    int *mine = malloc((size_t)n_specs * sizeof(int));
    int n_mine = 0;
    assign_groups(specs, n_specs, G, group_of);
    for (int i = 0; i < n_specs; i++)
        if (group_of[i] == group) mine[n_mine++] = i;

    /* identity, resume */
    char *cfg = ghf_job_config_text(&job);
    ghf_ckpt_id cid = {"run", job.data_file, job.dataset, n_rows, d, ghf_job_hash(&job), n_specs, cfg, 0, 0};
    ghf_ckpt resume;
    memset(&resume, 0, sizeof resume);
    int have_resume = 0;
    if (job.checkpoint) {
        st = ghf_ckpt_id_fingerprint(world, &cid, err, sizeof err);
        if (st) {
            ghf_error0("%s", err);
            goto cleanup;
        }
    }
    if (job.resume) {
        st = ghf_ckpt_load(world, job.checkpoint, &cid, &resume, err, sizeof err);
        if (st) {
            ghf_error0("%s", err);
            goto cleanup;
        }
        have_resume = 1;
    }
    collector coll;
    memset(&coll, 0, sizeof coll);
    if (rank == 0) {
        coll_init(&coll, g.pcomm, &job, specs, n_specs, G, group_of, have_resume ? &resume : NULL, &cid);
        coll.live = g.live;
        coll.world_size = size;
        for (int k = 1; k < G; k++) ghf_live_expect(g.live, (int)(((int64_t)k * size + G - 1) / G), 1); /* leaders */
        g.coll = &coll;
        if (!job.quiet)
            printf("ghfit %s: run %s: %d fit%s (of %d) of %s:%s (%lld x %d) on %d rank%s: %d group%s of %d%s rank%s\n",
                   GHFIT_VERSION, job.source, n_specs, n_specs == 1 ? "" : "s", n_total, job.data_file, job.dataset,
                   (long long)n_rows, d, size, size == 1 ? "" : "s", G, G == 1 ? "" : "s", size / G,
                   size % G ? "+" : "", size / G == 1 && size % G == 0 ? "" : "s");
        if (have_resume && !job.quiet)
            printf("resuming from %s: %d fit%s finished, %d in progress\n", job.checkpoint, coll.n_rec,
                   coll.n_rec == 1 ? "" : "s", resume.n_run);
        fflush(stdout);
    }

    char msg[1024] = "";
    const int gst = run_group(&g, specs, mine, n_mine, have_resume ? &resume : NULL, msg, sizeof msg);
    if (g.grank == 0) deliver_done(&g, gst, msg);

    /* rank 0: wait for every group, then write the result or the checkpoint */
    st = 0;
    if (rank == 0) {
        for (int k = 0; coll.n_groups_done < G;) {
            if (coll_poll(&coll) > 0) k = 0;
            else ghf_live_nap(&k);
        }
        st = coll_finish(&coll, size, t0, err, sizeof err);
        fflush(stdout);
    }
    final_handshake(&g, size);
    ghf_bcast_status(world, &st, err, sizeof err);
    if (st == GHF_EXIT_CHECKPOINT) ghf_note0("%s", err); /* a planned stop */
    else if (st) ghf_error0("%s", err);

    if (rank == 0) coll_free(&coll);
cleanup:
    if (have_resume) ghf_ckpt_free(&resume);
    free(cfg);
    free(group_of);
    free(mine);
    free(specs);
    ghf_live_free(g.live);
    MPI_Comm_free(&g.gcomm);
    MPI_Comm_free(&g.pcomm);
    ghf_job_free(&job);
    return st;
}

/* ---------------------------------------------------------------------------
 * ghfit summary
 * ------------------------------------------------------------------------- */

int ghf_cmd_summary(int argc, char **argv)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ghf_sort_key key = GHF_SORT_AIC;
    static const struct option opts[] = {{"sort", required_argument, 0, 's'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'h') {
            if (rank == 0)
                printf("usage: ghfit summary RESULT.h5... [--sort aic|bic|loglik|name]\n"
                       "  prints the /summary tables of the result files as one table, sorted by the\n"
                       "  chosen column (default aic; loglik sorts the largest first), with the difference\n"
                       "  to the best fit (dAIC, dBIC, dloglik)\n");
            return GHF_EXIT_OK;
        }
        if (c == 's') {
            if (ghf_sort_key_parse(optarg, &key) != 0) {
                ghf_error0("--sort: '%s' is not aic, bic, loglik or name", optarg);
                return GHF_EXIT_USAGE;
            }
            continue;
        }
        ghf_error0("summary: unknown or incomplete option '%s' (see ghfit summary --help)", argv[optind - 1]);
        return GHF_EXIT_USAGE;
    }
    if (optind >= argc) {
        ghf_error0("summary: no result files given (usage: ghfit summary RESULT.h5... [--sort aic|bic|loglik|name])");
        return GHF_EXIT_USAGE;
    }
    /* serial work on rank 0; the others wait for the status */
    int st = 0;
    char err[1024] = "";
    if (rank == 0) {
        ghf_summary_row *all = NULL;
        int n_all = 0;
        for (int i = optind; i < argc && !st; i++) {
            ghf_fit_summary *rows = NULL;
            int n = 0;
            st = ghf_h5_read_fit_summary(argv[i], &rows, &n, err, sizeof err);
            if (st) break;
            ghf_summary_row *na = realloc(all, (size_t)(n_all + n + 1) * sizeof *all);
            if (!na) {
                free(rows);
                st = GHF_EXIT_RUNTIME;
                snprintf(err, sizeof err, "out of memory");
                break;
            }
            all = na;
            for (int k = 0; k < n; k++) {
                all[n_all].s = rows[k];
                all[n_all].file = argv[i];
                n_all++;
            }
            free(rows);
        }
        if (!st) ghf_summary_print(stdout, all, n_all, key);
        free(all);
    }
    ghf_bcast_status(MPI_COMM_WORLD, &st, err, sizeof err);
    if (st) ghf_error0("%s", err);
    return st;
}
