/* liveness.h - `ghfit run`: the point-to-point traffic between the groups'
 * leaders and the collector (world rank 0) never waits forever on a rank
 * that has died or hangs.
 *
 * Launchers normally end a job when one of its processes dies (mpirun does,
 * srun with --kill-on-bad-exit); where one does not, a blocking MPI_Probe or
 * MPI_Send on a dead peer would wait forever.  So every wait here is an
 * MPI_Test/MPI_Iprobe loop that, a few times a second, checks
 *   - the ranks on this node: by pid and start time in /proc (a dead rank
 *     is noticed at once, a SIGKILL included);
 *   - the peer it waits on: silent for longer than the timeout (rank 0 and
 *     the group leaders send each other a heartbeat every second or so while
 *     they work), which covers ranks on other nodes and hung ones.
 * A dead or silent peer ends the job: one "ghfit: error:" line, a notice to
 * the other ranks (so that they do not report the abort as one more death)
 * and MPI_Abort (exit status 1).  Errors of the point-to-point communicator are
 * returned (MPI_ERRORS_RETURN) and end the job the same way.
 *
 * GHFIT_PEER_TIMEOUT=S sets the silence allowed (seconds, default 600: a
 * group can work that long between two heartbeats on a huge window). */
#ifndef GHF_LIVENESS_H
#define GHF_LIVENESS_H

#include <mpi.h>

typedef struct ghf_live ghf_live;

/* Collective over world: every rank's node, pid and start time.  comm is
 * the point-to-point communicator (a duplicate of world): its errors are
 * returned from now on; heartbeats use the tag GHF_LIVE_TAG on it. */
#define GHF_LIVE_TAG 199
#define GHF_LIVE_TAG_END 198 /* "I am ending the job": the others stay quiet about it */
ghf_live *ghf_live_create(MPI_Comm world, MPI_Comm comm);
void      ghf_live_free(ghf_live *l);

/* Expect messages from rank r (1) or no more (0): only expected peers can be
 * silent for too long.  Silence is counted from the last message received
 * (every wait below receives the heartbeats that arrived before it checks). */
void ghf_live_expect(ghf_live *l, int r, int on);
/* Send a heartbeat to rank dest if the last one is older than a second. */
void ghf_live_beat(ghf_live *l, int dest);
/* The same to every other rank (rank 0, while it works; at most once a second). */
void ghf_live_beat_all(ghf_live *l);
/* Receive the heartbeats that arrived from src (MPI_ANY_SOURCE allowed). */
void ghf_live_drain(ghf_live *l, int src);
/* Rate-limited checks (see above); never returns if a peer is dead. */
void ghf_live_check(ghf_live *l);
/* Abort the job if an MPI call on the point-to-point communicator failed. */
void ghf_live_mpi(ghf_live *l, int rc, const char *what);

/* Is a message other than a heartbeat waiting (from src, any tag)?  1 with
 * its status, else 0; heartbeats are received on the way. */
int  ghf_live_poll(ghf_live *l, int src, MPI_Status *st);
/* Wait (with the checks) for a request to complete, receiving heartbeats from peer. */
void ghf_live_wait(ghf_live *l, MPI_Request *req, int from);
/* Wait (with the checks) for a message other than a heartbeat from src. */
void ghf_live_probe(ghf_live *l, int src, MPI_Status *st);
/* A pause between two polls that grows while nothing happens (k counts the
 * polls without news; set it to 0 when something happened): 50 us for the
 * first 100, 1 ms for the next 1000, then 10 ms.  A spinning rank would take
 * the core from a working one where ranks share cores. */
void ghf_live_nap(int *k);
/* Complete the heartbeats still in flight (before the communicator is freed). */
void ghf_live_flush(ghf_live *l);

#endif
