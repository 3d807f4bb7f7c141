/* How many rows of b the product kernel (ggrad/ggml/csrc/matmul.c) should take as dot products
   (GEMV_ROWS_*) before packing a into panels wins: microseconds per product dst = b @ a^T, a [m, k] and
   b [n, k] both contiguous along k (a weight times n tokens), by dot products, by packed tiles and by
   GGML's mul_mat, at one thread, for each instruction set this CPU has. Best of 7 rounds, each the mean
   of enough calls to fill ~20 ms. The operands stay in cache between calls (a decoder's weights are
   read from L3 or memory: the dot products' advantage is larger there, packing reads a twice).

   cc -O3 -fno-math-errno -I $GGML/include benchmarks/matmul_rows.c -o /tmp/matmul_rows \
      -L $GGML/lib -Wl,-rpath,$GGML/lib -lggml -lggml-base -lggml-cpu -lpthread
   /tmp/matmul_rows [m k n_max [n_min]]

   with GGML = the libggml package (python -c "import libggml, os; print(os.path.dirname(libggml.__file__))").
   The kernel is compiled in twice (dot products for every n, and never), so one binary runs both. */

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ggml-cpu.h"
#include "ggml.h"

#define GEMV_ROWS_AVX512 1000000
#define GEMV_ROWS_AVX2 1000000
#define GEMV_ROWS_GENERIC 1000000
#define ggrad_matmul_f32 matmul_dots
#include "../ggrad/ggml/csrc/matmul.c"
#undef ggrad_matmul_f32
#undef GEMV_ROWS_AVX512
#undef GEMV_ROWS_AVX2
#undef GEMV_ROWS_GENERIC
#undef GEMV
#undef DEFINE_DOTS
#undef DEFINE_TILE
#undef MICROKERNEL
#undef DOTS_NB
#undef TRANSPOSE
#undef KC
#undef MC
/* the second copy's static names apart from the first's */
#define scratch_key scratch_key2
#define scratch_once scratch_once2
#define scratch_free scratch_free2
#define scratch_key_create scratch_key_create2
#define scratch scratch2
#define pack pack2
#define product product2
#define rows_along_k rows_along_k2
#define dot_products dot_products2
#define transpose8 transpose8_2
#define transpose4 transpose4_2
#define transpose_avx512 transpose_avx512_2
#define transpose_avx2 transpose_avx2_2
#define transpose_generic transpose_generic_2
#define kernel_for kernel_for2
#define tile16 tile16_2
#define tile8 tile8_2
#define tile4 tile4_2
#define dots16 dots16_2
#define dots8 dots8_2
#define dots4 dots4_2
#define tile_avx512 tile_avx512_2
#define tile_avx2 tile_avx2_2
#define tile_generic tile_generic_2
#define gemv_avx512 gemv_avx512_2
#define gemv_avx2 gemv_avx2_2
#define gemv_generic gemv_generic_2
#define operand operand2
#define kernel kernel2
#define GEMV_ROWS_AVX512 0
#define GEMV_ROWS_AVX2 0
#define GEMV_ROWS_GENERIC 0
#define ggrad_matmul_f32 matmul_packed
#include "../ggrad/ggml/csrc/matmul.c"
#include "../ggrad/ggml/csrc/isa.c"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

typedef void (*run_fn)(void *);

/* microseconds per call of fn(arg): best of 7 rounds of ~20 ms (as many calls as the first took into 20 ms) */
static double time_us(run_fn fn, void *arg) {
    double t0 = now();
    fn(arg);
    double once = now() - t0;
    int calls = once > 0.02 ? 1 : (int)(0.02 / (once > 1e-7 ? once : 1e-7));
    double best = 1e30;
    for (int round = 0; round < 7; round++) {
        double t0 = now();
        for (int c = 0; c < calls; c++)
            fn(arg);
        double us = (now() - t0) / calls * 1e6;
        best = us < best ? us : best;
    }
    return best;
}

struct job {
    struct ggml_tensor *dst;
    void (*kernel)(struct ggml_tensor *, int, int, void *);
    struct ggml_cgraph *graph;
    struct ggml_cplan plan;
};

static void run_kernel(void *p) {
    struct job *j = p;
    j->kernel(j->dst, 0, 1, NULL);
}

static void run_ggml(void *p) {
    struct job *j = p;
    ggml_graph_compute(j->graph, &j->plan);
}

int main(int argc, char **argv) {
    int64_t m = argc > 1 ? atoll(argv[1]) : 768, k = argc > 2 ? atoll(argv[2]) : 256;
    int n_max = argc > 3 ? atoi(argv[3]) : 48, n_min = argc > 4 ? atoi(argv[4]) : 1;
    struct ggml_init_params params = {(size_t)(2 * m * k + 4 * n_max * (k + m)) * 4 + 64 * 1024 * 1024, NULL, false};
    struct ggml_context *ctx = ggml_init(params);
    struct ggml_tensor *a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, m);
    for (int64_t i = 0; i < m * k; i++)
        ((float *)a->data)[i] = (float)rand() / RAND_MAX - 0.5f;
    const char *names[] = {"", "generic", "avx2", "avx512"};
    printf("a [%lld, %lld] (m, k), b [n, k]: us per product at one thread\n", (long long)m, (long long)k);
    printf("%4s %8s %10s %10s %10s %14s\n", "n", "isa", "dots", "packed", "mul_mat", "packed GF/s");
    for (int n = n_min; n <= n_max; n += n < 8 ? 1 : n < 24 ? 2 : 4) {
        struct ggml_tensor *b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n);
        for (int64_t i = 0; i < n * k; i++)
            ((float *)b->data)[i] = (float)rand() / RAND_MAX - 0.5f;
        struct ggml_tensor *dst = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, m, n);
        dst->src[0] = a;
        dst->src[1] = b;
        struct job job = {dst, NULL, NULL, {0}};
        job.graph = ggml_new_graph(ctx);
        ggml_build_forward_expand(job.graph, ggml_mul_mat(ctx, a, b));
        job.plan = ggml_graph_plan(job.graph, 1, NULL);
        job.plan.work_data = malloc(job.plan.work_size + 1);
        double mm = time_us(run_ggml, &job);
        for (int isa = ggrad_kernels_isa(ISA_BEST); isa >= ISA_GENERIC; isa--) {
            ggrad_kernels_isa(isa);
            job.kernel = matmul_dots;
            double dots = time_us(run_kernel, &job);
            job.kernel = matmul_packed;
            double packed = time_us(run_kernel, &job);
            printf("%4d %8s %10.1f %10.1f %10.1f %14.1f\n", n, names[isa], dots, packed, mm,
                   2.0 * m * n * k / packed * 1e-3);
        }
        ggrad_kernels_isa(ISA_BEST);
        free(job.plan.work_data);
        fflush(stdout);
    }
    ggml_free(ctx);
    return 0;
}
