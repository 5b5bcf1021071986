/* liveness.c - see liveness.h */
#include "liveness.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BEAT_S 1.0   /* seconds between heartbeats */
#define CHECK_S 0.2  /* seconds between checks */

typedef struct peer {
    char host[64];
    long pid;
    unsigned long long start; /* start time (clock ticks after boot, /proc/PID/stat field 22) */
} peer;

struct ghf_live {
    MPI_Comm comm;
    int rank, size;
    peer *peers;     /* [size] */
    char *local;     /* [size] 1: on this node and visible in /proc */
    double *heard;   /* [size] MPI_Wtime of the last message */
    char *expect;    /* [size] */
    double *sent;    /* [size] last heartbeat sent */
    MPI_Request *beat; /* [size] the heartbeat in flight to each rank */
    double timeout, last_check, last_beat_all;
};

/* state and start time of a process; 0, or -1 if there is none */
static int proc_stat(long pid, char *state, unsigned long long *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (!p || sscanf(p + 2, "%c", state) != 1) return -1;
    /* field 3 is the state; the start time is field 22 */
    const char *q = p + 2;
    for (int field = 3; field < 22 && q; field++) {
        q = strchr(q, ' ');
        if (q) q++;
    }
    if (!q || sscanf(q, "%llu", start) != 1) return -1;
    return 0;
}

/* End the job: one line, unless another rank has already begun to (its
 * notice came first: then the death seen here is its abort, no news); the
 * notice to every other rank; MPI_Abort. */
static void end_job(ghf_live *l, const char *msg)
{
    int flag = 0;
    MPI_Status st;
    /* Poll for a while: the notice of a peer that ended the job may still be
     * on its way (a rank resumed after SIGSTOP sees its peer gone at once,
     * before one probe has drained the transport). */
    const double until = MPI_Wtime() + 0.2;
    do {
        MPI_Iprobe(MPI_ANY_SOURCE, GHF_LIVE_TAG_END, l->comm, &flag, &st);
        if (!flag) {
            struct timespec ts = {0, 2000000L};
            nanosleep(&ts, NULL);
        }
    } while (!flag && MPI_Wtime() < until);
    if (!flag) {
        fflush(stdout);
        fprintf(stderr, "ghfit: error: %s; ending the job\n", msg);
        fflush(stderr);
        static const char byte = 0;
        for (int r = 0; r < l->size; r++) {
            MPI_Request q;
            if (r != l->rank && MPI_Isend(&byte, 1, MPI_BYTE, r, GHF_LIVE_TAG_END, l->comm, &q) == MPI_SUCCESS)
                MPI_Request_free(&q);
        }
        struct timespec ts = {0, 20000000L}; /* 20 ms for the notices to leave */
        nanosleep(&ts, NULL);
    }
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1); /* MPI_Abort does not return */
}

static void dead(ghf_live *l, int r, const char *why)
{
    char msg[512];
    snprintf(msg, sizeof msg, "world rank %d (pid %ld on %s) %s", r, l->peers[r].pid, l->peers[r].host, why);
    end_job(l, msg);
}

void ghf_live_mpi(ghf_live *l, int rc, const char *what)
{
    if (rc == MPI_SUCCESS) return;
    char s[MPI_MAX_ERROR_STRING] = "", msg[MPI_MAX_ERROR_STRING + 256];
    int n = 0;
    MPI_Error_string(rc, s, &n);
    snprintf(msg, sizeof msg, "world rank %d: %s failed (%s)", l->rank, what, s);
    end_job(l, msg);
}

static void *need(void *p)
{
    if (p) return p;
    fprintf(stderr, "ghfit: error: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

ghf_live *ghf_live_create(MPI_Comm world, MPI_Comm comm)
{
    ghf_live *l = need(calloc(1, sizeof *l));
    MPI_Comm_rank(world, &l->rank);
    MPI_Comm_size(world, &l->size);
    const int size = l->size;
    peer me;
    memset(&me, 0, sizeof me);
    gethostname(me.host, sizeof me.host - 1);
    me.pid = (long)getpid();
    char st;
    if (proc_stat(me.pid, &st, &me.start) != 0) me.start = 0;
    l->peers = need(malloc((size_t)size * sizeof *l->peers));
    MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, l->peers, (int)sizeof me, MPI_BYTE, world);
    l->comm = comm;
    l->local = need(calloc((size_t)size, 1));
    l->expect = need(calloc((size_t)size, 1));
    l->heard = need(calloc((size_t)size, sizeof(double)));
    l->sent = need(calloc((size_t)size, sizeof(double)));
    l->beat = need(malloc((size_t)size * sizeof(MPI_Request)));
    const char *e = getenv("GHFIT_PEER_TIMEOUT");
    l->timeout = e && atof(e) > 0 ? atof(e) : 600.0;
    l->last_beat_all = -1e300;
    const double now = MPI_Wtime();
    for (int r = 0; r < size; r++) {
        const peer *p = &l->peers[r];
        l->beat[r] = MPI_REQUEST_NULL;
        l->heard[r] = now;
        l->sent[r] = -1e300;
        unsigned long long s0;
        /* a rank on this node whose process this one can see (same pid namespace) */
        l->local[r] = r != l->rank && p->start != 0 && strcmp(p->host, me.host) == 0 && proc_stat(p->pid, &st, &s0) == 0 &&
                      s0 == p->start;
    }
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    return l;
}

void ghf_live_free(ghf_live *l)
{
    if (!l) return;
    free(l->peers);
    free(l->local);
    free(l->expect);
    free(l->heard);
    free(l->sent);
    free(l->beat);
    free(l);
}

void ghf_live_expect(ghf_live *l, int r, int on)
{
    if (r < 0 || r >= l->size) return;
    if (on && !l->expect[r]) l->heard[r] = MPI_Wtime();
    l->expect[r] = (char)(on != 0);
}

void ghf_live_check(ghf_live *l)
{
    const double now = MPI_Wtime();
    if (now - l->last_check < CHECK_S) return;
    l->last_check = now;
    for (int r = 0; r < l->size; r++) {
        if (l->local[r]) {
            char st = '?';
            unsigned long long s0 = 0;
            if (proc_stat(l->peers[r].pid, &st, &s0) != 0 || s0 != l->peers[r].start || st == 'Z' || st == 'X')
                dead(l, r, "has died");
        }
        if (l->expect[r] && now - l->heard[r] > l->timeout) {
            char why[128];
            snprintf(why, sizeof why, "has sent nothing for %.0f s: it died or hangs (GHFIT_PEER_TIMEOUT)", l->timeout);
            dead(l, r, why);
        }
    }
}

void ghf_live_beat(ghf_live *l, int dest)
{
    if (dest == l->rank) return;
    const double now = MPI_Wtime();
    if (now - l->sent[dest] < BEAT_S) return;
    int done = 1;
    if (l->beat[dest] != MPI_REQUEST_NULL)
        ghf_live_mpi(l, MPI_Test(&l->beat[dest], &done, MPI_STATUS_IGNORE), "a heartbeat");
    if (!done) return; /* the last one is still on its way */
    static const char byte = 0;
    ghf_live_mpi(l, MPI_Isend(&byte, 1, MPI_BYTE, dest, GHF_LIVE_TAG, l->comm, &l->beat[dest]), "a heartbeat");
    l->sent[dest] = now;
}

void ghf_live_beat_all(ghf_live *l)
{
    const double now = MPI_Wtime();
    if (now - l->last_beat_all < BEAT_S) return;
    l->last_beat_all = now;
    for (int r = 0; r < l->size; r++) ghf_live_beat(l, r);
}

static void recv_beat(ghf_live *l, const MPI_Status *st)
{
    char byte;
    ghf_live_mpi(l, MPI_Recv(&byte, 1, MPI_BYTE, st->MPI_SOURCE, GHF_LIVE_TAG, l->comm, MPI_STATUS_IGNORE),
                 "a heartbeat");
    l->heard[st->MPI_SOURCE] = MPI_Wtime();
}

void ghf_live_drain(ghf_live *l, int src)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        ghf_live_mpi(l, MPI_Iprobe(src, GHF_LIVE_TAG, l->comm, &flag, &st), "a heartbeat");
        if (!flag) return;
        recv_beat(l, &st);
    }
}

int ghf_live_poll(ghf_live *l, int src, MPI_Status *st)
{
    for (;;) {
        int flag = 0;
        ghf_live_mpi(l, MPI_Iprobe(src, MPI_ANY_TAG, l->comm, &flag, st), "waiting for a message");
        if (!flag) return 0;
        if (st->MPI_TAG == GHF_LIVE_TAG_END) end_job(l, ""); /* another rank ends the job and said so */
        if (st->MPI_TAG != GHF_LIVE_TAG) {
            l->heard[st->MPI_SOURCE] = MPI_Wtime();
            return 1;
        }
        recv_beat(l, st);
    }
}

void ghf_live_nap(int *k)
{
    const long us = *k < 100 ? 50 : *k < 1100 ? 1000 : 10000;
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
    (*k)++;
}

void ghf_live_wait(ghf_live *l, MPI_Request *req, int from)
{
    for (int k = 0;; ghf_live_nap(&k)) {
        int done = 0;
        ghf_live_mpi(l, MPI_Test(req, &done, MPI_STATUS_IGNORE), "a message");
        if (done) return;
        if (from >= 0) ghf_live_drain(l, from);
        ghf_live_check(l);
    }
}

void ghf_live_probe(ghf_live *l, int src, MPI_Status *st)
{
    for (int k = 0;; ghf_live_nap(&k)) {
        if (ghf_live_poll(l, src, st)) return;
        ghf_live_check(l);
    }
}

void ghf_live_flush(ghf_live *l)
{
    for (int r = 0; r < l->size; r++)
        if (l->beat[r] != MPI_REQUEST_NULL) ghf_live_wait(l, &l->beat[r], -1);
}
