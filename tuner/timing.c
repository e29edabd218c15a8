/*
 * GPU timing with graphs, L2 flushes and medians (see timing.h).
 */
#include "tuner/timing.h"

#include <stdlib.h>
#include <string.h>

#include "common/cuda_driver.h"
#include "common/util.h"

mt_status mt_timer_init(mt_timer *t, size_t flush_bytes, int warmup, int reps, char *msg,
                        size_t msg_size)
{
    mt_status st = MT_OK;
    memset(t, 0, sizeof *t);
    t->warmup = warmup;
    t->reps = reps < 1 ? 1 : reps;
    t->flush_bytes = flush_bytes;
    MT_CU_TRY(mt_cu.cuStreamCreate(&t->stream, CU_STREAM_NON_BLOCKING), msg, msg_size);
    MT_CU_TRY(mt_cu.cuEventCreate(&t->start, CU_EVENT_DEFAULT), msg, msg_size);
    MT_CU_TRY(mt_cu.cuEventCreate(&t->stop, CU_EVENT_DEFAULT), msg, msg_size);
    if (flush_bytes)
        MT_CU_TRY(mt_cu.cuMemAlloc(&t->flush, flush_bytes), msg, msg_size);
    return MT_OK;
fail:
    mt_timer_free(t);
    return st;
}

void mt_timer_free(mt_timer *t)
{
    if (!t)
        return;
    if (t->flush)
        mt_cu.cuMemFree(t->flush);
    if (t->start)
        mt_cu.cuEventDestroy(t->start);
    if (t->stop)
        mt_cu.cuEventDestroy(t->stop);
    if (t->stream)
        mt_cu.cuStreamDestroy(t->stream);
    memset(t, 0, sizeof *t);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double mt_sort_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

mt_status mt_time(mt_timer *t, mt_enqueue_fn fn, void *ctx, mt_timing *out, char *msg,
                  size_t msg_size)
{
    mt_status st = MT_OK;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    double *samples = calloc((size_t)t->reps, sizeof *samples);
    if (!samples)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    memset(out, 0, sizeof *out);
    /* Capture; work that cannot be captured is timed by direct launches. */
    if (mt_cu.cuStreamBeginCapture(t->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS) {
        mt_status cst = fn(ctx, t->stream, msg, msg_size);
        CUresult r = mt_cu.cuStreamEndCapture(t->stream, &graph);
        if (cst == MT_OK && r == CUDA_SUCCESS && graph &&
            mt_cu.cuGraphInstantiate(&exec, graph, 0) == CUDA_SUCCESS)
            out->graph = 1;
    }
    for (int i = -t->warmup; i < t->reps; i++) {
        if (t->flush)
            MT_CU_TRY(mt_cu.cuMemsetD8Async(t->flush, (unsigned char)i, t->flush_bytes, t->stream),
                      msg, msg_size);
        MT_CU_TRY(mt_cu.cuEventRecord(t->start, t->stream), msg, msg_size);
        if (exec)
            MT_CU_TRY(mt_cu.cuGraphLaunch(exec, t->stream), msg, msg_size);
        else if ((st = fn(ctx, t->stream, msg, msg_size)))
            goto fail;
        MT_CU_TRY(mt_cu.cuEventRecord(t->stop, t->stream), msg, msg_size);
        MT_CU_TRY(mt_cu.cuEventSynchronize(t->stop), msg, msg_size);
        float ms = 0;
        MT_CU_TRY(mt_cu.cuEventElapsedTime(&ms, t->start, t->stop), msg, msg_size);
        if (i >= 0)
            samples[i] = ms * 1e3;
    }
    out->median_us = mt_sort_median(samples, t->reps);
    out->min_us = samples[0];
    out->max_us = samples[t->reps - 1];
fail:
    if (exec)
        mt_cu.cuGraphExecDestroy(exec);
    if (graph)
        mt_cu.cuGraphDestroy(graph);
    free(samples);
    return st;
}
