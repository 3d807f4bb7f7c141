// GPU time per kernel, with no synchronisation between nodes: CUPTI's activity records of every kernel the
// process launches (CUDA graphs' kernels one by one), summed by kernel name. benchmarks/profile_kernels.py
// loads it with ctypes around the steps it measures; the GPU runs the step exactly as it does unprofiled.
//
//   gcc -O2 -shared -fPIC -I $CUDA/include -o kernel_trace.so benchmarks/kernel_trace.c -L $CUDA/lib64 -lcupti
//
// kernel_trace_start() enables the records; kernel_trace_stop(path) flushes them and writes one line a kernel
// name: total ns, launches, launches from CUDA graphs, name (tab separated), after a line with the span from the
// first kernel's start to the last end and one with the GPU's idle gaps between kernels (all of them, and those
// over 20 us: count and ns), which tell launch-bound stretches from host time between graphs.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#define MAX_NAMES 4096
#define MAX_INTERVALS (1u << 20)
#define BUFFER_BYTES (8u << 20)
#define LONG_GAP_NS 20000

static struct {
    char * name;
    uint64_t ns;
    uint64_t launches;
    uint64_t in_graphs;
} totals[MAX_NAMES];
static int n_names;
static uint64_t first_start = UINT64_MAX, last_end;
static uint64_t dropped;
static struct interval {
    uint64_t start, end;
} * intervals;
static size_t n_intervals;

static void add(const char * name, uint64_t start, uint64_t end, int in_graph) {
    if (intervals != NULL && n_intervals < MAX_INTERVALS) {
        intervals[n_intervals].start = start;
        intervals[n_intervals].end = end;
        n_intervals++;
    }
    if (start < first_start) {
        first_start = start;
    }
    if (end > last_end) {
        last_end = end;
    }
    for (int i = 0; i < n_names; i++) {
        if (strcmp(totals[i].name, name) == 0) {
            totals[i].ns += end - start;
            totals[i].launches++;
            totals[i].in_graphs += in_graph;
            return;
        }
    }
    if (n_names == MAX_NAMES) {
        dropped++;
        return;
    }
    totals[n_names].name = strdup(name);
    totals[n_names].ns = end - start;
    totals[n_names].launches = 1;
    totals[n_names].in_graphs = in_graph;
    n_names++;
}

static void CUPTIAPI buffer_requested(uint8_t ** buffer, size_t * size, size_t * max_records) {
    *buffer = (uint8_t *) aligned_alloc(8, BUFFER_BYTES);
    *size = BUFFER_BYTES;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t * buffer, size_t size,
                                      size_t valid) {
    (void) context;
    (void) stream;
    (void) size;
    CUpti_Activity * record = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 * k = (const CUpti_ActivityKernel10 *) record;
            add(k->name, k->start, k->end, k->graphId != 0);
        } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 * m = (const CUpti_ActivityMemcpy6 *) record;
            add("[memcpy]", m->start, m->end, m->graphId != 0);
        } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 * m = (const CUpti_ActivityMemset4 *) record;
            add("[memset]", m->start, m->end, m->graphId != 0);
        }
    }
    free(buffer);
}

// 0 on success, else CUPTI's error code
int kernel_trace_start(void) {
    intervals = (struct interval *) malloc(MAX_INTERVALS * sizeof(struct interval));
    CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r == CUPTI_SUCCESS) {
        r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    }
    if (r == CUPTI_SUCCESS) {
        r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
    }
    if (r == CUPTI_SUCCESS) {
        r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
    }
    return (int) r;
}

static int by_start(const void * a, const void * b) {
    const struct interval * x = (const struct interval *) a;
    const struct interval * y = (const struct interval *) b;
    return x->start < y->start ? -1 : (x->start > y->start ? 1 : 0);
}

int kernel_trace_stop(const char * path) {
    cuptiActivityFlushAll(1);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET);
    FILE * f = fopen(path, "w");
    if (f == NULL) {
        return -1;
    }
    fprintf(f, "#span\t%llu\t%llu\n", (unsigned long long) (n_names ? last_end - first_start : 0),
            (unsigned long long) dropped);
    uint64_t gaps = 0, long_gaps = 0, n_long = 0, reached = 0;
    if (intervals != NULL) {
        qsort(intervals, n_intervals, sizeof(struct interval), by_start);
    }
    for (size_t i = 0; i < n_intervals; i++) {
        if (i > 0 && intervals[i].start > reached) {
            const uint64_t gap = intervals[i].start - reached;
            gaps += gap;
            if (gap > LONG_GAP_NS) {
                long_gaps += gap;
                n_long++;
            }
        }
        if (intervals[i].end > reached) {
            reached = intervals[i].end;
        }
    }
    fprintf(f, "#gaps\t%llu\t%llu\t%llu\n", (unsigned long long) gaps, (unsigned long long) n_long,
            (unsigned long long) long_gaps);
    for (int i = 0; i < n_names; i++) {
        fprintf(f, "%llu\t%llu\t%llu\t%s\n", (unsigned long long) totals[i].ns,
                (unsigned long long) totals[i].launches, (unsigned long long) totals[i].in_graphs, totals[i].name);
    }
    fclose(f);
    return 0;
}
