/*
 * Model presets: the MoE layer shapes of popular models, so that a user can
 * say `--preset qwen3-30b-a3b` instead of E, topk, K and N. N is the
 * intermediate size per shard (before tensor parallelism; divide by --tp).
 */
#ifndef MT_TUNER_PRESETS_H
#define MT_TUNER_PRESETS_H

#include <stdint.h>
#include "moetune/problem.h"

typedef struct mt_preset {
    const char *name;
    int64_t E, topk, K, N;
    mt_quant_mode quant;     /* as the checkpoint ships */
    const char *note;
} mt_preset;

/* NULL-terminated table. */
const mt_preset *mt_presets(void);
/* Find by name; NULL if unknown. */
const mt_preset *mt_preset_find(const char *name);

#endif
