/* IEEE half and bfloat16 to float32, exact (subnormals, infinities and nan included): the scalar conversions
   ggrad's C kernels share where they read half operands. */
#ifndef GGRAD_HALF_H
#define GGRAD_HALF_H

#include <stdint.h>
#include <string.h>

static inline float half_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        float value = (float)man * (1.0f / 16777216.0f);   /* subnormal (or zero): man * 2^-24 */
        return sign ? -value : value;
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

#endif
