/* agree.h - collective discipline: every local step that can fail
 * (allocation, device, file) is agreed across the ranks of a communicator
 * before the next collective call, so that no rank waits in a collective
 * the others never enter.
 *
 * The pattern, on every rank:
 *
 *     int st = local_step(..., msg, sizeof msg);      (0 or an exit status)
 *     st = ghf_agree(comm, st, msg, sizeof msg);      (the same on every rank)
 *     if (st) return st;                               (every rank leaves)
 *
 * ghf_agree is itself one collective (two when a rank failed), entered by
 * every rank whatever its local outcome.  The test hook GHFIT_TEST_FAIL
 * (ghf_test_fail) makes a chosen rank fail at a named step. */
#ifndef GHF_AGREE_H
#define GHF_AGREE_H

#include <mpi.h>
#include <stddef.h>

/* Collective: the worst (largest) local status of the ranks; when it is
 * nonzero, msg on every rank holds the message of the lowest-numbered rank
 * with that status.  msg may be NULL (then len is ignored). */
int ghf_agree(MPI_Comm comm, int status, char *msg, size_t len);

/* Collective: 1 if any rank passes nonzero. */
int ghf_any(MPI_Comm comm, int flag);

/* Collective: rank 0's (status, message) to every rank. */
void ghf_bcast_status(MPI_Comm comm, int *status, char *msg, size_t len);

/* Test hook: GHFIT_TEST_FAIL=STEP@RANK (RANK of MPI_COMM_WORLD; several
 * comma-separated) makes that rank's step fail.  Returns 1 when `step`
 * should fail on this rank, with a message naming the injected failure. */
int ghf_test_fail(const char *step, char *msg, size_t len);

#endif
