/* Includes the header named by WIDTH_BODY once per vector width W: 16 (AVX-512), 8 (AVX2), 4 (SSE,
   NEON). See simd.h for the names such a header uses. */

#define W 16
#include WIDTH_BODY
#undef W
#define W 8
#include WIDTH_BODY
#undef W
#define W 4
#include WIDTH_BODY
#undef W
#undef WIDTH_BODY
