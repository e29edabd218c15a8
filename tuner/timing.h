/*
 * Timing GPU work the way the tuner and the benchmarks agree to: a CUDA
 * graph of the enqueued work (so launch gaps of small M do not decide), an
 * L2 flush before every replay (weights are not served from cache), CUDA
 * events around each replay, warm-up, and the median of the repetitions.
 *
 * May call: the driver table.
 */
#ifndef MT_TUNER_TIMING_H
#define MT_TUNER_TIMING_H

#include <cuda.h>
#include "moetune/status.h"

/* Enqueue the work to time on `stream`; returns a status. */
typedef mt_status (*mt_enqueue_fn)(void *ctx, CUstream stream, char *msg, size_t msg_size);

typedef struct mt_timer {
    CUstream stream;
    CUevent start, stop;
    CUdeviceptr flush;       /* scratch written before each replay */
    size_t flush_bytes;
    int warmup, reps;
} mt_timer;

mt_status mt_timer_init(mt_timer *t, size_t flush_bytes, int warmup, int reps, char *msg,
                        size_t msg_size);
void mt_timer_free(mt_timer *t);

typedef struct mt_timing {
    double median_us, min_us, max_us;
    int graph;               /* 1 when timed as a graph replay */
} mt_timing;

/* Sorts v[0..n) ascending and returns its median (v[n / 2]); n >= 1. */
double mt_sort_median(double *v, int n);

/* Time fn: captured into a graph when possible (else launched directly). */
mt_status mt_time(mt_timer *t, mt_enqueue_fn fn, void *ctx, mt_timing *out, char *msg,
                  size_t msg_size);

#endif
