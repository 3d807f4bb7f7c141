/* Which instruction set ggrad's CPU kernels use: the best this CPU has, or one named (tests run each). */

#include "simd.h"

int ggrad_isa = ISA_GENERIC;

/* Selects `isa` (ISA_BEST: the fastest this CPU runs; a negative value changes nothing) and returns the
   one in use afterwards; an instruction set this CPU lacks leaves the choice unchanged. */
int ggrad_kernels_isa(int isa) {
    int best = ISA_GENERIC;
#ifdef GGRAD_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        best = ISA_AVX512;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        best = ISA_AVX2;
#endif
    if (isa == ISA_BEST)
        ggrad_isa = best;
    else if (isa >= ISA_GENERIC && isa <= best)
        ggrad_isa = isa;
    return ggrad_isa;
}
