/* ggrad's f32 matrix product for GGML's CPU backend, run as a custom op (ggml_custom_4d).

   dst = b @ a^T batched over dims 2 and 3, as GGML's mul_mat: a [k, m, q, r] and b [k, n, q*x, r*y]
   give dst [m, n, q*x, r*y]. Unlike mul_mat it reads both operands with any strides, so transposed and
   permuted views need no copy; and its register-blocked kernel keeps small-k products (k = 32 ... 512,
   a transformer's shapes on the CPU) near the core's FMA peak, where GGML's dot-product kernels lose
   much of it to horizontal sums.

   The method is the usual one for a cache-blocked product: a block of a's rows (MC x KC) is packed into
   panels of MR rows laid out k-major, a panel of NR rows of b likewise where its rows are not contiguous
   (else they are read in place: packing costs as much as the products at a transformer head's k = 32);
   the microkernel multiplies one a panel by NR rows of b into an MR x NR tile of dst held in registers,
   broadcasting b's values against vectors of a's. Blocks of k beyond the first add to dst. Each GGML
   thread computes its own part of dst (whole batches, or a range of rows or columns) with its own
   packing buffers.

   Packing transposes rows contiguous along k (a weight) in registers, 8 x 8 or 4 x 4 floats at a time.
   With few rows of b (GEMV_ROWS_* or fewer: decoding one token at a time) even that costs more than the
   products it serves (~0.11 ns an element of a, for 2n flops an element): such products take dot
   products instead, a's rows read in place, a few of them at once against every row of b, lanes
   accumulating along k, one horizontal sum per output. Operands in other layouts are copied to rows along
   k first, as rarely happens.

   Every output is computed whole by one thread in an order fixed by the shape alone (the method, the k
   blocks, the lanes, the tree of the horizontal sum), so results depend neither on the number of threads
   nor on the operands' strides. */

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "simd.h"

#define KC 256   /* k per packed block */
#define MC 512   /* rows of a per packed block (a multiple of every MR): 512 KiB with KC, in L2 */
/* the most rows of b a product takes as dot products, per instruction set: about where packed tiles start
   to win (benchmarks/matmul_rows.c, one thread, AMD Zen 4: per element of a, packing costs ~0.11 ns and
   the tiles ~0.018 ns a row of b (AVX-512 and AVX2, in steps of NR rows), the dot products ~0.023 ns a
   row with AVX-512, ~0.035 with AVX2; SSE's tiles are slower than its dot products up to 64 rows at least) */
#define GEMV_ROWS_AVX512 32
#define GEMV_ROWS_AVX2 8
#define GEMV_ROWS_GENERIC 64

/* element (row, k) of one batch of an operand lies at base + row * rs + k * ks (bytes) */
struct operand {
    const char *base;
    int64_t rs, ks;
};

typedef void (*microkernel)(int64_t kc, const float *a, const float *b, int64_t ldb, float *c, int64_t ldc,
                            int m, int n, int accumulate);

/* An MR x NR tile: dst[j][i] (+)= sum_k a[k][i] * b[k][j] for i < m, j < n, with MR = NV vectors of VW
   floats. One definition per vector width, each the registers' width of an instruction set: GCC splits a
   vector wider than the registers through memory. */
#define DEFINE_TILE(NAME, VT, VTU, VW)                                                                    \
    ALWAYS_INLINE void NAME(int nv, int nr, int64_t kc, const float *restrict a, const float *restrict b,   \
                            int64_t bj_stride, int64_t bk_stride, float *c, int64_t ldc, int m, int n,      \
                            int accumulate) {                                                             \
        VT acc[16][4];                                                                                    \
        _Pragma("GCC unroll 16") for (int j = 0; j < nr; j++)                                             \
            _Pragma("GCC unroll 4") for (int v = 0; v < nv; v++) acc[j][v] = (VT){0};                     \
        for (int64_t k = 0; k < kc; k++) {                                                                \
            VT av[4];                                                                                     \
            _Pragma("GCC unroll 4") for (int v = 0; v < nv; v++) av[v] = *(const VT *)(a + (k * nv + v) * VW); \
            _Pragma("GCC unroll 16") for (int j = 0; j < nr; j++) {                                       \
                float bj = b[j * bj_stride + k * bk_stride];                                              \
                _Pragma("GCC unroll 4") for (int v = 0; v < nv; v++) acc[j][v] += av[v] * bj;             \
            }                                                                                             \
        }                                                                                                 \
        if (m == nv * VW && n == nr) {                                                                    \
            _Pragma("GCC unroll 16") for (int j = 0; j < nr; j++)                                         \
                _Pragma("GCC unroll 4") for (int v = 0; v < nv; v++) {                                    \
                    VTU *out = (VTU *)(c + j * ldc + v * VW);                                             \
                    if (accumulate)                                                                       \
                        *out += acc[j][v];                                                                \
                    else                                                                                  \
                        *out = acc[j][v];                                                                 \
                }                                                                                         \
            return;                                                                                       \
        }                                                                                                 \
        float spill[16][4 * VW];                                                                          \
        _Pragma("GCC unroll 16") for (int j = 0; j < nr; j++)                                             \
            _Pragma("GCC unroll 4") for (int v = 0; v < nv; v++) *(VTU *)&spill[j][v * VW] = acc[j][v];   \
        for (int j = 0; j < n; j++)                                                                       \
            for (int i = 0; i < m; i++)                                                                   \
                c[j * ldc + i] = accumulate ? c[j * ldc + i] + spill[j][i] : spill[j][i];                 \
    }

DEFINE_TILE(tile16, v16, v16_unaligned, 16)
DEFINE_TILE(tile8, v8, v8_unaligned, 8)
DEFINE_TILE(tile4, v4, v4_unaligned, 4)

/* dst[j][i] = a_i . b_j for i < na <= 4 rows of a (a_i at a + i * lda bytes) and j < nb <= 4 rows of b (b + j * ldb
   floats), k long, in vectors of VW floats: lane l of an accumulator sums the products at k = l mod VW
   (of whole vectors), the tail past them is added to its horizontal sum in order. */
#define DEFINE_DOTS(NAME, VT, VTU, VW)                                                                    \
    ALWAYS_INLINE void NAME(int na, int nb, int64_t k, const char *a, int64_t lda, const float *b,        \
                            int64_t ldb, float *c, int64_t ldc) {                                         \
        VT acc[4][4];                                                                                     \
        _Pragma("GCC unroll 4") for (int i = 0; i < na; i++)                                              \
            _Pragma("GCC unroll 4") for (int j = 0; j < nb; j++) acc[i][j] = (VT){0};                     \
        int64_t kk = 0;                                                                                   \
        for (; kk + VW <= k; kk += VW) {                                                                  \
            VT bv[4];                                                                                     \
            _Pragma("GCC unroll 4") for (int j = 0; j < nb; j++) bv[j] = *(const VTU *)(b + j * ldb + kk); \
            _Pragma("GCC unroll 4") for (int i = 0; i < na; i++) {                                        \
                VT av = *(const VTU *)((const float *)(a + i * lda) + kk);                                \
                _Pragma("GCC unroll 4") for (int j = 0; j < nb; j++) acc[i][j] += av * bv[j];             \
            }                                                                                             \
        }                                                                                                 \
        _Pragma("GCC unroll 4") for (int i = 0; i < na; i++) {                                            \
            const float *ai = (const float *)(a + i * lda);                                               \
            _Pragma("GCC unroll 4") for (int j = 0; j < nb; j++) {                                        \
                float sum = hsum(acc[i][j]);                                                              \
                for (int64_t t = kk; t < k; t++)                                                          \
                    sum += ai[t] * b[j * ldb + t];                                                        \
                c[j * ldc + i] = sum;                                                                     \
            }                                                                                             \
        }                                                                                                 \
    }

DEFINE_DOTS(dots16, v16, v16_unaligned, 16)
DEFINE_DOTS(dots8, v8, v8_unaligned, 8)
DEFINE_DOTS(dots4, v4, v4_unaligned, 4)

typedef void (*gemv_fn)(const char *a, int64_t lda, int64_t m, const float *b, int64_t ldb, int64_t n, int64_t k,
                        float *c, int64_t ldc);

/* DOTS(NA, nb, ...) with nb (1 ... 4) a constant in each call, so that DOTS's loops unroll */
#define DOTS_NB(DOTS, NA, nb, ...)                                                                        \
    switch (nb) {                                                                                         \
    case 1: DOTS(NA, 1, __VA_ARGS__); break;                                                              \
    case 2: DOTS(NA, 2, __VA_ARGS__); break;                                                              \
    case 3: DOTS(NA, 3, __VA_ARGS__); break;                                                              \
    default: DOTS(NA, 4, __VA_ARGS__); break;                                                             \
    }

/* dst rows 0 .. n - 1 by columns 0 .. m - 1 by dot products: NA rows of a (in L1 while they serve)
   against each group of up to NB rows of b in turn, NA x NB accumulators in registers; the last rows of a,
   short of NA, one at a time */
#define GEMV(NAME, TARGET, DOTS, NA, NB)                                                                  \
    TARGET static void NAME(const char *a, int64_t lda, int64_t m, const float *b, int64_t ldb, int64_t n,  \
                            int64_t k, float *c, int64_t ldc) {                                           \
        for (int64_t i = 0; i < m;) {                                                                     \
            int na = m - i >= NA ? NA : 1;                                                                \
            for (int64_t j = 0; j < n; j += NB) {                                                         \
                int nb = n - j < NB ? (int)(n - j) : NB;                                                  \
                if (na == NA)                                                                             \
                    DOTS_NB(DOTS, NA, nb, k, a + i * lda, lda, b + j * ldb, ldb, c + j * ldc + i, ldc)    \
                else                                                                                      \
                    DOTS_NB(DOTS, 1, nb, k, a + i * lda, lda, b + j * ldb, ldb, c + j * ldc + i, ldc)     \
            }                                                                                             \
            i += na;                                                                                      \
        }                                                                                                 \
    }

/* One microkernel per instruction set (ggrad_isa picks one); NV x NR accumulators fill the registers:
   32 of AVX-512 (2 x 12 vectors of 16 floats), 16 of AVX2 (2 x 6 of 8), 16 of SSE (2 x 6 of 4).
   b is a packed panel (ldb = 0: b[k * NR + j]) or NR rows of b read in place (b[j * ldb + k]). */
#define MICROKERNEL(NAME, TARGET, TILE, NV, NR)                                                           \
    TARGET static void NAME(int64_t kc, const float *a, const float *b, int64_t ldb, float *c, int64_t ldc, \
                            int m, int n, int accumulate) {                                               \
        if (ldb == 0)                                                                                     \
            TILE(NV, NR, kc, a, b, 1, NR, c, ldc, m, n, accumulate);                                      \
        else                                                                                              \
            TILE(NV, NR, kc, a, b, ldb, 1, c, ldc, m, n, accumulate);                                     \
    }
#ifdef GGRAD_X86
MICROKERNEL(tile_avx512, TARGET_AVX512, tile16, 2, 12)
MICROKERNEL(tile_avx2, TARGET_AVX2, tile8, 2, 6)
#endif
MICROKERNEL(tile_generic, , tile4, 2, 6)

/* dst[j * ld + i] = src_i[j] for i, j < 8, row src_i at src + i * ls bytes: an 8 x 8 block transposed
   in registers, in three rounds of two-vector shuffles (pairs of floats, of pairs, of halves) */
ALWAYS_INLINE void transpose8(const char *src, int64_t ls, float *dst, int64_t ld) {
    v8 r[8], t[8], u[8];
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) r[i] = *(const v8_unaligned *)(src + i * ls);
    _Pragma("GCC unroll 4") for (int i = 0; i < 8; i += 2) {
        t[i] = SHUFFLE8(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = SHUFFLE8(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    _Pragma("GCC unroll 2") for (int i = 0; i < 8; i += 4) {
        u[i] = SHUFFLE8(t[i], t[i + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        u[i + 1] = SHUFFLE8(t[i], t[i + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        u[i + 2] = SHUFFLE8(t[i + 1], t[i + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        u[i + 3] = SHUFFLE8(t[i + 1], t[i + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
        *(v8_unaligned *)(dst + j * ld) = SHUFFLE8(u[j], u[j + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        *(v8_unaligned *)(dst + (j + 4) * ld) = SHUFFLE8(u[j], u[j + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

/* the same for a 4 x 4 block, in two rounds */
ALWAYS_INLINE void transpose4(const char *src, int64_t ls, float *dst, int64_t ld) {
    v4 r[4];
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) r[i] = *(const v4_unaligned *)(src + i * ls);
    v4 t0 = SHUFFLE4(r[0], r[1], 0, 4, 1, 5), t1 = SHUFFLE4(r[0], r[1], 2, 6, 3, 7);
    v4 t2 = SHUFFLE4(r[2], r[3], 0, 4, 1, 5), t3 = SHUFFLE4(r[2], r[3], 2, 6, 3, 7);
    *(v4_unaligned *)dst = SHUFFLE4(t0, t2, 0, 1, 4, 5);
    *(v4_unaligned *)(dst + ld) = SHUFFLE4(t0, t2, 2, 3, 6, 7);
    *(v4_unaligned *)(dst + 2 * ld) = SHUFFLE4(t1, t3, 0, 1, 4, 5);
    *(v4_unaligned *)(dst + 3 * ld) = SHUFFLE4(t1, t3, 2, 3, 6, 7);
}

typedef void (*transpose_fn)(const char *src, int64_t ls, float *dst, int64_t ld, int64_t lines, int64_t len);

/* dst[j * ld + i] = src_i[j] for i < lines, j < len, src_i at src + i * ls bytes (floats contiguous):
   T x T blocks in registers, the edges past them one float at a time */
#define TRANSPOSE(NAME, TARGET, BLOCK, T)                                                                 \
    TARGET static void NAME(const char *src, int64_t ls, float *dst, int64_t ld, int64_t lines, int64_t len) { \
        int64_t i = 0;                                                                                    \
        for (; i + T <= lines; i += T) {                                                                  \
            int64_t j = 0;                                                                                \
            for (; j + T <= len; j += T)                                                                  \
                BLOCK(src + i * ls + j * (int64_t)sizeof(float), ls, dst + j * ld + i, ld);               \
            for (; j < len; j++)                                                                          \
                for (int64_t ii = i; ii < i + T; ii++)                                                    \
                    dst[j * ld + ii] = ((const float *)(src + ii * ls))[j];                               \
        }                                                                                                 \
        for (; i < lines; i++)                                                                            \
            for (int64_t j = 0; j < len; j++)                                                             \
                dst[j * ld + i] = ((const float *)(src + i * ls))[j];                                     \
    }

#ifdef GGRAD_X86
TRANSPOSE(transpose_avx512, TARGET_AVX512, transpose8, 8)
TRANSPOSE(transpose_avx2, TARGET_AVX2, transpose8, 8)
#endif
TRANSPOSE(transpose_generic, , transpose4, 4)

/* The dot products' blocks: NA x NB accumulators with NB vectors of b, within the registers: 32 of
   AVX-512 (4 x 4 + 4), 16 of AVX2 and SSE (4 x 2 + 2) */
#ifdef GGRAD_X86
GEMV(gemv_avx512, TARGET_AVX512, dots16, 4, 4)
GEMV(gemv_avx2, TARGET_AVX2, dots8, 4, 2)
#endif
GEMV(gemv_generic, , dots4, 4, 2)

struct kernel {
    microkernel run;
    int mr, nr;
    gemv_fn gemv;
    int gemv_rows;
    transpose_fn transpose;
};

static struct kernel kernel_for(int isa) {
#ifdef GGRAD_X86
    if (isa == ISA_AVX512)
        return (struct kernel){tile_avx512, 32, 12, gemv_avx512, GEMV_ROWS_AVX512, transpose_avx512};
    if (isa == ISA_AVX2)
        return (struct kernel){tile_avx2, 16, 6, gemv_avx2, GEMV_ROWS_AVX2, transpose_avx2};
#endif
    (void)isa;
    return (struct kernel){tile_generic, 8, 6, gemv_generic, GEMV_ROWS_GENERIC, transpose_generic};
}

/* Packing buffers, one pair per thread, kept between calls (OpenMP's threads persist) and freed when the
   thread ends (GGML's own thread pool may start new threads for each graph). */
struct scratch {
    float *buffers[2];
    size_t sizes[2];
};

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p) {
    struct scratch *s = p;
    free(s->buffers[0]);
    free(s->buffers[1]);
    free(s);
}

static void scratch_key_create(void) {
    pthread_key_create(&scratch_key, scratch_free);
}

/* this thread's buffer `which` with room for at least n floats, 64-byte aligned; NULL without memory */
static float *scratch(int which, size_t n) {
    pthread_once(&scratch_once, scratch_key_create);
    struct scratch *s = pthread_getspecific(scratch_key);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s || pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (s->sizes[which] < n) {
        free(s->buffers[which]);
        s->buffers[which] = NULL;
        s->sizes[which] = 0;
        void *p = NULL;
        if (posix_memalign(&p, 64, n * sizeof(float)) != 0)
            return NULL;
        s->buffers[which] = p;
        s->sizes[which] = n;
    }
    return s->buffers[which];
}

/* rows r0 .. r0 + rows - 1 and k0 .. k0 + kc - 1 of x into panels of `mr` rows, k-major: panel p holds
   out[p * kc * mr + k * mr + r]; rows past the end are zeros. Rows contiguous along k are transposed by
   `transpose`, in registers. */
static void pack(transpose_fn transpose, float *out, struct operand x, int64_t r0, int64_t rows, int64_t k0,
                 int64_t kc, int mr) {
    for (int64_t p = 0; p < rows; p += mr) {
        float *d = out + (p / mr) * kc * mr;
        int n = rows - p < mr ? (int)(rows - p) : mr;
        const char *src = x.base + (r0 + p) * x.rs + k0 * x.ks;
        if (x.rs == sizeof(float)) {   /* rows adjacent: each k is one run of n floats (too short for memcpy) */
            for (int64_t k = 0; k < kc; k++) {
                const float *run = (const float *)(src + k * x.ks);
                for (int r = 0; r < n; r++)
                    d[k * mr + r] = run[r];
            }
        } else if (x.ks == sizeof(float)) {
            transpose(src, x.rs, d, mr, n, kc);
        } else {
            for (int r = 0; r < n; r++)
                for (int64_t k = 0; k < kc; k++)
                    d[k * mr + r] = *(const float *)(src + r * x.rs + k * x.ks);
        }
        if (n < mr)
            for (int64_t k = 0; k < kc; k++)
                memset(d + k * mr + n, 0, (mr - n) * sizeof(float));
    }
}

/* rows r0 .. r1 - 1 of x, k long, as rows of floats contiguous along k, *ld floats apart: x's own where
   they are, else a copy in this thread's buffer `which` (rows adjacent: by `transpose`); NULL without
   memory for it */
static const float *rows_along_k(transpose_fn transpose, struct operand x, int which, int64_t r0, int64_t r1,
                                 int64_t k, int64_t *ld) {
    if (x.ks == sizeof(float) && x.rs % sizeof(float) == 0) {
        *ld = x.rs / (int64_t)sizeof(float);
        return (const float *)(x.base + r0 * x.rs);
    }
    float *copy = scratch(which, (size_t)(r1 - r0) * k);
    if (copy && x.rs == sizeof(float)) {   /* each k a run of the rows' floats */
        transpose(x.base + r0 * x.rs, x.ks, copy, k, k, r1 - r0);
    } else if (copy) {
        for (int64_t r = r0; r < r1; r++)
            for (int64_t kk = 0; kk < k; kk++)
                copy[(r - r0) * k + kk] = *(const float *)(x.base + r * x.rs + kk * x.ks);
    }
    *ld = k;
    return copy;
}

/* dst rows j0 .. j1 - 1 by columns i0 .. i1 - 1 by dot products, on rows of a and b contiguous along k:
   read in place, or copied so (a, a block of rows at a time), so that the sums are the same whatever the
   operands' strides (ggrad may hand the same product over in another layout); 0 without memory */
static int dot_products(struct kernel kern, struct operand a, struct operand b, int64_t k, float *c, int64_t ldc,
                        int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    int64_t ldb;
    const float *brows = rows_along_k(kern.transpose, b, 1, j0, j1, k, &ldb);
    if (!brows)
        return 0;
    int64_t block = i1 - i0;
    /* a copied, a block of rows at a time: MC x KC floats at most, but 16 rows at least (k > MC x KC / 16) */
    if (a.ks != sizeof(float) || a.rs % sizeof(float) != 0) {
        block = (int64_t)MC * KC / k / 16 * 16;
        block = block < 16 ? 16 : block;
    }
    for (int64_t ib = i0; ib < i1; ib += block) {
        int64_t ie = i1 - ib < block ? i1 : ib + block, lda;
        const float *arows = rows_along_k(kern.transpose, a, 0, ib, ie, k, &lda);
        if (!arows)
            return 0;
        kern.gemv((const char *)arows, lda * (int64_t)sizeof(float), ie - ib, brows, ldb, j1 - j0, k,
                  c + j0 * ldc + ib, ldc);
    }
    return 1;
}

/* dst rows j0 .. j1 - 1 (of b) by columns i0 .. i1 - 1 (of a) of one batch, by dot products if `gemv` else
   by packed tiles; c points at dst[0][0] */
static void product(struct kernel kern, struct operand a, struct operand b, int64_t k, float *c, int64_t ldc,
                   int64_t i0, int64_t i1, int64_t j0, int64_t j1, int gemv) {
    if (k == 0) {
        for (int64_t j = j0; j < j1; j++)
            memset(c + j * ldc + i0, 0, (i1 - i0) * sizeof(float));
        return;
    }
    if (gemv && dot_products(kern, a, b, k, c, ldc, i0, i1, j0, j1))
        return;
    float *apack = scratch(0, (size_t)MC * KC);
    float *bpack = scratch(1, (size_t)KC * kern.nr);
    if (!apack || !bpack) {   /* no memory for the packing buffers: the product unblocked, slowly */
        for (int64_t j = j0; j < j1; j++)
            for (int64_t i = i0; i < i1; i++) {
                float sum = 0;
                for (int64_t kk = 0; kk < k; kk++)
                    sum += *(const float *)(a.base + i * a.rs + kk * a.ks) *
                           *(const float *)(b.base + j * b.rs + kk * b.ks);
                c[j * ldc + i] = sum;
            }
        return;
    }
    for (int64_t k0 = 0; k0 < k; k0 += KC) {
        int64_t kc = k - k0 < KC ? k - k0 : KC;
        for (int64_t ib = i0; ib < i1; ib += MC) {
            int64_t mc = i1 - ib < MC ? i1 - ib : MC;
            pack(kern.transpose, apack, a, ib, mc, k0, kc, kern.mr);
            for (int64_t jb = j0; jb < j1; jb += kern.nr) {
                int nr = j1 - jb < kern.nr ? (int)(j1 - jb) : kern.nr;
                const float *bp = bpack;
                int64_t ldb = 0;
                if (nr == kern.nr && b.ks == sizeof(float) && b.rs > 0 && b.rs % sizeof(float) == 0) {
                    bp = (const float *)(b.base + jb * b.rs + k0 * b.ks);   /* rows in place */
                    ldb = b.rs / sizeof(float);
                } else {
                    pack(kern.transpose, bpack, b, jb, nr, k0, kc, kern.nr);
                }
                for (int64_t ir = 0; ir < mc; ir += kern.mr) {
                    int m = mc - ir < kern.mr ? (int)(mc - ir) : kern.mr;
                    kern.run(kc, apack + (ir / kern.mr) * kc * kern.mr, bp, ldb, c + jb * ldc + ib + ir, ldc, m,
                             nr, k0 > 0);
                }
            }
        }
    }
}

/* dst rows j0 .. j1 - 1 by columns i0 .. i1 - 1 plus bias[i]: after the whole sum of each output, so that
   it is the sum a product followed by an add gives */
static void add_bias(const float *bias, float *c, int64_t ldc, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; j++)
        for (int64_t i = i0; i < i1; i++)
            c[j * ldc + i] += bias[i];
}

/* ggml_custom_op_t: dst = b @ a^T (+ bias) for dst->src[0] = a, dst->src[1] = b (f32, any strides) and an
   optional dst->src[2] = bias (contiguous f32 [m], one value per column of dst): a linear layer in one node
   (the bias's add is a node of its own otherwise, and a barrier of the CPU's threads) */
void ggrad_matmul_f32(struct ggml_tensor *dst, int ith, int nth, void *userdata) {
    (void)userdata;
    const struct kernel kern = kernel_for(ggrad_isa);
    const struct ggml_tensor *a = dst->src[0], *b = dst->src[1];
    const float *bias = dst->src[2] ? (const float *)dst->src[2]->data : NULL;
    const int64_t k = a->ne[0], m = a->ne[1], n = b->ne[1];
    const int64_t batches = b->ne[2] * b->ne[3];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const int64_t ldc = dst->nb[1] / sizeof(float);
    /* the choice of method rests on the shape alone: never on a thread's share, nor on the strides */
    const int gemv = n <= kern.gemv_rows;
    int64_t i0 = 0, i1 = m, j0 = 0, j1 = n, q0 = 0, q1 = batches;
    if (batches >= nth) {   /* whole batches per thread */
        share(batches, 1, ith, nth, &q0, &q1);
    } else if (!gemv && (n + kern.nr - 1) / kern.nr >= (m + kern.mr - 1) / kern.mr) {
        share(n, kern.nr, ith, nth, &j0, &j1);
    } else {
        share(m, kern.mr, ith, nth, &i0, &i1);
    }
    if (i0 >= i1 || j0 >= j1)
        return;
    for (int64_t q = q0; q < q1; q++) {
        int64_t q2 = q % b->ne[2], q3 = q / b->ne[2];
        struct operand ao = {(const char *)a->data + (q2 / r2) * a->nb[2] + (q3 / r3) * a->nb[3], a->nb[1], a->nb[0]};
        struct operand bo = {(const char *)b->data + q2 * b->nb[2] + q3 * b->nb[3], b->nb[1], b->nb[0]};
        float *c = (float *)((char *)dst->data + q2 * dst->nb[2] + q3 * dst->nb[3]);
        product(kern, ao, bo, k, c, ldc, i0, i1, j0, j1, gemv);
        if (bias)
            add_bias(bias, c, ldc, i0, i1, j0, j1);
    }
}
