/* ckpt_log.c - see checkpoint.h: the append-only log of a sweep's finished fits. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "h5ckpt.h"
#include "h5internal.h"

#define LOG_MAGIC GHF__LOG_MAGIC
#define LOG_HEADER 32
#define LOG_MAX_RECORD ((int64_t)1 << 34) /* 16 GiB: more is damage */

struct ghf_ckpt_log {
    int fd;
    char *path, *name;
    int64_t bytes, count; /* the log's length and entries (all written completely) */
    uint32_t crc;         /* crc32 of bytes [0, bytes) */
};

void ghf_ckpt_log_path(const char *path, char *buf, size_t len) { snprintf(buf, len, "%s.done", path); }

int ghf_ckpt_log_is_ours(const char *path) { return ghf__file_starts_with(path, LOG_MAGIC, 8); }

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* all n bytes at the end; errno on failure */
static int write_all(int fd, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n > 0) {
        const ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (k == 0) errno = ENOSPC;
            return -1;
        }
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

void ghf_ckpt_log_close(ghf_ckpt_log *l)
{
    if (!l) return;
    if (l->fd >= 0) close(l->fd);
    free(l->path);
    free(l->name);
    free(l);
}

ghf_ckpt_log *ghf_ckpt_log_open(const char *path, uint64_t tag, int64_t keep_bytes, uint32_t keep_crc,
                                int64_t keep_count, char *err, size_t errlen)
{
    char lp[4200];
    ghf_ckpt_log_path(path, lp, sizeof lp);
    ghf_ckpt_log *l = calloc(1, sizeof *l);
    if (!l || !(l->path = strdup(lp)) || !(l->name = strdup(base_name(lp)))) {
        ghf__seterr(err, errlen, "out of memory");
        ghf_ckpt_log_close(l);
        return NULL;
    }
    l->fd = -1;
    if (keep_bytes > 0) {
        /* continue a loaded checkpoint's log: cut off what it does not cover */
        l->fd = open(lp, O_WRONLY | O_CLOEXEC);
        if (l->fd < 0 || ftruncate(l->fd, (off_t)keep_bytes) != 0 || lseek(l->fd, 0, SEEK_END) != (off_t)keep_bytes) {
            ghf__seterr(err, errlen, "%s: cannot continue the log of finished fits %s: %s", path, lp, strerror(errno));
            ghf_ckpt_log_close(l);
            return NULL;
        }
        l->bytes = keep_bytes;
        l->crc = keep_crc;
        l->count = keep_count;
        return l;
    }
    /* a new log replaces only a file of ours */
    struct stat sb;
    if (lstat(lp, &sb) == 0 && !ghf_ckpt_log_is_ours(lp)) {
        ghf__seterr(err, errlen, "%s: %s exists and is not a ghfit log of finished fits (remove it, or choose another "
                    "checkpoint name)", path, lp);
        ghf_ckpt_log_close(l);
        return NULL;
    }
    unsigned char h[LOG_HEADER] = {0};
    memcpy(h, LOG_MAGIC, 8);
    h[8] = 1;
    for (int i = 0; i < 8; i++) h[16 + i] = (unsigned char)(tag >> (8 * i));
    l->fd = open(lp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (l->fd < 0 || write_all(l->fd, h, sizeof h) != 0) {
        ghf__seterr(err, errlen, "%s: cannot write the log of finished fits %s: %s", path, lp, strerror(errno));
        if (l->fd >= 0) unlink(lp);
        ghf_ckpt_log_close(l);
        return NULL;
    }
    l->bytes = LOG_HEADER;
    l->crc = (uint32_t)crc32_z(0L, h, sizeof h);
    return l;
}

int ghf_ckpt_log_append(ghf_ckpt_log *l, int64_t index, const void *rec, size_t n, char *err, size_t errlen)
{
    const int64_t hd[2] = {index, (int64_t)n};
    if (write_all(l->fd, hd, sizeof hd) != 0 || write_all(l->fd, rec, n) != 0) {
        const int e = errno;
        /* back to the last complete entry (the next append starts there) */
        if (ftruncate(l->fd, (off_t)l->bytes) != 0 || lseek(l->fd, (off_t)l->bytes, SEEK_SET) < 0) {
        }
        ghf__seterr(err, errlen, "%s: appending to the log of finished fits failed: %s", l->path, strerror(e));
        return 1;
    }
    l->crc = (uint32_t)crc32_z(l->crc, (const unsigned char *)hd, sizeof hd);
    l->crc = (uint32_t)crc32_z(l->crc, rec, (z_size_t)n);
    l->bytes += (int64_t)(sizeof hd + n);
    l->count++;
    return 0;
}

int ghf_ckpt_log_commit(ghf_ckpt_log *l, ghf_ckpt *c, char *err, size_t errlen)
{
    if (fsync(l->fd) != 0) {
        ghf__seterr(err, errlen, "%s: syncing the log of finished fits failed: %s", l->path, strerror(errno));
        return 1;
    }
    free(c->log_name);
    c->log_name = strdup(l->name);
    if (!c->log_name) {
        ghf__seterr(err, errlen, "out of memory");
        return 1;
    }
    c->log_bytes = l->bytes;
    c->log_crc = l->crc;
    c->log_count = l->count;
    return 0;
}

/* ---------------------------------------------------------------------------
 * Reading the prefix a checkpoint refers to
 * ------------------------------------------------------------------------- */

static int read_prefix(const char *lp, int64_t n, unsigned char **out)
{
    *out = NULL;
    const int fd = open(lp, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < n) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    unsigned char *b = malloc((size_t)n + 1);
    int64_t off = 0;
    int e = b ? 0 : ENOMEM;
    while (!e && off < n) {
        const ssize_t k = read(fd, b + off, (size_t)(n - off));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) e = k < 0 ? errno : EIO;
        else off += k;
    }
    close(fd);
    if (e) {
        free(b);
        errno = e;
        return -1;
    }
    *out = b;
    return 0;
}

/* the entries of a verified prefix into c's done_* arrays */
static int parse_entries(const unsigned char *b, int64_t n, ghf_ckpt *c)
{
    const int64_t cnt = c->log_count;
    if (cnt > (n - LOG_HEADER) / 16) return -1;
    c->done_index = malloc((size_t)(cnt + 1) * sizeof(int64_t));
    c->done_off = malloc((size_t)(cnt + 1) * sizeof(int64_t));
    c->done_blob = malloc((size_t)(n > 0 ? n : 1));
    if (!c->done_index || !c->done_off || !c->done_blob) return -1;
    int64_t pos = LOG_HEADER, off = 0;
    c->done_off[0] = 0;
    for (int64_t i = 0; i < cnt; i++) {
        int64_t hd[2];
        if (n - pos < 16) return -1;
        memcpy(hd, b + pos, sizeof hd);
        pos += 16;
        if (hd[1] < 0 || hd[1] > LOG_MAX_RECORD || hd[1] > n - pos) return -1;
        memcpy(c->done_blob + off, b + pos, (size_t)hd[1]);
        pos += hd[1];
        off += hd[1];
        c->done_index[i] = hd[0];
        c->done_off[i + 1] = off;
    }
    if (pos != n) return -1;
    c->n_done = (int)cnt;
    return 0;
}

int ghf__ckpt_log_read(const char *path, ghf_ckpt *c, char *err, size_t errlen)
{
    char lp[4200];
    const char *slash = strrchr(path, '/');
    snprintf(lp, sizeof lp, "%.*s%s", slash ? (int)(slash - path + 1) : 0, path, c->log_name);
    unsigned char *b = NULL;
    if (c->log_bytes < LOG_HEADER || c->log_count > 0x7fffffff || read_prefix(lp, c->log_bytes, &b) != 0) {
        ghf__seterr(err, errlen, "%s: its log of finished fits %s is missing or shorter than the %lld bytes it needs",
                    path, lp, (long long)c->log_bytes);
        return 2;
    }
    int rc = 0;
    if (memcmp(b, LOG_MAGIC, 8) != 0 || (uint32_t)crc32_z(0L, b, (z_size_t)c->log_bytes) != c->log_crc) {
        ghf__seterr(err, errlen, "%s: its log of finished fits %s is damaged (checksum mismatch)", path, lp);
        rc = 2;
    } else if (parse_entries(b, c->log_bytes, c) != 0) {
        ghf__seterr(err, errlen, "%s: its log of finished fits %s is damaged (entries)", path, lp);
        rc = 2;
    }
    free(b);
    return rc;
}
