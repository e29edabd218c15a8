/*
 * A tiny fork-join helper for the oracle: workers pull task indices from an
 * atomic counter, so uneven tasks balance themselves.
 *
 * May call: libc, pthreads.
 */
#define _POSIX_C_SOURCE 200809L
#include "oracle/oracle_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define MTO_MAX_WORKERS 256

typedef struct job {
    int64_t ntasks;
    void (*fn)(void *ctx, int64_t task, int worker);
    void *ctx;
    atomic_llong next;
} job;

typedef struct worker_arg {
    job *j;
    int id;
} worker_arg;

static void drain(job *j, int id)
{
    for (;;) {
        long long i = atomic_fetch_add(&j->next, 1);
        if (i >= j->ntasks)
            return;
        j->fn(j->ctx, (int64_t)i, id);
    }
}

static void *worker_main(void *arg)
{
    worker_arg *w = arg;
    drain(w->j, w->id);
    return NULL;
}

int mto_workers(int64_t ntasks)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > MTO_MAX_WORKERS)
        n = MTO_MAX_WORKERS;
    if (ntasks < n)
        n = ntasks < 1 ? 1 : (long)ntasks;
    return (int)n;
}

void mto_parallel(int64_t ntasks, int workers, void (*fn)(void *ctx, int64_t task, int worker),
                  void *ctx)
{
    job j = {.ntasks = ntasks, .fn = fn, .ctx = ctx};
    atomic_init(&j.next, 0);
    pthread_t tids[MTO_MAX_WORKERS];
    worker_arg args[MTO_MAX_WORKERS];
    int started[MTO_MAX_WORKERS] = {0};
    if (workers > MTO_MAX_WORKERS)
        workers = MTO_MAX_WORKERS;
    for (int w = 1; w < workers; w++) {
        args[w] = (worker_arg){&j, w};
        started[w] = pthread_create(&tids[w], NULL, worker_main, &args[w]) == 0;
    }
    drain(&j, 0);
    for (int w = 1; w < workers; w++)
        if (started[w])
            pthread_join(tids[w], NULL);
}
