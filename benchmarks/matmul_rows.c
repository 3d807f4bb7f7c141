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
   The kernel's source is compiled in, so that its product() runs either method for any n. */

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ggml-cpu.h"
#include "ggml.h"

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
    int gemv;   /* the method: dot products (1) or packed tiles (0) */
    struct ggml_cgraph *graph;
    struct ggml_cplan plan;
};

/* ggrad_matmul_f32 at one thread, by the method j->gemv */
static void run_kernel(void *p) {
    struct job *j = p;
    const struct ggml_tensor *a = j->dst->src[0], *b = j->dst->src[1];
    struct operand ao = {a->data, a->nb[1], a->nb[0]}, bo = {b->data, b->nb[1], b->nb[0]};
    product(kernel_for(ggrad_isa), ao, bo, a->ne[0], j->dst->data, a->ne[1], 0, a->ne[1], 0, b->ne[1], j->gemv);
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
        struct job job = {dst, 0, NULL, {0}};
        job.graph = ggml_new_graph(ctx);
        ggml_build_forward_expand(job.graph, ggml_mul_mat(ctx, a, b));
        job.plan = ggml_graph_plan(job.graph, 1, NULL);
        job.plan.work_data = malloc(job.plan.work_size + 1);
        double mm = time_us(run_ggml, &job);
        for (int isa = ggrad_kernels_isa(ISA_BEST); isa >= ISA_GENERIC; isa--) {
            ggrad_kernels_isa(isa);
            job.gemv = 1;
            double dots = time_us(run_kernel, &job);
            job.gemv = 0;
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
