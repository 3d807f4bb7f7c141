// ggrad's CUDA flash attention twins (ggrad/ggml/cuda/flash_attn.cu) against the CPU kernels they twin
// (ggrad/ggml/csrc/flash_attn.c), on nodes made by hand: no GGML library, no Python, so a fresh GPU machine checks
// and times them in seconds. Every output (O, L, dQ, dK, dV, D) at the dtype's tolerance; the token-major layout
// (q, k, v the heads of one fused qkv, O token-major, dQ dK dV joined as qkv: kernels.flash_attn's token_major,
// flash_attn_back's joined) against the CPU's at the tolerance and against the head-major layout to the bit, on
// either device; then (with an argument) the kernels' times on the big GPT's attention (B 32, H 8, T 256, D 64,
// causal) and longer sequences, both layouts.
//
//   bash benchmarks/gpu_run.sh flash      (builds it with nvcc and gcc, GGML's headers from the sdist)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <random>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "ggml.h"
extern "C" void ggrad_flash_attn(ggml_tensor *, int, int, void *);
extern "C" void ggrad_flash_attn_back(ggml_tensor *, int, int, void *);
extern "C" void ggrad_cuda_flash_attn(ggml_tensor *, void *, void *);
extern "C" void ggrad_cuda_flash_attn_back(ggml_tensor *, void *, void *);
extern "C" int ggrad_kernels_isa(int);
int ggrad_flash_attn_load();
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)

static ggml_tensor mk(ggml_type type, long long n0, long long n1, long long n2, long long n3, void *data, long long pad = 0) {
    ggml_tensor t; memset(&t, 0, sizeof t); t.type = type; t.ne[0]=n0; t.ne[1]=n1; t.ne[2]=n2; t.ne[3]=n3;
    size_t es = type == GGML_TYPE_F32 ? 4 : 2; t.nb[0]=es; t.nb[1]=es*(n0+pad); t.nb[2]=t.nb[1]*n1; t.nb[3]=t.nb[2]*n2; t.data=data; return t;
}
// the node's userdata (kernels._attention_bits), kept in its op_params as GGML keeps a custom op's: the CUDA twins
// read it there, the CPU kernels take it as their argument (GGML passes it so)
static void *set_user(ggml_tensor &t, float scale, int causal, int offset, int token_major = 0) {
    uint32_t sb; memcpy(&sb, &scale, 4);
    uint64_t bits = sb | ((uint64_t)(causal?1:0) << 32) | ((uint64_t)(offset + (1<<29)) << 33) | ((uint64_t)(token_major?1:0) << 63);
    struct { void *fun; int n; void *ud; } p = {nullptr, -1, (void*)(uintptr_t)bits}; memcpy(t.op_params, &p, sizeof p);
    return p.ud;
}
static std::vector<uint16_t> to_half(const std::vector<float> &x, ggml_type t) {
    std::vector<uint16_t> o(x.size());
    for (size_t i = 0; i < x.size(); i++) { if (t == GGML_TYPE_F16) { __half h = __float2half_rn(x[i]); memcpy(&o[i], &h, 2);} else { __nv_bfloat16 h = __float2bfloat16_rn(x[i]); memcpy(&o[i], &h, 2);} }
    return o;
}
static void *dev(const void *h, size_t n) { void *d; CK(cudaMalloc(&d, n)); CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice)); return d; }
static double rel(const float *a, const float *b, size_t n) {
    double m = 0, e = 0; for (size_t i = 0; i < n; i++) { if (std::isinf(b[i]) && a[i] == b[i]) continue; m = fmax(m, fabs(b[i])); double d = fabs(a[i]-b[i]); if (!(d <= e)) e = d; }
    return e / (m + 1e-12);
}
static int failures = 0;
static void run(const char *name, ggml_type type, int B, int H, int Hk, int T, int S, int D, int Dv, int causal, int use_mask, int pad, float tol, bool timing = false) {
    std::mt19937 rng(1); std::normal_distribution<float> nd;
    auto rnd = [&](size_t n) { std::vector<float> v(n); for (auto &x : v) x = nd(rng); return v; };
    const int Bk = B;
    auto qf = rnd((size_t)B*H*T*(D+pad)), kf = rnd((size_t)Bk*Hk*S*D), vf = rnd((size_t)Bk*Hk*S*Dv), gf = rnd((size_t)B*H*T*Dv);
    std::vector<float> maskf;
    if (use_mask) { maskf = rnd((size_t)B*T*S); for (int i = 0; i < B*T*S; i += 7) maskf[i] = -INFINITY; for (int j = 0; j < S; j++) maskf[(size_t)2*S + j] = -INFINITY; }
    size_t es = type == GGML_TYPE_F32 ? 4 : 2;
    std::vector<uint16_t> qh, kh, vh; const void *qd = qf.data(), *kd = kf.data(), *vd = vf.data();
    if (type != GGML_TYPE_F32) { qh = to_half(qf, type); kh = to_half(kf, type); vh = to_half(vf, type); qd = qh.data(); kd = kh.data(); vd = vh.data(); }
    const float scale = 1.0f / sqrtf((float)D);
    size_t nO = (size_t)Dv*T*H*B, nL = (size_t)T*H*B, nfwd = nO + nL;
    size_t nbk = (size_t)D*T*H*B + (size_t)D*S*Hk*Bk + (size_t)Dv*S*Hk*Bk + nL;
    // CPU
    std::vector<float> fwd_c(nfwd), bwd_c(nbk);
    ggml_tensor q = mk(type, D, T, H, B, (void*)qd, pad), k = mk(type, D, S, Hk, Bk, (void*)kd), v = mk(type, Dv, S, Hk, Bk, (void*)vd);
    ggml_tensor m = mk(GGML_TYPE_F32, S, T, 1, B, maskf.data());
    ggml_tensor f = mk(GGML_TYPE_F32, nfwd, 1, 1, 1, fwd_c.data());
    f.src[0]=&q; f.src[1]=&k; f.src[2]=&v; if (use_mask) f.src[3]=&m;
    ggrad_flash_attn(&f, 0, 1, set_user(f, scale, causal, 0));
    ggml_tensor o = mk(GGML_TYPE_F32, Dv, T, H, B, fwd_c.data()), l = mk(GGML_TYPE_F32, T, H, B, 1, fwd_c.data() + nO), g = mk(GGML_TYPE_F32, Dv, T, H, B, gf.data());
    ggml_tensor bk = mk(GGML_TYPE_F32, nbk, 1, 1, 1, bwd_c.data());
    bk.src[0]=&q; bk.src[1]=&k; bk.src[2]=&v; bk.src[3]=&o; bk.src[4]=&g; bk.src[5]=&l; if (use_mask) bk.src[6]=&m;
    ggrad_flash_attn_back(&bk, 0, 1, set_user(bk, scale, causal, 0));
    // GPU
    void *qg = dev(qd, qf.size()*es), *kg = dev(kd, kf.size()*es), *vg = dev(vd, vf.size()*es), *gg = dev(gf.data(), gf.size()*4);
    void *mg = use_mask ? dev(maskf.data(), maskf.size()*4) : nullptr;
    float *fg, *bg; CK(cudaMalloc(&fg, nfwd*4)); CK(cudaMalloc(&bg, nbk*4));
    ggml_tensor Q = mk(type, D, T, H, B, qg, pad), K = mk(type, D, S, Hk, Bk, kg), V = mk(type, Dv, S, Hk, Bk, vg), M = mk(GGML_TYPE_F32, S, T, 1, B, mg);
    ggml_tensor F = mk(GGML_TYPE_F32, nfwd, 1, 1, 1, fg); F.src[0]=&Q; F.src[1]=&K; F.src[2]=&V; if (use_mask) F.src[3]=&M; set_user(F, scale, causal, 0);
    ggml_tensor O = mk(GGML_TYPE_F32, Dv, T, H, B, fg), L = mk(GGML_TYPE_F32, T, H, B, 1, fg + nO), G = mk(GGML_TYPE_F32, Dv, T, H, B, gg);
    ggml_tensor BK = mk(GGML_TYPE_F32, nbk, 1, 1, 1, bg); BK.src[0]=&Q; BK.src[1]=&K; BK.src[2]=&V; BK.src[3]=&O; BK.src[4]=&G; BK.src[5]=&L; if (use_mask) BK.src[6]=&M; set_user(BK, scale, causal, 0);
    cudaStream_t st; CK(cudaStreamCreate(&st));
    ggrad_cuda_flash_attn(&F, st, nullptr); ggrad_cuda_flash_attn_back(&BK, st, nullptr);
    CK(cudaStreamSynchronize(st)); CK(cudaGetLastError());
    std::vector<float> fwd_g(nfwd), bwd_g(nbk);
    CK(cudaMemcpy(fwd_g.data(), fg, nfwd*4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(bwd_g.data(), bg, nbk*4, cudaMemcpyDeviceToHost));
    size_t nq = (size_t)D*T*H*B, nk = (size_t)D*S*Hk*Bk, nv = (size_t)Dv*S*Hk*Bk;
    double eo = rel(fwd_g.data(), fwd_c.data(), nO), el = rel(fwd_g.data()+nO, fwd_c.data()+nO, nL);
    double eq = rel(bwd_g.data(), bwd_c.data(), nq), ek = rel(bwd_g.data()+nq, bwd_c.data()+nq, nk), ev = rel(bwd_g.data()+nq+nk, bwd_c.data()+nq+nk, nv);
    double ed = rel(bwd_g.data()+nq+nk+nv, bwd_c.data()+nq+nk+nv, nL);
    bool ok = eo < tol && el < tol && eq < tol && ek < tol && ev < tol && ed < tol;
    failures += !ok;
    printf("%-4s %-22s B%d H%d/%d T%d S%d D%d/%d causal%d mask%d: O %.1e L %.1e dQ %.1e dK %.1e dV %.1e D %.1e %s\n", ok ? "ok" : "FAIL", name, B, H, Hk, T, S, D, Dv, causal, use_mask, eo, el, eq, ek, ev, ed, ok ? "" : "<<<<");
    if (timing) {
        cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
        for (int w = 0; w < 3; w++) { ggrad_cuda_flash_attn(&F, st, nullptr); ggrad_cuda_flash_attn_back(&BK, st, nullptr); }
        const int n = 20; float ms_f, ms_b;
        cudaEventRecord(a, st); for (int i = 0; i < n; i++) ggrad_cuda_flash_attn(&F, st, nullptr); cudaEventRecord(b, st); cudaEventSynchronize(b); cudaEventElapsedTime(&ms_f, a, b);
        cudaEventRecord(a, st); for (int i = 0; i < n; i++) ggrad_cuda_flash_attn_back(&BK, st, nullptr); cudaEventRecord(b, st); cudaEventSynchronize(b); cudaEventElapsedTime(&ms_b, a, b);
        double flops = 4.0 * B * H * (double)T * S * D * (causal ? 0.5 : 1.0);
        printf("     time: forward %.3f ms (%.1f TFLOP/s), backward %.3f ms (%.1f TFLOP/s at 2.5x the forward's flops)\n", ms_f/n, flops/(ms_f/n)/1e9, ms_b/n, 2.5*flops/(ms_b/n)/1e9);
    }
    cudaFree(qg); cudaFree(kg); cudaFree(vg); cudaFree(gg); if (mg) cudaFree(mg); cudaFree(fg); cudaFree(bg); cudaStreamDestroy(st);
}
// a view with the given strides (in elements) of a tensor's memory
static ggml_tensor strided(ggml_type type, long long n0, long long n1, long long n2, long long n3, const void *data,
                           long long s1, long long s2, long long s3) {
    ggml_tensor t = mk(type, n0, n1, n2, n3, (void*)data); size_t es = type == GGML_TYPE_F32 ? 4 : 2;
    t.nb[1] = es*s1; t.nb[2] = es*s2; t.nb[3] = es*s3; return t;
}
struct layouts { std::vector<float> fwd_h, bwd_h, fwd_t, bwd_t; };
// both layouts' forward and backward on one device (CPU: cpu true; else the CUDA twins) of q, k, v the heads of qkv
// [3 H D, T, B] and dO the heads of g [H D, T, B] (qkv, g, mask: that device's memory)
static layouts both_layouts(bool cpu, ggml_type type, int B, int H, int T, int D, const void *qkv, const float *g, const float *mask,
                            float scale, int causal, cudaStream_t st) {
    const long long W = 3LL*H*D, nO = (long long)D*T*H*B, nL = (long long)T*H*B, es = type == GGML_TYPE_F32 ? 4 : 2;
    ggml_tensor Q = strided(type, D, T, H, B, qkv, W, D, W*T), K = strided(type, D, T, H, B, (const char*)qkv + es*H*D, W, D, W*T),
                V = strided(type, D, T, H, B, (const char*)qkv + es*2*H*D, W, D, W*T), G = strided(GGML_TYPE_F32, D, T, H, B, g, (long long)H*D, D, (long long)H*D*T),
                M = mk(GGML_TYPE_F32, T, T, 1, B, (void*)mask);
    float *buf[4]; const size_t sizes[4] = {(size_t)(nO + nL), (size_t)(3*nO + nL), (size_t)(nO + nL), (size_t)(3*nO + nL)};
    for (int i = 0; i < 4; i++) { if (cpu) buf[i] = (float*)malloc(sizes[i]*4); else CK(cudaMalloc(&buf[i], sizes[i]*4)); }
    for (int tm = 0; tm < 2; tm++) {
        float *fwd = buf[2*tm], *bwd = buf[2*tm + 1];
        ggml_tensor F = mk(GGML_TYPE_F32, nO + nL, 1, 1, 1, fwd); F.src[0]=&Q; F.src[1]=&K; F.src[2]=&V; if (mask) F.src[3]=&M;
        void *uf = set_user(F, scale, causal, 0, tm);
        ggml_tensor O = tm ? strided(GGML_TYPE_F32, D, T, H, B, fwd, (long long)H*D, D, (long long)H*D*T) : mk(GGML_TYPE_F32, D, T, H, B, fwd);
        ggml_tensor L = mk(GGML_TYPE_F32, T, H, B, 1, fwd + nO);
        ggml_tensor BK = mk(GGML_TYPE_F32, 3*nO + nL, 1, 1, 1, bwd); BK.src[0]=&Q; BK.src[1]=&K; BK.src[2]=&V; BK.src[3]=&O; BK.src[4]=&G; BK.src[5]=&L; if (mask) BK.src[6]=&M;
        void *ub = set_user(BK, scale, causal, 0, tm);
        if (cpu) { ggrad_flash_attn(&F, 0, 1, uf); ggrad_flash_attn_back(&BK, 0, 1, ub); }
        else { ggrad_cuda_flash_attn(&F, st, nullptr); ggrad_cuda_flash_attn_back(&BK, st, nullptr); }
    }
    layouts out; std::vector<float> *dst[4] = {&out.fwd_h, &out.bwd_h, &out.fwd_t, &out.bwd_t};
    if (!cpu) { CK(cudaStreamSynchronize(st)); CK(cudaGetLastError()); }
    for (int i = 0; i < 4; i++) {
        dst[i]->resize(sizes[i]);
        if (cpu) { memcpy(dst[i]->data(), buf[i], sizes[i]*4); free(buf[i]); }
        else { CK(cudaMemcpy(dst[i]->data(), buf[i], sizes[i]*4, cudaMemcpyDeviceToHost)); cudaFree(buf[i]); }
    }
    return out;
}
// the number of elements where the token-major results differ from the head-major ones moved (0: the same bits)
static size_t layout_mismatches(const layouts &r, int B, int H, int T, int D) {
    const size_t nO = (size_t)D*T*H*B; size_t bad = 0;
    for (int b = 0; b < B; b++) for (int h = 0; h < H; h++) for (int t = 0; t < T; t++) for (int c = 0; c < D; c++) {
        const size_t head = (((size_t)b*H + h)*T + t)*D + c, token = (((size_t)b*T + t)*H + h)*D + c;
        bad += memcmp(&r.fwd_h[head], &r.fwd_t[token], 4) != 0;
        for (int part = 0; part < 3; part++)
            bad += memcmp(&r.bwd_h[part*nO + head], &r.bwd_t[(((size_t)b*T + t)*3 + part)*H*D + (size_t)h*D + c], 4) != 0;
    }
    bad += memcmp(r.fwd_h.data() + nO, r.fwd_t.data() + nO, (size_t)T*H*B*4) != 0;   // L
    bad += memcmp(r.bwd_h.data() + 3*nO, r.bwd_t.data() + 3*nO, (size_t)T*H*B*4) != 0;   // D
    return bad;
}
// the token-major layout of q, k, v the heads of one fused qkv: CPU and GPU each against their head-major results
// (the same bits, moved), the GPU's against the CPU's at tol; with timing, both layouts' times
static void run_token_major(const char *name, ggml_type type, int B, int H, int T, int D, int causal, int use_mask, float tol, bool timing = false) {
    std::mt19937 rng(2); std::normal_distribution<float> nd;
    auto rnd = [&](size_t n) { std::vector<float> v(n); for (auto &x : v) x = nd(rng); return v; };
    auto qkvf = rnd((size_t)B*T*3*H*D), gf = rnd((size_t)B*T*H*D);
    std::vector<float> maskf;
    if (use_mask) { maskf = rnd((size_t)B*T*T); for (size_t i = 0; i < maskf.size(); i += 7) maskf[i] = -INFINITY; for (int j = 0; j < T; j++) maskf[(size_t)2*T + j] = -INFINITY; }
    const size_t es = type == GGML_TYPE_F32 ? 4 : 2;
    std::vector<uint16_t> qkvh; const void *qkvd = qkvf.data();
    if (type != GGML_TYPE_F32) { qkvh = to_half(qkvf, type); qkvd = qkvh.data(); }
    const float scale = 1.0f / sqrtf((float)D);
    cudaStream_t st; CK(cudaStreamCreate(&st));
    layouts c = both_layouts(true, type, B, H, T, D, qkvd, gf.data(), use_mask ? maskf.data() : nullptr, scale, causal, st);
    void *qkvg = dev(qkvd, qkvf.size()*es); float *gg = (float*)dev(gf.data(), gf.size()*4), *mg = use_mask ? (float*)dev(maskf.data(), maskf.size()*4) : nullptr;
    layouts g = both_layouts(false, type, B, H, T, D, qkvg, gg, mg, scale, causal, st);
    const size_t nO = (size_t)D*T*H*B, nL = (size_t)T*H*B;
    const size_t bad_c = layout_mismatches(c, B, H, T, D), bad_g = layout_mismatches(g, B, H, T, D);
    const double eo = rel(g.fwd_t.data(), c.fwd_t.data(), nO), el = rel(g.fwd_t.data() + nO, c.fwd_t.data() + nO, nL);
    const double eg = rel(g.bwd_t.data(), c.bwd_t.data(), 3*nO), ed = rel(g.bwd_t.data() + 3*nO, c.bwd_t.data() + 3*nO, nL);
    const bool ok = bad_c == 0 && bad_g == 0 && eo < tol && el < tol && eg < tol && ed < tol;
    failures += !ok;
    printf("%-4s %-22s B%d H%d T%d D%d causal%d mask%d token-major: O %.1e L %.1e dqkv %.1e D %.1e, unlike head-major: cpu %zu gpu %zu %s\n",
           ok ? "ok" : "FAIL", name, B, H, T, D, causal, use_mask, eo, el, eg, ed, bad_c, bad_g, ok ? "" : "<<<<");
    if (timing) {
        const long long W = 3LL*H*D, nOl = (long long)nO, nLl = (long long)nL;
        ggml_tensor Q = strided(type, D, T, H, B, qkvg, W, D, W*T), K = strided(type, D, T, H, B, (char*)qkvg + es*H*D, W, D, W*T),
                    V = strided(type, D, T, H, B, (char*)qkvg + es*2*H*D, W, D, W*T), G = strided(GGML_TYPE_F32, D, T, H, B, gg, (long long)H*D, D, (long long)H*D*T);
        float *fg, *bg; CK(cudaMalloc(&fg, (nOl + nLl)*4)); CK(cudaMalloc(&bg, (3*nOl + nLl)*4));
        cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
        for (int tm = 0; tm < 2; tm++) {
            ggml_tensor F = mk(GGML_TYPE_F32, nOl + nLl, 1, 1, 1, fg); F.src[0]=&Q; F.src[1]=&K; F.src[2]=&V; set_user(F, scale, causal, 0, tm);
            ggml_tensor O = tm ? strided(GGML_TYPE_F32, D, T, H, B, fg, (long long)H*D, D, (long long)H*D*T) : mk(GGML_TYPE_F32, D, T, H, B, fg);
            ggml_tensor L = mk(GGML_TYPE_F32, T, H, B, 1, fg + nOl);
            ggml_tensor BK = mk(GGML_TYPE_F32, 3*nOl + nLl, 1, 1, 1, bg); BK.src[0]=&Q; BK.src[1]=&K; BK.src[2]=&V; BK.src[3]=&O; BK.src[4]=&G; BK.src[5]=&L; set_user(BK, scale, causal, 0, tm);
            for (int w = 0; w < 3; w++) { ggrad_cuda_flash_attn(&F, st, nullptr); ggrad_cuda_flash_attn_back(&BK, st, nullptr); }
            const int n = 20; float ms_f, ms_b;
            cudaEventRecord(a, st); for (int i = 0; i < n; i++) ggrad_cuda_flash_attn(&F, st, nullptr); cudaEventRecord(b, st); cudaEventSynchronize(b); cudaEventElapsedTime(&ms_f, a, b);
            cudaEventRecord(a, st); for (int i = 0; i < n; i++) ggrad_cuda_flash_attn_back(&BK, st, nullptr); cudaEventRecord(b, st); cudaEventSynchronize(b); cudaEventElapsedTime(&ms_b, a, b);
            printf("     time, q k v heads of qkv, %s: forward %.3f ms, backward %.3f ms\n", tm ? "token-major (joined)" : "head-major", ms_f/n, ms_b/n);
        }
        CK(cudaGetLastError()); cudaFree(fg); cudaFree(bg);
    }
    cudaFree(qkvg); cudaFree(gg); if (mg) cudaFree(mg); cudaStreamDestroy(st);
}
int main(int argc, char **argv) {
    ggrad_kernels_isa(0);
    int err = ggrad_flash_attn_load(); printf("load: %d\n", err); if (err) return 1;
    const ggml_type H16 = GGML_TYPE_F16, BF = GGML_TYPE_BF16, F32 = GGML_TYPE_F32;
    for (ggml_type t : {H16, BF}) {
        const char *n = t == H16 ? "f16" : "bf16"; float tol = t == H16 ? 5e-3f : 3e-2f;
        run(n, t, 2, 3, 3, 37, 37, 33, 33, 0, 0, 0, tol);
        run(n, t, 2, 3, 3, 37, 37, 33, 33, 1, 0, 0, tol);
        run(n, t, 2, 4, 2, 70, 130, 64, 48, 0, 1, 0, tol);
        run(n, t, 2, 4, 2, 130, 70, 64, 64, 1, 1, 0, tol);
        run(n, t, 1, 2, 2, 200, 200, 128, 128, 1, 0, 0, tol);
        run(n, t, 1, 2, 1, 100, 100, 256, 200, 1, 0, 0, tol);
        run(n, t, 2, 2, 2, 64, 64, 16, 16, 0, 0, 2, tol);
        run(n, t, 1, 1, 1, 1, 5, 64, 64, 0, 0, 0, tol);
    }
    run("f32", F32, 2, 3, 3, 37, 37, 33, 33, 1, 1, 0, 1e-4f);
    run("f32", F32, 2, 4, 2, 70, 130, 64, 48, 0, 1, 0, 1e-4f);
    run("f32", F32, 1, 2, 1, 65, 65, 256, 256, 1, 0, 0, 1e-4f);
    for (ggml_type t : {H16, BF}) {
        const char *n = t == H16 ? "f16" : "bf16"; float tol = t == H16 ? 5e-3f : 3e-2f;
        run_token_major(n, t, 2, 3, 70, 64, 1, 0, tol);
        run_token_major(n, t, 2, 3, 37, 33, 0, 1, tol);
        run_token_major(n, t, 1, 2, 130, 128, 1, 1, tol);
        run_token_major(n, t, 2, 2, 5, 64, 0, 0, tol);
    }
    run_token_major("f32", F32, 2, 3, 37, 33, 1, 1, 1e-4f);
    run_token_major("f32", F32, 1, 2, 70, 64, 0, 0, 1e-4f);
    if (argc > 1) {
        run("f16 big-GPT", H16, 32, 8, 8, 256, 256, 64, 64, 1, 0, 0, 5e-3f, true);
        run("bf16 big-GPT", BF, 32, 8, 8, 256, 256, 64, 64, 1, 0, 0, 3e-2f, true);
        run_token_major("f16 big-GPT", H16, 32, 8, 256, 64, 1, 0, 5e-3f, true);
        run("bf16 T1024", BF, 4, 8, 8, 1024, 1024, 64, 64, 1, 0, 0, 3e-2f, true);
        run("bf16 T1024 D128", BF, 4, 8, 8, 1024, 1024, 128, 128, 0, 0, 0, 3e-2f, true);
    }
    printf("%d failures\n", failures);
    return failures != 0;
}
