/* resume.h - checkpoint and restart logic of the fit pipeline (`ghfit fit` and `ghfit run`)
 * (the file format is io/h5ckpt.h).
 *
 * Rank 0 writes (the EM state is identical on every rank of a fit); a
 * resume is validated on rank 0 against the run's identity (kind, data file,
 * dataset, N, d, options hash) and broadcast to every rank.  Resuming with
 * the same ranks and backend reproduces the uninterrupted run bitwise. */
#ifndef GHF_CHECKPOINT_H
#define GHF_CHECKPOINT_H

#include <mpi.h>
#include <stdint.h>

#include "h5ckpt.h"
#include "em.h"

/* Parameters <-> the packed form of io/h5ckpt.h (mu, gamma, sigma, p, a, b). */
void ghf_params_pack(const ghf_params *t, double *buf);
void ghf_params_unpack(const double *buf, ghf_params *t);

/* Fill r (allocating) from an EM state. 0 or -1 (out of memory). */
int ghf_ckpt_run_set(ghf_ckpt_run *r, int64_t index, const char *name, const ghf_em_state *st);
void ghf_ckpt_run_clear(ghf_ckpt_run *r);
/* Allocate st (room for max_iter iterations) and fill it from r. 0 or -1. */
int ghf_ckpt_run_to_state(const ghf_ckpt_run *r, int max_iter, ghf_em_state *st);

/* Identity of a run: what a checkpoint must match to be resumed. */
typedef struct ghf_ckpt_id {
    const char *kind;      /* "fit" or "run" */
    const char *data_path; /* as given; compared after realpath() */
    const char *dataset;
    int64_t n_rows;        /* rows of the data set (the file's N) */
    int d;
    uint64_t hash;
    int64_t n_fits;
    const char *config_text;
    uint64_t data_fp;      /* fingerprint of the data (rank 0; ghf_ckpt_id_fingerprint), 0: none */
    int64_t data_fp_rows;
    uint64_t data_sum;     /* checksum of every value of the data (rank 0; ghf_ckpt_id_fingerprint), 0: none */
    const char *weights;   /* "FILE:DATASET" of --weights, NULL: none */
    uint64_t weights_sum;  /* checksum of every weight (rank 0), 0: none */
} ghf_ckpt_id;

/* Fill the identity fields of c (copies). */
int ghf_ckpt_set_id(ghf_ckpt *c, const ghf_ckpt_id *id);

/* Collective: rank 0 fingerprints the data of id (io/h5ckpt.h) into
 * id->data_fp (64 sampled rows: the check's quick look), and every rank
 * checksums its block of all the rows (and of id->weights), combined on
 * rank 0 into id->data_sum (id->weights_sum): any change of any value
 * changes it (crc32 + adler32 of every stored byte), whatever the rank
 * count.  One read of the data set per start with a checkpoint.  0, or 2
 * with a message on every rank. */
int ghf_ckpt_id_fingerprint(MPI_Comm comm, ghf_ckpt_id *id, char *err, size_t errlen);

/* Collective over comm: rank 0 reads the checkpoint (falling back to the
 * "_prev" file with a warning when the main one is missing, damaged - its
 * checksum or its log - or holds invalid parameters), checks it against id
 * (a fingerprint of the data included), and broadcasts it.  Returns 0, or 2
 * with a message naming the file (and the field, for invalid parameters). */
int ghf_ckpt_load(MPI_Comm comm, const char *path, const ghf_ckpt_id *id, ghf_ckpt *c, char *err, size_t errlen);

/* Rank 0's part of ghf_ckpt_load, on its own (serial, no MPI; `ghfit
 * check`): the same reading, fallback to "_prev" (with the same warning)
 * and checks.  0 with *c filled (ghf_ckpt_free it), or 2 with a message. */
int ghf_ckpt_load_local(const char *path, const ghf_ckpt_id *id, ghf_ckpt *c, char *err, size_t errlen);

/* Remove the checkpoint, its "_prev", its log and a temporary file left by a
 * killed writer (after the result file is written; the log and the
 * temporary file only when they carry ghfit's signature). */
void ghf_ckpt_remove(const char *path);

/* GHFIT_TEST_ITER_SLEEP=MS: a test hook that slows every EM iteration down
 * (so that a test can signal a run mid-fit).  0 when unset. */
int  ghf_ckpt_test_iter_sleep_ms(void);
void ghf_sleep_ms(int ms);

#endif
