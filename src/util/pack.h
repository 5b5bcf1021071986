/* pack.h - byte buffers for messages between ranks and for checkpoint
 * broadcasts: integers, doubles, strings and arrays in native byte order
 * (the ranks of one job share it). */
#ifndef GHF_PACK_H
#define GHF_PACK_H

#include <stddef.h>
#include <stdint.h>

/* ---- serialisation (native byte order: the ranks of one job share it) ---- */

typedef struct ghf_pack {
    unsigned char *p;
    size_t n, cap;
    int oom;
} ghf_pack;

void ghf_pack_bytes(ghf_pack *b, const void *x, size_t n);
void ghf_pack_i64(ghf_pack *b, int64_t v);
void ghf_pack_f64(ghf_pack *b, double v);
void ghf_pack_str(ghf_pack *b, const char *s);             /* NULL packs as absent */
void ghf_pack_f64s(ghf_pack *b, const double *x, int64_t n); /* count + values; NULL = absent */
void ghf_pack_free(ghf_pack *b);

typedef struct ghf_unpack {
    const unsigned char *p;
    size_t n, off;
    int bad;
} ghf_unpack;

int64_t ghf_unpack_i64(ghf_unpack *u);
double  ghf_unpack_f64(ghf_unpack *u);
char   *ghf_unpack_str(ghf_unpack *u);                  /* malloc'd or NULL */
double *ghf_unpack_f64s(ghf_unpack *u, int64_t *n);     /* malloc'd or NULL */

#endif
