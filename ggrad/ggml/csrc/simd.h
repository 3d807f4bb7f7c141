/* What ggrad's CPU kernels share: vectors of VL floats (GCC/Clang vector extensions, which the compiler
   maps onto the instruction set each function is compiled for), and the instruction set in use. VL = 16 is
   one AVX-512 register; compiled for AVX2 or SSE, GCC splits such vectors through memory (several times
   slower), so kernels that need those run in narrower vectors of their own (matmul.c) or are not chosen
   there (lowering.py). */

#ifndef GGRAD_SIMD_H
#define GGRAD_SIMD_H

#include <stdint.h>

#define VL 16   /* floats per vector */

typedef float vf __attribute__((vector_size(VL * 4)));
typedef int32_t vi __attribute__((vector_size(VL * 4)));
typedef float vf_unaligned __attribute__((vector_size(VL * 4), aligned(4), may_alias));

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

ALWAYS_INLINE float hsum(vf v) {
    float s = 0.0f;
    for (int i = 0; i < VL; i++)
        s += v[i];
    return s;
}

#endif
