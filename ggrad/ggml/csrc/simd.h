/* What ggrad's CPU kernels share: vectors of VL floats (GCC/Clang vector extensions, which the compiler
   maps onto the instruction set each function is compiled for), and the instruction set in use. VL = 16 is
   one AVX-512 register; compiled for AVX2 or SSE, GCC splits such vectors through memory (several times
   slower), so kernels that need those run in narrower vectors of their own (matmul.c) or are not chosen
   there (lowering.py). */

#ifndef GGRAD_SIMD_H
#define GGRAD_SIMD_H

#include <stdint.h>
#include <string.h>

#define VL 16   /* floats per vector */

typedef float vf __attribute__((vector_size(VL * 4)));
typedef int32_t vi __attribute__((vector_size(VL * 4)));
typedef float vf_unaligned __attribute__((vector_size(VL * 4), aligned(4), may_alias));

/* vectors of 16, 8 and 4 floats (the registers of AVX-512, AVX2 and SSE/NEON); the _unaligned types
   load and store at any float's address */
typedef vf v16;
typedef float v8 __attribute__((vector_size(32)));
typedef float v8_unaligned __attribute__((vector_size(32), aligned(4), may_alias));
typedef float v4 __attribute__((vector_size(16)));
typedef float v4_unaligned __attribute__((vector_size(16), aligned(4), may_alias));

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

/* NAME##_generic, NAME##_avx2 and NAME##_avx512 (x86), each NAME##_body(ARGS) compiled for its instruction
   set, and NAME##_for(isa), the one for `isa`; TYPE is the function type of the variants */
#ifdef GGRAD_X86
#define ISA_VARIANTS(NAME, TYPE, PARAMS, ARGS)                                                            \
    static void NAME##_generic PARAMS { NAME##_body ARGS; }                                               \
    TARGET_AVX2 static void NAME##_avx2 PARAMS { NAME##_body ARGS; }                                      \
    TARGET_AVX512 static void NAME##_avx512 PARAMS { NAME##_body ARGS; }                                  \
    static TYPE NAME##_for(int isa) {                                                                     \
        return isa == ISA_AVX512 ? NAME##_avx512 : isa == ISA_AVX2 ? NAME##_avx2 : NAME##_generic;        \
    }
#else
#define ISA_VARIANTS(NAME, TYPE, PARAMS, ARGS)                                                            \
    static void NAME##_generic PARAMS { NAME##_body ARGS; }                                               \
    static TYPE NAME##_for(int isa) {                                                                     \
        (void)isa;                                                                                        \
        return NAME##_generic;                                                                            \
    }
#endif

/* mask ? yes : no, lane by lane (C has no ?: on vectors) */
ALWAYS_INLINE vf vselect(vi mask, vf yes, vf no) {
    return (vf)(((vi)yes & mask) | ((vi)no & ~mask));
}

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
