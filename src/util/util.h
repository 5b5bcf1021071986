/* util.h - small shared helpers: exit codes, strict number parsing, rank-0
 * messages, and the command-line record. */
#ifndef GHF_UTIL_H
#define GHF_UTIL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

/* Exit statuses (documented in README and --help). */
#define GHF_EXIT_OK 0
#define GHF_EXIT_RUNTIME 1     /* a failure at run time (I/O error, numerical failure) */
#define GHF_EXIT_USAGE 2       /* bad input or usage: options, files, datasets, values */
#define GHF_EXIT_SOME_FAILED 3 /* `ghfit run` finished and wrote its result, but some fits failed */
#define GHF_EXIT_CHECKPOINT 75 /* stopped on SIGUSR1/SIGTERM after writing a checkpoint: resubmit */

/* Strict parsers: the whole string must be a finite number.  0 on success. */
int ghf_parse_double(const char *s, double *out);
int ghf_parse_int64(const char *s, int64_t *out);
int ghf_parse_int(const char *s, int *out);
/* Comma-separated list of n doubles, or a single value repeated n times. 0 on success. */
int ghf_parse_vec(const char *s, int n, double *out);

/* printf to stderr on rank 0 of MPI_COMM_WORLD, prefixed "ghfit: error: " and newline-terminated. */
void ghf_error0(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same with "ghfit: note: ": a planned stop (exit status 75) is not an error. */
void ghf_note0(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* printf to stdout on rank 0 of MPI_COMM_WORLD */
void ghf_print0(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The command line, as one string (set once by main). */
void ghf_set_command_line(int argc, char **argv);
const char *ghf_command_line(void);

/* ISO 8601 UTC time stamp */
void ghf_iso8601_now(char *buf, size_t len);


#endif
