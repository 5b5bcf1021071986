/* h5internal.h - helpers shared by the io/ sources (not part of the public
 * API; tests may include it for the test hooks at the end).  Internal
 * non-static symbols are ghf__*. */
#ifndef GHF_H5INTERNAL_H
#define GHF_H5INTERNAL_H

/* standard headers */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* MPI, HDF5 */
#include <mpi.h>
#include <hdf5.h>

/* this module */
#include "h5io.h"

#define GHF__DEFAULT_DATASET "/X"

/* Root attribute of a data set written by `ghfit generate` (its value: the version). */
#define GHF_MATRIX_SIGNATURE "ghfit_data_version"

/* Switches off HDF5's automatic error printing (idempotent). */
void ghf__h5_quiet(void);

/* The start of every collective entry point (read, write): HDF5's error
 * printing off, the piece counter reset, rank and size of comm, and the
 * error buffer: err, or lbuf when the caller gave none.  Returns the buffer
 * to use (emptied) and sets *errlen to its size. */
char *ghf__h5_begin(MPI_Comm comm, char *err, size_t *errlen, char *lbuf, size_t lbuflen, int *rank,
                    int *size);

/* snprintf into err (if err && errlen), never a trailing newline. */
void ghf__seterr(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Agree on a status across comm: returns the max status of all ranks; when
 * it is non-zero, err on every rank is set to the message of the lowest rank
 * that reported that status. */
int ghf__agree(MPI_Comm comm, int status, char *err, size_t errlen);

/* "dataset" or "/X" when NULL/"". */
const char *ghf__dsname(const char *dataset);

/* What rank 0 learns about the input dataset (serial driver). */
typedef struct ghf__dsinfo {
    int64_t n;          /* rows */
    int64_t d;          /* columns */
    int     cls;        /* 0 float, 1 signed int, 2 unsigned int */
    int     size;       /* bytes per element on disk */
    int     chunked;    /* 1 if chunked layout */
    int     ndims;      /* 2, or 1 for a vector of n values (d = 1; only weights accept it) */
    char    file[4096]; /* the file that holds the data (differs from path behind an external link) */
} ghf__dsinfo;

/* At most this many columns in an input matrix. */
#define GHF__MAX_COLS 1000000

/* Opens path serially (io/h5inspect.c) and checks that it is a regular,
 * readable HDF5 file not locked by a writer and that `dataset` is a 2-D,
 * non-empty numeric dataset parallel HDF5 can read: links resolve, no
 * virtual or external storage, every filter available, every chunk written.
 * Status 0/1/2 with a message naming file, dataset and cause. */
int ghf__inspect(const char *path, const char *dataset, ghf__dsinfo *info,
                 char *err, size_t errlen);

/* Naming the cause of a failed open or read (io/h5diag.c), ruled out in
 * turn before any "truncated or corrupt?" fallback. */
struct stat;
/* What the HDF5 error stack says (read it right after the failing call:
 * the next HDF5 call clears it; local, no file access). */
typedef struct ghf__stack_facts {
    int pline;                 /* the filter pipeline failed */
    int locked;                /* the file lock could not be taken */
    long long eof, stored_eof; /* a truncated file at open (-1: not that) */
} ghf__stack_facts;
ghf__stack_facts ghf__h5_stack_facts(void);
/* The name of filter id ("szip", "deflate (gzip)", ...; stored: the name
 * recorded in the file, for unknown ids). */
const char *ghf__filter_name(H5Z_filter_t id, const char *stored);
/* Status 2 with a message when a filter of the pipeline dcpl cannot be
 * decoded by this HDF5 (not registered, or no decoder); szip named with
 * the h5repack conversion.  0 when all can. */
int ghf__check_filters(hid_t dcpl, const char *path, const char *dn, char *err, size_t errlen);
/* After a failed H5Fopen of path (call it first): 1 with a message when the
 * cause can be named (a writer's lock, not readable, truncated below what
 * its superblock records), else 0 and err untouched.  dn may be NULL. */
int ghf__explain_open_failure(const char *path, const char *dn, char *err, size_t errlen);
/* 1 if a and b differ in device, inode, size or mtime */
int ghf__stat_changed(const struct stat *a, const struct stat *b);
/* After a failed read of rows [r0, r1) of path:dn (sf: the stack facts
 * taken right after the failure; st_open: the file's stat before it was
 * opened, or NULL): err names, in turn, a file changed or removed since it
 * was opened, a file not readable, a filter this HDF5 cannot decode, a file
 * shorter than the data of these rows, a filter that failed to decode;
 * else err = fallback.  Opens the file again, serially (call it after the
 * collective file is closed; local to the calling rank). */
void ghf__explain_read_failure(const char *path, const char *dn, const struct stat *st_open,
                               const ghf__stack_facts *sf, int64_t r0, int64_t r1, const char *fallback,
                               char *err, size_t errlen);

/* "regular file", "FIFO (named pipe)", "character device", ... */
const char *ghf__file_type_name(mode_t m);

/* Writable-directory check behind ghf_h5_out_check: the path is not a
 * directory, its directory exists, and a file can be created there. */
int ghf__check_writable(const char *final_path, char *err, size_t errlen);
/* The same; probe = 0 creates nothing (access(2) instead of a probe file). */
int ghf__check_writable_mode(const char *final_path, int probe, char *err, size_t errlen);

/* Files built in memory.  HDF5 1.10.8 crashes at exit once a flush of an
 * open file has failed (a full disk, a quota), so ghfit's serial files are
 * built with the core driver (no backing store: HDF5 never writes to disk)
 * and their image, taken over when HDF5 closes the file, is written with
 * plain POSIX calls, whose errors are clean.  (H5Fget_file_image is not
 * used: in 1.10.8 it returns images with a wrong superblock checksum.)
 *
 * ghf__h5_mem_create: a new file named `name` (in memory only; `libver_lo`
 * the lower format bound, e.g. H5F_LIBVER_V18) and its capture state *mf;
 * -1 on failure.  ghf__h5_mem_save: closes f (exactly once, also on
 * failure) and writes the image to a new file "<base>.tmp.<pid>[.<k>]"
 * created exclusively (never replacing anything), fsync'ed; *tmp receives
 * its malloc'd name.  0, or -1 with `why` (the errno text) and no file
 * left.  ghf__h5_mem_discard: closes f, writes nothing.  Both free *mf. */
typedef struct ghf__memfile ghf__memfile;
hid_t ghf__h5_mem_create(const char *name, H5F_libver_t libver_lo, ghf__memfile **mf);
int   ghf__h5_mem_save(hid_t f, ghf__memfile *mf, const char *base, char **tmp, char *why, size_t whylen);
void  ghf__h5_mem_discard(hid_t f, ghf__memfile *mf);
/* The temporary file names of ghf__h5_mem_save are known to the process
 * until they are renamed or removed: ghf__tmp_release(tmp) forgets one and
 * frees it (NULL: nothing); ghf__tmp_unlink_all removes every one still
 * known (async-signal-safe; ghf_out_abandon). */
void  ghf__tmp_release(char *tmp);
void  ghf__tmp_unlink_all(void);

/* fsync(path) (a file or a directory); 0 on success. */
int ghf__fsync_path(const char *path);

/* The first bytes of ghfit's own non-HDF5-signed files: a checkpoint's user
 * block and the log of finished fits. */
#define GHF__CKPT_MAGIC "GHFITCKP"
#define GHF__LOG_MAGIC "GHFITLOG"
/* 1 if path is a regular file whose first n bytes are magic (n <= 16) */
int ghf__file_starts_with(const char *path, const char *magic, size_t n);
/* fsync the directory that holds path; 0 on success (best effort). */
int ghf__fsync_parent(const char *path);

/* The first `want` bytes (want < 0: all) of a regular file into a malloc'd
 * buffer (*len: its length, when len is not NULL); -1 with errno (EINVAL:
 * not a regular file, or shorter than want). */
int ghf__read_regular(const char *path, int64_t want, unsigned char **buf, size_t *len);
/* H5Fopen read-only, serial, with HDF5's file locking on; < 0 on failure. */
hid_t ghf__h5_open_ro(const char *path);

/* String attributes (variable-length UTF-8) and numeric scalar attributes. */
int ghf__attr_str(hid_t loc, const char *name, const char *val);
int ghf__attr_i64(hid_t loc, const char *name, int64_t v);
int ghf__attr_int(hid_t loc, const char *name, int v);
int ghf__attr_f64(hid_t loc, const char *name, double v);
/* a float64 array (intermediate groups created), with its description (h5gof.c) */
int ghf__h5_put_array(hid_t f, const ghf_h5_array *a);
/* Readers: 0, or -1 when the attribute is absent or unreadable; a string
 * attribute (variable or fixed length, any character set) as a malloc'd
 * copy, or NULL. */
int ghf__attr_read_i64(hid_t loc, const char *name, int64_t *v);
int ghf__attr_read_f64(hid_t loc, const char *name, double *v);
char *ghf__attr_read_str(hid_t loc, const char *name);

/* Test hooks ------------------------------------------------------------- */

/* Upper bound on the bytes one collective H5Dread/H5Dwrite moves per rank
 * (default 1 GiB).  Tests shrink it to exercise the multi-piece path; 0
 * restores the default. */
void   ghf__h5_set_max_piece_bytes(size_t bytes);
size_t ghf__h5_max_piece_bytes(void);

/* I/O mode of the last collective read/write piece of this process
 * (H5Pget_mpio_actual_io_mode / H5Pget_mpio_no_collective_cause; local and
 * global causes OR-ed); -1 before any. */
int      ghf__h5_last_io_mode(void);
uint32_t ghf__h5_last_no_coll_cause(void);
void     ghf__h5_record_io_mode(hid_t dxpl);
/* Called (when set) by every rank of the collective shard read once the file
 * and dataset are open, before the first row is read: tests change the file
 * there (a file rewritten during a run).  NULL: none. */
void ghf__h5_set_before_read_hook(void (*fn)(const char *path));
/* Tests: treat filter id as absent from this HDF5 in the filter checks
 * (io/h5diag.c; -1: none).  The built-in ones (szip) cannot be unregistered. */
void ghf__h5_set_hidden_filter(H5Z_filter_t id);
/* Number of collective data calls (pieces) of the last read/write. */
int      ghf__h5_last_n_pieces(void);
void     ghf__h5_set_last_n_pieces(int n);

#endif /* GHF_H5INTERNAL_H */
