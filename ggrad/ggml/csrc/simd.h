/* What ggrad's CPU kernels share: vectors of VL floats (GCC/Clang vector extensions, which the compiler
   maps onto the instruction set each function is compiled for), and the instruction set in use. */

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

#endif
