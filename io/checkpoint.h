/* checkpoint.h - the HDF5 side of ghfit's checkpoints (rank 0 only, serial
 * driver).  The logic (when to write, what to resume) is in src/checkpoint.c.
 *
 * A checkpoint holds the identity of the run (kind, data file + dataset,
 * N, d, a hash of the result-determining options, the configuration text),
 * the EM state of every unfinished fit (iteration k, theta_k, theta_{k-1}
 * and the log-likelihood trace of theta_0..theta_{k-1}), and for sweeps the
 * finished fits as opaque serialised records (src/sweep.h).
 *
 * Layout:
 *   /                attributes format ("ghfit-checkpoint"), format_version (1),
 *                    kind ("fit"|"run"), data_file, dataset, n_rows, dim,
 *                    options_hash (hex string), n_fits, created
 *   /config          string dataset (optional)
 *   /running/<k>/    attributes index, name, iter; datasets cur, prev
 *                    (packed mu[d] gamma[d] sigma[d*d] p a b), trace [iter]
 *   /done/index      i64 [n_done]   fit indices
 *   /done/offsets    i64 [n_done+1] byte offsets into /done/records
 *   /done/records    u8  [bytes]    serialised records
 *
 * Writing is atomic: "<path>.tmp.<pid>" is created exclusively, written,
 * closed and fsync'ed; the current checkpoint (if any) is hard-linked to the
 * "_prev" name (ghf_ckpt_prev_path), then the temporary file is renamed onto
 * <path> and the directory fsync'ed.  At every instant <path> is a complete
 * checkpoint (old or new), and "_prev" the one before it.  Only files that
 * carry the checkpoint signature (root attribute format) are replaced,
 * moved or removed (ghf_path_is_ghfit). 
 *
 * Test hook: GHFIT_TEST_CKPT_SLEEP=S[@N] sleeps S seconds between writing the
 * temporary file and the rename (only on the N-th write of the process when
 * @N is given), printing "ghfit: checkpoint: test sleep" to stderr first. */
#ifndef GHF_CHECKPOINT_IO_H
#define GHF_CHECKPOINT_IO_H

#include <stddef.h>
#include <stdint.h>

#define GHF_CKPT_FORMAT_VERSION 1

/* The EM state of an unfinished fit. */
typedef struct ghf_ckpt_run {
    int64_t index;
    char name[64];
    int d;
    int iter;
    double *cur, *prev; /* [2d + d*d + 3] each */
    double *trace;      /* [iter] */
} ghf_ckpt_run;

typedef struct ghf_ckpt {
    char kind[16];       /* "fit" or "run" */
    char *data_path, *dataset;
    int64_t n_rows;
    int d;
    uint64_t hash;
    int64_t n_fits;      /* fits of the run (after slicing) */
    char *config_text;   /* may be NULL */
    int n_run;
    ghf_ckpt_run *run;
    int n_done;
    int64_t *done_index; /* [n_done] */
    int64_t *done_off;   /* [n_done + 1] */
    unsigned char *done_blob;
} ghf_ckpt;

/* Packed length of one parameter set. */
static inline int ghf_ckpt_param_len(int d) { return 2 * d + d * d + 3; }

/* "<stem>_prev<.ext>" for "<stem>.<ext>", else "<path>_prev". */
void ghf_ckpt_prev_path(const char *path, char *buf, size_t len);

/* 0, or 1 (I/O error) with a message. */
int  ghf_ckpt_write(const char *path, const ghf_ckpt *c, char *err, size_t errlen);
/* 0, 2 if the file is missing, not a ghfit checkpoint or damaged (message). */
int  ghf_ckpt_read(const char *path, ghf_ckpt *c, char *err, size_t errlen);
void ghf_ckpt_free(ghf_ckpt *c);

#endif
