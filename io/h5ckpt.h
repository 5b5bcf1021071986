/* h5ckpt.h - the file side of ghfit's checkpoints (rank 0 only, serial
 * HDF5 on a memory image).  The logic (when to write, what to resume) is in
 * src/resume/resume.c.
 *
 * A checkpoint holds the identity of the run (kind, data file + dataset,
 * N, d, a fingerprint of the data, a hash of the result-determining options,
 * the configuration text), the EM state of every unfinished fit (iteration
 * k, theta_k, theta_{k-1} and the log-likelihood trace of
 * theta_0..theta_{k-1}), and the finished fits of a sweep as opaque
 * serialised records (src/pipeline/record.h).
 *
 * Layout of <path> (format 2):
 *   bytes 0..511     user block: "GHFITCKP", u32 1, u32 crc32 of bytes
 *                    512.. (zlib), u64 file size (little endian); the
 *                    signature and the checksum of everything after it
 *   /                attributes format ("ghfit-checkpoint"), format_version (2),
 *                    kind ("fit"|"run"), data_file, dataset, n_rows, dim,
 *                    data_fingerprint (hex), data_fingerprint_rows,
 *                    options_hash (hex string), n_fits, created; sweeps add
 *                    done_log (file name), done_bytes, done_crc, done_count
 *   /config          string dataset (optional)
 *   /running/<k>/    attributes index, name, iter; datasets cur, prev
 *                    (packed mu[d] gamma[d] sigma[d*d] p a b), trace [iter]
 *   /done/index      i64 [n_done]   fit indices       } only without a log
 *   /done/offsets    i64 [n_done+1] byte offsets      } (ghfit fit, tests)
 *   /done/records    u8  [bytes]    serialised records }
 *
 * The finished fits of a sweep go to an append-only log beside it,
 * "<path>.done": a 32-byte header ("GHFITLOG", u32 1, u32 0, u64 options
 * hash, 8 zero bytes) and one entry per fit (i64 index, i64 length, the
 * record).  Each checkpoint names the log and the length and crc32 of the
 * prefix it covers; a resume reads that prefix only (what follows it is cut
 * off and written again), so appending never invalidates an older
 * checkpoint, and the cost of a write is the new records, not all of them.
 *
 * Writing is atomic: the file is built in memory (HDF5 core driver) and
 * written to "<path>.tmp" (created exclusively; a stale one is replaced only
 * if it carries the checkpoint signature) with write() and fsync(), so a
 * full disk is one error and leaves nothing behind; the current checkpoint (if any) is
 * hard-linked to the "_prev" name (ghf_ckpt_prev_path), then the temporary
 * file is renamed onto <path> and the directory fsync'ed.  At every instant
 * <path> is a complete checkpoint (old or new), and "_prev" the one before.
 * The log is fsync'ed before a checkpoint that refers to it is written.
 *
 * Test hook: GHFIT_TEST_CKPT_SLEEP=S[@N] sleeps S seconds between writing the
 * temporary file and the rename (only on the N-th write of the process when
 * @N is given), printing "ghfit: checkpoint: test sleep" to stderr first. */
#ifndef GHF_CHECKPOINT_IO_H
#define GHF_CHECKPOINT_IO_H

#include <stddef.h>
#include <stdint.h>

#define GHF_CKPT_FORMAT_VERSION 2

/* The EM state of an unfinished fit. */
typedef struct ghf_ckpt_run {
    int64_t index;
    char name[64];
    char family[16]; /* the family's name ("" in files without it: any GIG law) */
    int d;
    int iter;
    /* the dispersion's form (ghf_params.disp: 0 full, 1 diag, 2 factor) and
     * its factors; files without the attributes hold full-form fits */
    int disp, nf;
    double *cur, *prev; /* [ghf_ckpt_run_len] each: mu, gamma, sigma [d*d] (full)
                           or B [d*nf] and D [d] (diag, factor), then p, a, b */
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
    uint64_t data_fp;    /* fingerprint of the data (ghf_ckpt_data_fingerprint), 0: none */
    int64_t data_fp_rows;
    uint64_t data_sum;   /* checksum of every value of the data (ghf_ckpt_rows_checksum), 0: none (older files) */
    uint64_t weights_sum;/* the same of the --weights dataset, 0: none */
    /* the log of finished fits (sweeps).  Writing: log_name set -> the done_*
     * arrays are not written, the log's prefix is referred to instead; reading:
     * the done_* arrays are filled from the log. */
    char *log_name;      /* file name (no directory: it lies beside the checkpoint) */
    int64_t log_bytes, log_count;
    uint32_t log_crc;
} ghf_ckpt;

/* Packed length of one parameter set. */
static inline int ghf_ckpt_param_len(int d) { return 2 * d + d * d + 3; }
/* ... of a fit of the given form (disp 0: full) */
static inline int ghf_ckpt_run_len(int d, int disp, int nf) { return disp ? 3 * d + d * nf + 3 : ghf_ckpt_param_len(d); }

/* "<stem>_prev<.ext>" for "<stem>.<ext>", else "<path>_prev". */
void ghf_ckpt_prev_path(const char *path, char *buf, size_t len);

/* "<path>.done": the log of finished fits beside checkpoint path. */
void ghf_ckpt_log_path(const char *path, char *buf, size_t len);

/* 0, or 1 (I/O error, e.g. a full disk) with a message; nothing is left behind. */
int  ghf_ckpt_write(const char *path, const ghf_ckpt *c, char *err, size_t errlen);
/* 0, 2 if the file is missing, not a ghfit checkpoint, damaged (checksum,
 * size) or its log is (message). */
int  ghf_ckpt_read(const char *path, ghf_ckpt *c, char *err, size_t errlen);
void ghf_ckpt_free(ghf_ckpt *c);
/* 1 if path is a regular file that starts with a checkpoint's (or, for
 * ghf_ckpt_log_is_ours, a log's) signature: files ghfit may replace or remove. */
int  ghf_ckpt_is_ours(const char *path);
int  ghf_ckpt_log_is_ours(const char *path);

/* A fingerprint of the data: crc32 and adler32 (zlib) of up to 64 rows spread
 * evenly over the whole dataset (the first and the last included), read as
 * doubles.  It depends on the values only (not on the rank count, the
 * window or the file layout).  0, or 2 with a message. */
int  ghf_ckpt_data_fingerprint(const char *path, const char *dataset, uint64_t *fp, int64_t *rows, char *err,
                               size_t errlen);

/* Rank `rank` of `size`'s part of a checksum of every value of a dataset
 * (2-D, or 1-D for weights): crc32 and adler32 (zlib) of the bytes of its
 * block of rows (ghf_block_range) as stored (the file's own type, native
 * byte order), read in pieces of about 4 MiB; *nbytes their number.  The
 * blocks of all ranks combine in rank order (crc32_combine,
 * adler32_combine: ghf_ckpt_checksum_combine) into the checksum of the
 * whole dataset, the same for any rank count.  Serial HDF5, no MPI.  0, or
 * 2 with a message. */
int  ghf_ckpt_rows_checksum(const char *path, const char *dataset, int rank, int size, uint32_t *crc, uint32_t *adler,
                            int64_t *nbytes, char *err, size_t errlen);
/* (crc, adler, nbytes) of n consecutive blocks -> one 64-bit checksum
 * (crc << 32 | adler; never 0: 0 means "none"). */
uint64_t ghf_ckpt_checksum_combine(int n, const uint32_t *crc, const uint32_t *adler, const int64_t *nbytes);

/* ---- the append-only log of finished fits (rank 0 of a sweep) ---- */
typedef struct ghf_ckpt_log ghf_ckpt_log;
/* Open the log beside checkpoint path: keep_bytes == 0 creates it afresh
 * (header with tag); else the first keep_bytes bytes (crc keep_crc,
 * keep_count entries, as a loaded checkpoint says) are kept and the rest is
 * cut off.  NULL with a message on failure. */
ghf_ckpt_log *ghf_ckpt_log_open(const char *path, uint64_t tag, int64_t keep_bytes, uint32_t keep_crc,
                                int64_t keep_count, char *err, size_t errlen);
/* Append one record; 0, or 1 (the log keeps its previous length) with a message. */
int  ghf_ckpt_log_append(ghf_ckpt_log *l, int64_t index, const void *rec, size_t n, char *err, size_t errlen);
/* fsync, then fill c's log fields (name, bytes, crc, count).  0 or 1 with a message. */
int  ghf_ckpt_log_commit(ghf_ckpt_log *l, ghf_ckpt *c, char *err, size_t errlen);
void ghf_ckpt_log_close(ghf_ckpt_log *l);
/* internal (io/h5ckpt.c): fill c's done_* arrays from the log prefix
 * that checkpoint path names (c->log_*); 0, or 2 with a message. */
int  ghf__ckpt_log_read(const char *path, ghf_ckpt *c, char *err, size_t errlen);

#endif
