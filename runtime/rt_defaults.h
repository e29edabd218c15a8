/*
 * The built-in default kernels of libmoetune, generated at build time by
 * runtime/tools/embed_defaults.c from the templates (through mt_gen, which
 * libmoetune itself does not link): every family's default variants as
 * variant text plus their amalgamated CUDA source. The sources of one
 * family share a long prefix (the inlined device headers), stored once;
 * after it and one line of their own (the #line naming the variant), the
 * variants of a pipeline with device code of its own share that header's
 * text (a "part", stored once too): source = family prefix + head + part +
 * suffix.
 *
 * The variants were enumerated for MT_RT_DEFAULTS_ARCH, the target with the
 * most valid defaults (sm_90a also has the fp8 ones, and every default tile
 * fits sm_80's shared memory); the runtime retargets them to the GPU it runs
 * on (arch is a compile option, not part of the source), refuses what that
 * GPU cannot run (mt_moe_quant_supported) and compiles the rest with NVRTC
 * on first use.
 */
#ifndef MT_RUNTIME_RT_DEFAULTS_H
#define MT_RUNTIME_RT_DEFAULTS_H

#include <stddef.h>

#define MT_RT_DEFAULTS_ARCH "sm_90a"

typedef struct mt_rt_default_family {
    const char *family;          /* "grouped_gemm" */
    const char *template_hash;   /* mt_gen_template_hash of the family */
    const char *source_prefix;   /* shared by every variant of the family */
} mt_rt_default_family;

typedef struct mt_rt_default_variant {
    const char *text;            /* mt_variant_format text */
    int family;                  /* index into mt_rt_default_families */
    const char *source_head;     /* its text between the family prefix and the part */
    int part;                    /* index into mt_rt_default_parts ("" for none) */
    const char *source_suffix;   /* source = family prefix + head + part + this */
} mt_rt_default_variant;

extern const mt_rt_default_family mt_rt_default_families[];
extern const size_t mt_rt_default_family_count;
extern const char *const mt_rt_default_parts[];
extern const size_t mt_rt_default_part_count;
extern const mt_rt_default_variant mt_rt_default_variants[];
extern const size_t mt_rt_default_variant_count;
/* sha256 over "family=hash\n" lines of every family, sorted by family: the
 * template hash a database provenance is compared with. */
extern const char mt_rt_templates_hash[65];

#endif
