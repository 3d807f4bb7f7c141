/* What flash_attn.c and its per-width body (flash_attn_width.h) share: the operands of one attention node
   and its work buffers. */

#ifndef GGRAD_FLASH_ATTN_H
#define GGRAD_FLASH_ATTN_H

#include <stdint.h>

#define FA_BQ 128  /* query rows of a block */
#define FA_BK 64   /* keys of a block (a multiple of every vector width) */
#define FA_PAD 16  /* widths of packed rows are multiples of it (of every vector width) */
#define FA_ROWS_MAX 8      /* a forward of at most this many query rows takes them one by one (a decode step), */
#define FA_SKIP_GAP 1e20f  /* skipping the keys whose mask lies this far below the row's largest */

/* element (i1, i2, i3) of a tensor whose rows (dimension 0) are contiguous: data + i1 nb1 + i2 nb2 + i3 nb3 */
struct fa_operand {
    const char *data;
    int64_t nb1, nb2, nb3;
    int type; /* GGML_TYPE_F32, _F16 or _BF16 */
};

/* where a result's rows go: row (i1, i2, i3) at data + i1 s1 + i2 s2 + i3 s3 (in floats), its values contiguous */
struct fa_out {
    float *data;
    int64_t s1, s2, s3;
};

struct fa_args {
    int64_t d, dv, tq, tk, hq, hk, b, bk; /* q [d, tq, hq, b], k [d, tk, hk, bk], v [dv, tk, hk, bk] */
    int64_t dp, dvp;                      /* d and dv rounded up to FA_PAD */
    struct fa_operand q, k, v, o, dout, lse, mask; /* mask.data NULL: none; o, dout, lse: backward only */
    int64_t mask_heads, mask_batches;     /* the mask's ne[2] and ne[3]: 1 (broadcast) or hq, b */
    float scale;
    int causal;                           /* query i sees keys j <= i + offset only */
    int64_t offset;
    struct fa_out out;                    /* forward: O's rows (query, head, batch) */
    float *lse_out;                       /* forward: L [tq, hq, b], contiguous */
    struct fa_out dq, dk, dv_out;         /* backward: dQ's rows (as q's), dK's and dV's (as k's, v's) */
    float *dsum;                          /* backward: rowsum(dO O) [tq, hq, b], contiguous */
};

/* one thread's work buffers (floats, FA_PAD-aligned sizes) */
struct fa_buffers {
    float *qs, *dos, *kt, *ks, *vt, *vs, *s, *dp, *acc, *acc2;
    float *m, *l, *lse, *drow;
};

#endif
