/* job_file.c - reading a job file: rank 0 reads it (a regular file of at
 * most GHF_JOB_MAX_BYTES bytes, opened without blocking) and broadcasts the
 * text; every rank parses it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agree.h"
#include "job.h"
#include "util.h"

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

int ghf_job_load_file(MPI_Comm comm, const char *path, ghf_job *j, char *err, size_t errlen)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    char *text = NULL;
    size_t len = 0;
    int st = 0;
    if (rank == 0) st = read_job_file(path, &text, &len, err, errlen);
    ghf_bcast_status(comm, &st, err, errlen);
    if (st) {
        free(text);
        return st;
    }
    int64_t n = (int64_t)len;
    MPI_Bcast(&n, 1, MPI_INT64_T, 0, comm);
    if (rank != 0) text = calloc((size_t)n + 1, 1);
    const int oom = ghf_any(comm, text == NULL);
    if (oom) {
        free(text);
        snprintf(err, errlen, "out of memory (a job file of %lld bytes)", (long long)n);
        return GHF_EXIT_RUNTIME;
    }
    MPI_Bcast(text, (int)n, MPI_CHAR, 0, comm);
    st = ghf_job_parse(text, (size_t)n, path, j, err, errlen);
    free(text);
    return st;
}
