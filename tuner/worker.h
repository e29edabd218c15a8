/*
 * The tuning worker: runs in a child process (or in-process without
 * isolation), owns the backend (and so the GPU), measures candidates and
 * writes every result to the database as soon as it has it. It tells its
 * supervisor what it is doing through a pipe, one line per event:
 *   "C <M> <candidate>"  about to measure a candidate (in flight)
 *   "R"                  it came back measured (no longer in flight: a
 *                        failure to record it is not the kernel's)
 *   "D"                  the candidate is measured and recorded
 *   "S <sku>"            the GPU SKU (first line), for the database key
 * so that a fault or a hang can be pinned on the candidate in flight.
 */
#ifndef MT_TUNER_WORKER_H
#define MT_TUNER_WORKER_H

#include "moetune/tuner.h"
#include "tuner/backend.h"

/* Tune every M of o that is not finished in the database. report_fd < 0:
 * no supervisor. restarted: a worker of this run died before this one (the
 * M values it passes again go by without a word). */
mt_status mt_tune_worker(const mt_tune_opts *o, int report_fd, int restarted, char *sku /* out */,
                         size_t sku_size, char *msg, size_t msg_size);

/* The database key of o's problem under the backend's SKU. */
mt_status mt_tune_key(const mt_tune_opts *o, const char *sku, mt_db_key *key, char *msg,
                      size_t msg_size);

/* Texts of the marker candidates (no pipeline; reason: the run's id): an
 * M is finished; a run that tunes again (--retune, --retime) started an M,
 * so that a worker of that run restarted within the M resumes it, while a
 * later run forgets what an earlier one left there, finished or not. */
#define MT_TUNE_DONE_MARK "item-complete"
#define MT_TUNE_START_MARK "item-started"

/* Is a candidate's text one of the marks above? */
int mt_tune_is_mark(const char *text);

/* What the database holds at (key, M) for run run_id: rows, every row;
 * candidates, those not marks; done, a completion mark (with again: one of
 * run_id's, since a run that tunes again does every M over). */
typedef struct mt_tune_item_state {
    int rows, candidates, done;
} mt_tune_item_state;
mt_status mt_tune_item_state_of(mt_db *db, const mt_db_key *key, int64_t M, const char *run_id,
                                int again, mt_tune_item_state *out);
/* --retune or --retime: M values tuned by another run are done again. */
int mt_tune_again(const mt_tune_opts *o);

/* A candidate's text is "[default;]gemm1=A;gemm2=B[;launch=late]"; the
 * suffix: timed with its GEMMs reading nothing before the step ahead is
 * done (mt_moe_plan.launch_late). Does text end in it? */
#define MT_TUNE_LATE_SUFFIX ";launch=late"
int mt_tune_text_is_late(const char *text);

/* The reason recorded with a candidate whose time is the final round's
 * median of its new times (worker.c, final_round). */
#define MT_TUNE_FINAL_NOTE "final round: median of 3"

#endif
