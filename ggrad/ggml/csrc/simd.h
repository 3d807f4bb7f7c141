/* What ggrad's CPU kernels share: vectors of 16, 8 and 4 floats (GCC/Clang vector extensions, which the
   compiler maps onto the instruction set each function is compiled for), the instruction set in use, and
   the means to compile one kernel per instruction set. A vector wider than the registers of the
   instruction set it is compiled for is split through memory by GCC (several times slower), so kernels
   that do their own vector arithmetic are written once for any width and compiled at each register's:
   16 floats for AVX-512, 8 for AVX2, 4 for SSE and NEON (the generic set). */

#ifndef GGRAD_SIMD_H
#define GGRAD_SIMD_H

#include <stdint.h>
#include <string.h>

/* vNN: NN floats; viNN: NN int32 (comparisons' masks); vNN_unaligned: loads and stores at any float's
   address */
typedef float v16 __attribute__((vector_size(64)));
typedef int32_t vi16 __attribute__((vector_size(64)));
typedef float v16_unaligned __attribute__((vector_size(64), aligned(4), may_alias));
typedef float v8 __attribute__((vector_size(32)));
typedef int32_t vi8 __attribute__((vector_size(32)));
typedef float v8_unaligned __attribute__((vector_size(32), aligned(4), may_alias));
typedef float v4 __attribute__((vector_size(16)));
typedef int32_t vi4 __attribute__((vector_size(16)));
typedef float v4_unaligned __attribute__((vector_size(16), aligned(4), may_alias));

#define VMAX 16   /* the widest vector's floats: threads share elements in multiples of it */

enum { ISA_BEST = 0, ISA_GENERIC = 1, ISA_AVX2 = 2, ISA_AVX512 = 3 };

/* the instruction set the kernels run with (ISA_GENERIC, ISA_AVX2 or ISA_AVX512); set by
   ggrad_kernels_isa, which kernels.py calls when the module loads */
extern int ggrad_isa;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GGRAD_X86 1
#define TARGET_AVX512 __attribute__((target("avx512f,fma")))
#define TARGET_AVX2 __attribute__((target("avx2,fma")))
#endif

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* a vector of `a`'s and `b`'s elements picked by constant indices (0.. from a, then b's): Clang's and GCC
   12's __builtin_shufflevector, or older GCC's __builtin_shuffle with the indices as an int vector */
#if defined(__clang__) || __GNUC__ >= 12
#define SHUFFLE8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#define SHUFFLE4(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SHUFFLE8(a, b, ...) __builtin_shuffle(a, b, (vi8){__VA_ARGS__})
#define SHUFFLE4(a, b, ...) __builtin_shuffle(a, b, (vi4){__VA_ARGS__})
#endif

/* NAME##_generic, NAME##_avx2 and NAME##_avx512 (x86), calling GENERIC, AVX2 and AVX512 (ARGS), each
   compiled for its instruction set, and NAME##_for(isa), the one for `isa`; TYPE is their function type */
#ifdef GGRAD_X86
#define VARIANTS(NAME, TYPE, PARAMS, ARGS, GENERIC, AVX2, AVX512)                                         \
    static void NAME##_generic PARAMS { GENERIC ARGS; }                                                   \
    TARGET_AVX2 static void NAME##_avx2 PARAMS { AVX2 ARGS; }                                             \
    TARGET_AVX512 static void NAME##_avx512 PARAMS { AVX512 ARGS; }                                       \
    static TYPE NAME##_for(int isa) {                                                                     \
        return isa == ISA_AVX512 ? NAME##_avx512 : isa == ISA_AVX2 ? NAME##_avx2 : NAME##_generic;        \
    }
#else
#define VARIANTS(NAME, TYPE, PARAMS, ARGS, GENERIC, AVX2, AVX512)                                         \
    static void NAME##_generic PARAMS { GENERIC ARGS; }                                                   \
    static TYPE NAME##_for(int isa) {                                                                     \
        (void)isa;                                                                                        \
        return NAME##_generic;                                                                            \
    }
#endif

/* one scalar body, NAME##_body, that the compiler vectorizes for each instruction set */
#define ISA_VARIANTS(NAME, TYPE, PARAMS, ARGS) \
    VARIANTS(NAME, TYPE, PARAMS, ARGS, NAME##_body, NAME##_body, NAME##_body)

/* Code written once for any width: a header included once per width W (16, 8, 4) by each_width.h
   names its vector types VF, VI, VFU and its functions PER_W(name) (name16, name8, name4); the variants
   of NAME run NAME4 (generic), NAME8 (AVX2) and NAME16 (AVX-512). */
#define PASTE_(a, b) a##b
#define PASTE(a, b) PASTE_(a, b)
#define PER_W(name) PASTE(name, W)
#define VF PASTE(v, W)
#define VI PASTE(vi, W)
#define VFU PASTE(PASTE(v, W), _unaligned)
#define WIDTH_VARIANTS(NAME, TYPE, PARAMS, ARGS) \
    VARIANTS(NAME, TYPE, PARAMS, ARGS, NAME##4, NAME##8, NAME##16)

/* FN, a pointer to void PARAMS, and forward_for, backward_for: the WIDTH_VARIANTS of a kernel's two
   passes, each of type FN */
#define FORWARD_BACKWARD_VARIANTS(FN, PARAMS, ARGS) \
    typedef void(*FN) PARAMS;                        \
    WIDTH_VARIANTS(forward, FN, PARAMS, ARGS)        \
    WIDTH_VARIANTS(backward, FN, PARAMS, ARGS)

/* [begin, end) of `units` for thread ith of nth, in whole multiples of `step` */
ALWAYS_INLINE void share(int64_t units, int64_t step, int ith, int nth, int64_t *begin, int64_t *end) {
    int64_t blocks = (units + step - 1) / step;
    int64_t b0 = blocks * ith / nth, b1 = blocks * (ith + 1) / nth;
    *begin = b0 * step < units ? b0 * step : units;
    *end = b1 * step < units ? b1 * step : units;
}

/* mask ? yes : no, lane by lane (C has no ?: on vectors), for vectors of any width */
#define vselect(mask, yes, no)                                                                            \
    ((__typeof__(yes))(((mask) & (__typeof__(mask))(yes)) | (~(mask) & (__typeof__(mask))(no))))

/* the sum of a vector's lanes, by halves (a tree: the order is fixed for each width) */
ALWAYS_INLINE float hsum4(v4 v) {
    return (v[0] + v[2]) + (v[1] + v[3]);
}

ALWAYS_INLINE float hsum8(v8 v) {
    v4 lo, hi;
    memcpy(&lo, &v, sizeof lo);
    memcpy(&hi, (const char *)&v + sizeof lo, sizeof hi);
    return hsum4(lo + hi);
}

ALWAYS_INLINE float hsum16(v16 v) {
    v8 lo, hi;
    memcpy(&lo, &v, sizeof lo);
    memcpy(&hi, (const char *)&v + sizeof lo, sizeof hi);
    return hsum8(lo + hi);
}

#define hsum(v) _Generic((v), v16: hsum16, v8: hsum8, v4: hsum4)(v)

#endif
