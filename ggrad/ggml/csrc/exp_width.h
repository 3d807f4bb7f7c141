/* e^x on vectors of W floats, for kernel headers that each_width.h includes once per width (simd.h names
   VF, VI, PER_W). */

/* e^x to about 2 ulp: x = n ln2 + r, |r| <= ln2 / 2, e^r by its Taylor polynomial of degree 7, 2^n by
   the exponent bits. Beyond [-87.3, 88.7] it is 0 (where e^x is subnormal) or inf, so that sigmoid
   reaches 0 and 1 exactly as 1 / (1 + expf(-z)) does. */
ALWAYS_INLINE VF PER_W(vexp)(VF x_in) {
    VF x = vselect(x_in < -87.3f, (VF){} - 87.3f, x_in);
    x = vselect(x > 88.7f, (VF){} + 88.7f, x);
    const float shifter = 12582912.0f;   /* 1.5 * 2^23: adding it rounds to an integer */
    VF t = x * 1.4426950408889634f + shifter;
    VF n = t - shifter;
    VI ni = (VI)t - (VI)((VF){} + shifter);
    VF r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;   /* ln2 in two parts */
    VF p = (VF){} + 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^n as two factors, so that n = 128 (x near 88.7) stays representable */
    VI half = ni >> 1;
    VF s1 = (VF)((half + 127) << 23), s2 = (VF)((ni - half + 127) << 23);
    VF e = p * s1 * s2;
    e = vselect(x_in < -87.3f, (VF){}, e);
    return vselect(x_in > 88.7f, (VF){} + __builtin_inff(), e);
}
