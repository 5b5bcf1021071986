/* devmap.h - which GPU each rank uses, from the node-local layout of all ranks and the groups they fit in.
 *
 * A run's ranks are split into groups, each fitting on its own communicator
 * (one group for `ghfit fit`; one or more in a sweep).  On every node:
 *   - the ranks of a group with more than one rank on the node get distinct
 *     GPUs (NCCL refuses two ranks of one communicator on one device);
 *   - groups are spread over all GPUs of the node: each rank goes to the
 *     least-loaded GPU that its group does not use yet (ties: the lowest
 *     index), the multi-rank groups first, so one-rank groups fill the rest
 *     and share a GPU only when there are more ranks than GPUs.
 * The assignment depends on its inputs only (no GPU needed: tests/test_devmap.c). */
#ifndef GHF_DEVMAP_H
#define GHF_DEVMAP_H

#include <mpi.h>
#include <stddef.h>

/* nloc ranks of one node, in node order; group[i]: the group of local rank
 * i (any integers, equal for the ranks of one group); ngpu >= 1 GPUs.  Fills
 * dev[i] in 0 .. ngpu-1.  Returns 0, or 1 if some group has more ranks on
 * the node than there are GPUs (those ranks then share GPUs, spread as
 * evenly as possible; their group must reduce through the host). */
int ghf_devmap_assign(int nloc, const int *group, int ngpu, int *dev);

/* Collective over world (every rank, once, after the split into groups):
 * this rank's device by ghf_devmap_assign on its node, with ngpu the
 * smallest GPU count any rank of the node sees.  *shared: 1 if this rank's
 * group shares a GPU between two of its ranks on some node.  On world rank 0
 * note gets one line saying what was chosen (nodes, GPUs, groups, the ranks
 * per GPU).  Returns 0, or 1 if MPI failed (dev = 0). */
int ghf_devmap_collective(MPI_Comm world, MPI_Comm group, int ngpu, int *dev, int *shared, char *note,
                          size_t notelen);

#endif
