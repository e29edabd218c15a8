/*
 * The preset table (see presets.h). Shapes from the models' published configs.
 */
#include "tuner/presets.h"

#include <string.h>

static const mt_preset presets[] = {
    {"mixtral-8x7b", 8, 2, 4096, 14336, MT_QUANT_NONE, "Mixtral-8x7B"},
    {"mixtral-8x22b", 8, 2, 6144, 16384, MT_QUANT_NONE, "Mixtral-8x22B"},
    {"dsv2-lite", 64, 6, 2048, 1408, MT_QUANT_NONE, "DeepSeek-V2-Lite"},
    {"dsv3", 256, 8, 7168, 2048, MT_QUANT_FP8_BLOCK, "DeepSeek-V3/R1 (use --tp 8: N=256)"},
    {"qwen3-30b-a3b", 128, 8, 2048, 768, MT_QUANT_NONE, "Qwen3-30B-A3B"},
    {"qwen3-235b-a22b", 128, 8, 4096, 1536, MT_QUANT_NONE, "Qwen3-235B-A22B"},
    {"gpt-oss-120b", 128, 4, 2880, 2880, MT_QUANT_NONE, "gpt-oss-120b (bf16 experts)"},
    {"llama4-scout", 16, 1, 5120, 8192, MT_QUANT_NONE, "Llama-4-Scout-17B-16E"},
    {NULL, 0, 0, 0, 0, MT_QUANT_NONE, NULL},
};

const mt_preset *mt_presets(void) { return presets; }

const mt_preset *mt_preset_find(const char *name)
{
    for (const mt_preset *p = presets; p->name; p++)
        if (!strcmp(p->name, name))
            return p;
    return NULL;
}
