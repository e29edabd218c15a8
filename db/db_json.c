/*
 * JSON layouts: the moetune export/import of a whole database, and vLLM's
 * per-device fused-MoE config files. Reads and writes go through the public
 * iteration and the merger (db_maint.c), so an import follows mt_db_merge's
 * rules (the lower stored time wins).
 */
#define _POSIX_C_SOURCE 200809L
#include "db/db_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"

#define JSON_FORMAT "moetune-db"
#define JSON_FORMAT_VERSION 1

/* ---- export ---- */

typedef struct export_ctx {
    mt_json_writer w;
    int images;
    mt_db *db;
    mt_status st;   /* a kernel that does not match its hashes */
} export_ctx;

static void w_time(mt_json_writer *w, const char *k, double t)
{
    mt_jw_key(w, k);
    if (t < 0)
        mt_jw_null(w);
    else
        mt_jw_number(w, t);
}

static void w_str(mt_json_writer *w, const char *k, const char *v)
{
    mt_jw_key(w, k);
    mt_jw_string(w, v);
}

static void w_int(mt_json_writer *w, const char *k, int64_t v)
{
    mt_jw_key(w, k);
    mt_jw_int(w, v);
}

static int export_kernel(const mt_db_kernel *k, void *ctx)
{
    export_ctx *x = ctx;
    mt_json_writer *w = &x->w;
    /* A backup whose import would refuse it is no backup: a kernel read
     * with its image must match its hashes. */
    if (x->images && (x->st = mt_db__check_kernel(x->db, k)))
        return 1;
    char text[4096];
    if (mt_variant_format(&k->variant, text, sizeof text) != MT_OK)
        text[0] = '\0';
    mt_jw_begin_object(w);
    w_str(w, "name", k->variant.name);
    w_str(w, "arch", k->variant.arch);
    w_str(w, "variant", text);
    w_int(w, "is_ptx", k->is_ptx);
    w_str(w, "template_hash", k->template_hash);
    w_str(w, "source_sha256", k->source_sha256);
    mt_jw_key(w, "source");
    mt_jw_string_n(w, k->source, k->source_len);
    mt_jw_key(w, "image_sha256");
    if (k->image_sha256[0])
        mt_jw_string(w, k->image_sha256);
    else
        mt_jw_null(w);
    if (x->images && k->image) {
        mt_buf b = {0};
        mt_base64_encode(&b, k->image, k->image_len);
        mt_jw_key(w, "image_base64");
        mt_jw_string_n(w, b.data ? b.data : "", b.len);
        if (b.oom)
            w->st = MT_ERR_NO_MEMORY;
        mt_buf_free(&b);
    }
    mt_jw_end_object(w);
    return w->st != MT_OK;
}

static int export_entry(const mt_db_entry *e, void *ctx)
{
    mt_json_writer *w = &((export_ctx *)ctx)->w;
    char key[512], pipe[MT_DB_PIPELINE_TEXT_MAX];
    mt_db_key_format(&e->key, key, sizeof key);
    mt_db_pipeline_format(&e->pipeline, pipe, sizeof pipe);
    const mt_db_provenance *p = &e->prov;
    mt_jw_begin_object(w);
    w_str(w, "sku", e->key.sku);
    w_str(w, "key", key);
    w_int(w, "M", e->M);
    w_str(w, "pipeline", pipe);
    w_time(w, "time_us", e->time_us);
    w_time(w, "default_time_us", e->default_time_us);
    w_time(w, "cublas_time_us", e->cublas_time_us);
    mt_jw_key(w, "rel_err");
    mt_jw_number(w, e->rel_err);
    w_int(w, "recorded", e->recorded);
    mt_jw_key(w, "provenance");
    mt_jw_begin_object(w);
    w_str(w, "sku", p->sku);
    w_str(w, "cc", p->cc);
    w_int(w, "sm_count", p->sm_count);
    w_int(w, "mem_clock_khz", p->mem_clock_khz);
    w_str(w, "driver_version", p->driver_version);
    w_str(w, "cuda_version", p->cuda_version);
    w_str(w, "nvrtc_version", p->nvrtc_version);
    w_str(w, "moetune_version", p->moetune_version);
    w_str(w, "template_hash", p->template_hash);
    w_int(w, "created", p->created);
    mt_jw_end_object(w);
    mt_jw_end_object(w);
    return w->st != MT_OK;
}

static int export_candidate(const mt_db_candidate *c, void *ctx)
{
    mt_json_writer *w = &((export_ctx *)ctx)->w;
    char key[512];
    mt_db_key_format(&c->key, key, sizeof key);
    mt_jw_begin_object(w);
    w_str(w, "sku", c->key.sku);
    w_str(w, "key", key);
    w_int(w, "M", c->M);
    w_str(w, "pipeline", c->pipeline);
    w_str(w, "status", c->ok ? "ok" : "rejected");
    w_time(w, "time_us", c->time_us);
    w_time(w, "rel_err", c->rel_err);
    w_str(w, "reason", c->reason ? c->reason : "");
    w_int(w, "recorded", c->recorded);
    mt_jw_end_object(w);
    return w->st != MT_OK;
}

/* One writer of the six vLLM fields serves both layouts. */
static void write_vllm_fields(mt_json_writer *w, const mt_db_vllm_config *c)
{
    w_int(w, "BLOCK_SIZE_M", c->block_m);
    w_int(w, "BLOCK_SIZE_N", c->block_n);
    w_int(w, "BLOCK_SIZE_K", c->block_k);
    w_int(w, "GROUP_SIZE_M", c->group_m);
    w_int(w, "num_warps", c->num_warps);
    w_int(w, "num_stages", c->num_stages);
}

static int export_reference(const mt_db_vllm_config *c, void *ctx)
{
    mt_json_writer *w = &((export_ctx *)ctx)->w;
    mt_jw_begin_object(w);
    w_str(w, "device", c->device);
    w_int(w, "E", c->E);
    w_int(w, "N", c->N);
    w_str(w, "selector", c->selector);
    w_int(w, "M", c->M);
    write_vllm_fields(w, c);
    mt_jw_end_object(w);
    return w->st != MT_OK;
}

static mt_status write_output(mt_db *db, const char *path, mt_json_writer *w)
{
    mt_buf_append(&w->buf, "\n", 1);
    if (w->buf.oom)
        return mt_db__fail(db, MT_ERR_NO_MEMORY, "out of memory writing JSON");
    if (strcmp(path, "-") == 0) {
        if (fwrite(w->buf.data, 1, w->buf.len, stdout) != w->buf.len || fflush(stdout))
            return mt_db__fail(db, MT_ERR_IO, "cannot write JSON to stdout");
        return MT_OK;
    }
    char msg[512];
    if (mt_file_write_atomic(path, w->buf.data, w->buf.len, msg, sizeof msg) != MT_OK)
        return mt_db__fail(db, MT_ERR_IO, "%s", msg);
    return MT_OK;
}

mt_status mt_db_export_json(mt_db *db, const char *path, int flags)
{
    if (!db || !path)
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "export: no output path")
                  : MT_ERR_INVALID_ARG;
    if (strcmp(path, "-") != 0 && mt_db__own_file(db, path))
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "export: %s is the database itself (or one of "
                           "its files); nothing was written", path);
    export_ctx x = {.images = (flags & MT_DB_JSON_IMAGES) != 0, .db = db};
    mt_json_writer *w = &x.w;
    w->pretty = (flags & MT_DB_JSON_PRETTY) != 0;
    mt_jw_begin_object(w);
    w_str(w, "format", JSON_FORMAT);
    w_int(w, "format_version", JSON_FORMAT_VERSION);
    w_int(w, "schema_version", MT_DB_SCHEMA_VERSION);
    mt_jw_key(w, "kernels");
    mt_jw_begin_array(w);
    mt_status st = mt_db_foreach_kernel(db, x.images, export_kernel, &x);
    if (!st && x.st) {   /* db->err names the kernel (and the file) */
        char why[sizeof db->err - 80];   /* room for what follows */
        mt_strlcpy(why, db->err, sizeof why);
        snprintf(db->err, sizeof db->err, "%s; the export wrote nothing (`moetune db verify` lists "
                 "what is damaged)", why);
        st = x.st;
    }
    mt_jw_end_array(w);
    mt_jw_key(w, "history");
    mt_jw_begin_array(w);
    if (!st)
        st = mt_db_foreach_entry(db, &(mt_db_filter){.history = 1}, export_entry, &x);
    mt_jw_end_array(w);
    mt_jw_key(w, "entries");
    mt_jw_begin_array(w);
    if (!st)
        st = mt_db_foreach_entry(db, NULL, export_entry, &x);
    mt_jw_end_array(w);
    mt_jw_key(w, "candidates");
    mt_jw_begin_array(w);
    if (!st)
        st = mt_db_foreach_candidate(db, export_candidate, &x);
    mt_jw_end_array(w);
    mt_jw_key(w, "references");
    mt_jw_begin_array(w);
    if (!st)
        st = mt_db_foreach_vllm_config(db, NULL, 0, 0, export_reference, &x);
    mt_jw_end_array(w);
    mt_jw_end_object(w);
    if (!st && mt_jw_finish(w) != MT_OK)
        st = mt_db__fail(db, w->st, "cannot write JSON (a value cannot be represented)");
    if (!st)
        st = write_output(db, path, w);
    mt_json_writer_free(w);
    return st;
}

/* ---- import ---- */

/* Field readers: on a missing or mistyped field they set the handle's
 * message with the JSON location and return 0. */
typedef struct jin {
    mt_db *db;
    const char *file, *section;
    size_t index;
    int named;   /* the message names the record already (jfail) */
} jin;

static int jfail(jin *j, const char *field, const char *what)
{
    mt_db__fail(j->db, MT_ERR_INVALID_ARG, "import %s: %s[%zu].%s: %s", j->file, j->section,
                j->index, field, what);
    j->named = 1;
    return 0;
}

static int j_str(jin *j, const mt_json *o, const char *f, char *out, size_t size)
{
    size_t n;
    const char *s = mt_json_str(mt_json_get(o, f), &n);
    if (!s)
        return jfail(j, f, "string expected");
    if (n >= size || strlen(s) != n)
        return jfail(j, f, "string too long or has a NUL");
    memcpy(out, s, n + 1);
    return 1;
}

static const char *j_strp(jin *j, const mt_json *o, const char *f, size_t *len)
{
    const char *s = mt_json_str(mt_json_get(o, f), len);
    if (!s)
        jfail(j, f, "string expected");
    return s;
}

static int j_i64(jin *j, const mt_json *o, const char *f, int64_t *out)
{
    return mt_json_int(mt_json_get(o, f), out) ? 1 : jfail(j, f, "integer expected");
}

static int j_int(jin *j, const mt_json *o, const char *f, int *out)
{
    int64_t x;
    if (!j_i64(j, o, f, &x))
        return 0;
    if (x < -2147483647 || x > 2147483647)
        return jfail(j, f, "integer out of range");
    *out = (int)x;
    return 1;
}

/* A time: a non-negative number, or null for "absent". */
static int j_time(jin *j, const mt_json *o, const char *f, double *out)
{
    const mt_json *v = mt_json_get(o, f);
    if (v && mt_json_type_of(v) == MT_JSON_NULL) {
        *out = MT_DB_NO_TIME;
        return 1;
    }
    if (!mt_json_num(v, out) || *out < 0)
        return jfail(j, f, "non-negative number or null expected");
    return 1;
}

static int j_key(jin *j, const mt_json *o, mt_db_key *k)
{
    char sku[MT_DB_SKU_MAX], msg[256];
    const char *text = j_strp(j, o, "key", NULL);
    if (!text || !j_str(j, o, "sku", sku, sizeof sku))
        return 0;
    if (mt_db_key_parse(text, sku, k, msg, sizeof msg) != MT_OK)
        return jfail(j, "key", msg);
    return 1;
}

static mt_status import_kernel(jin *j, mt_db__merger *m, const mt_json *o)
{
    mt_db_kernel k;
    memset(&k, 0, sizeof k);
    char msg[256];
    const char *vt = j_strp(j, o, "variant", NULL);
    if (!vt)
        return MT_ERR_INVALID_ARG;
    if (mt_variant_parse(vt, &k.variant, msg, sizeof msg) != MT_OK)
        return jfail(j, "variant", msg), MT_ERR_INVALID_ARG;
    char name[MT_VARIANT_NAME_MAX], arch[16];
    if (!j_str(j, o, "name", name, sizeof name) || !j_str(j, o, "arch", arch, sizeof arch) ||
        !j_int(j, o, "is_ptx", &k.is_ptx) ||
        !j_str(j, o, "template_hash", k.template_hash, sizeof k.template_hash) ||
        !j_str(j, o, "source_sha256", k.source_sha256, sizeof k.source_sha256))
        return MT_ERR_INVALID_ARG;
    if (strcmp(name, k.variant.name) || strcmp(arch, k.variant.arch))
        return jfail(j, "name", "does not match the variant text"), MT_ERR_INVALID_ARG;
    const char *src = j_strp(j, o, "source", &k.source_len);
    if (!src)
        return MT_ERR_INVALID_ARG;
    k.source = (char *)src;
    const mt_json *ih = mt_json_get(o, "image_sha256");
    const mt_json *ib = mt_json_get(o, "image_base64");
    uint8_t *img = NULL;
    size_t img_len = 0;
    if (ib) {
        size_t n;
        const char *b64 = mt_json_str(ib, &n);
        if (!b64 || mt_base64_decode(b64, n, &img, &img_len) != MT_OK)
            return jfail(j, "image_base64", "bad base64"), MT_ERR_INVALID_ARG;
        if (!j_str(j, o, "image_sha256", k.image_sha256, sizeof k.image_sha256)) {
            free(img);
            return MT_ERR_INVALID_ARG;
        }
        k.image = img;
        k.image_len = img_len;
    } else if (ih && mt_json_type_of(ih) != MT_JSON_NULL && !mt_json_str(ih, NULL)) {
        return jfail(j, "image_sha256", "string or null expected"), MT_ERR_INVALID_ARG;
    }
    /* put_kernel checks both hashes against the bytes. */
    mt_status st = mt_db__merge_kernel(m, &k);
    free(img);
    return st;
}

static int j_prov(jin *j, const mt_json *o, mt_db_provenance *p)
{
    memset(p, 0, sizeof *p);
    if (mt_json_type_of(o) != MT_JSON_OBJECT)
        return jfail(j, "provenance", "object expected");
    return j_str(j, o, "sku", p->sku, sizeof p->sku) && j_str(j, o, "cc", p->cc, sizeof p->cc) &&
           j_int(j, o, "sm_count", &p->sm_count) &&
           j_i64(j, o, "mem_clock_khz", &p->mem_clock_khz) &&
           j_str(j, o, "driver_version", p->driver_version, sizeof p->driver_version) &&
           j_str(j, o, "cuda_version", p->cuda_version, sizeof p->cuda_version) &&
           j_str(j, o, "nvrtc_version", p->nvrtc_version, sizeof p->nvrtc_version) &&
           j_str(j, o, "moetune_version", p->moetune_version, sizeof p->moetune_version) &&
           j_str(j, o, "template_hash", p->template_hash, sizeof p->template_hash) &&
           j_i64(j, o, "created", &p->created);
}

static mt_status import_entry(jin *j, mt_db__merger *m, const mt_json *o, int history)
{
    mt_db_entry e;
    memset(&e, 0, sizeof e);
    char msg[256];
    const char *pipe;
    if (!j_key(j, o, &e.key) || !j_i64(j, o, "M", &e.M) || !(pipe = j_strp(j, o, "pipeline", NULL)) ||
        !j_time(j, o, "time_us", &e.time_us) || !j_time(j, o, "default_time_us", &e.default_time_us) ||
        !j_time(j, o, "cublas_time_us", &e.cublas_time_us) || !j_time(j, o, "rel_err", &e.rel_err) ||
        !j_i64(j, o, "recorded", &e.recorded) || !j_prov(j, mt_json_get(o, "provenance"), &e.prov))
        return MT_ERR_INVALID_ARG;
    if (mt_db_pipeline_parse(pipe, &e.pipeline, msg, sizeof msg) != MT_OK)
        return jfail(j, "pipeline", msg), MT_ERR_INVALID_ARG;
    return mt_db__merge_entry(m, &e, history);
}

static mt_status import_candidate(jin *j, mt_db__merger *m, const mt_json *o)
{
    mt_db_candidate c;
    memset(&c, 0, sizeof c);
    char status[16];
    if (!j_key(j, o, &c.key) || !j_i64(j, o, "M", &c.M) ||
        !(c.pipeline = j_strp(j, o, "pipeline", NULL)) ||
        !j_str(j, o, "status", status, sizeof status) || !j_time(j, o, "time_us", &c.time_us) ||
        !j_time(j, o, "rel_err", &c.rel_err) || !(c.reason = j_strp(j, o, "reason", NULL)) ||
        !j_i64(j, o, "recorded", &c.recorded))
        return MT_ERR_INVALID_ARG;
    if (strcmp(status, "ok") && strcmp(status, "rejected"))
        return jfail(j, "status", "\"ok\" or \"rejected\" expected"), MT_ERR_INVALID_ARG;
    c.ok = strcmp(status, "ok") == 0;
    return mt_db__merge_candidate(m, &c);
}

/* An integer field of at least `least`. */
static int j_at_least(jin *j, const mt_json *o, const char *f, int least, int *out)
{
    return j_int(j, o, f, out) &&
           (*out >= least || jfail(j, f, least ? "positive integer expected"
                                               : "non-negative integer expected"));
}

/* vLLM's own files have num_stages 0 (its ROCm configs). */
static int read_vllm_fields(jin *j, const mt_json *o, mt_db_vllm_config *c)
{
    return j_at_least(j, o, "BLOCK_SIZE_M", 1, &c->block_m) &&
           j_at_least(j, o, "BLOCK_SIZE_N", 1, &c->block_n) &&
           j_at_least(j, o, "BLOCK_SIZE_K", 1, &c->block_k) &&
           j_at_least(j, o, "GROUP_SIZE_M", 1, &c->group_m) &&
           j_at_least(j, o, "num_warps", 1, &c->num_warps) &&
           j_at_least(j, o, "num_stages", 0, &c->num_stages);
}

static mt_status import_reference(jin *j, mt_db__merger *m, const mt_json *o)
{
    mt_db_vllm_config c;
    memset(&c, 0, sizeof c);
    if (!j_str(j, o, "device", c.device, sizeof c.device) || !j_i64(j, o, "E", &c.E) ||
        !j_i64(j, o, "N", &c.N) || !j_str(j, o, "selector", c.selector, sizeof c.selector) ||
        !j_i64(j, o, "M", &c.M) || !read_vllm_fields(j, o, &c))
        return MT_ERR_INVALID_ARG;
    return mt_db__merge_reference(m, &c);
}

static mt_status load_json(mt_db *db, const char *path, mt_json **root)
{
    char *text = NULL, msg[512];
    size_t len = 0;
    *root = NULL;
    if (mt_file_read(path, &text, &len, msg, sizeof msg) != MT_OK)
        return mt_db__fail(db, MT_ERR_IO, "%s", msg);
    mt_status st = mt_json_parse(text, len, NULL, root, msg, sizeof msg);
    free(text);
    if (st)
        return mt_db__fail(db, st, "import %s: %s", path, msg);
    return MT_OK;
}

mt_status mt_db_import_json(mt_db *db, const char *path, mt_db_merge_stats *stats)
{
    static const char *const sections[] = {"kernels", "history", "entries", "candidates",
                                           "references"};
    if (!db || !path)
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "import: no file") : MT_ERR_INVALID_ARG;
    mt_json *root;
    mt_status st = mt_db__check_destination(db, "nothing was imported into it");
    if (!st)
        st = load_json(db, path, &root);
    if (st)
        return st;
    int64_t fv = 0;
    const char *fmt = mt_json_str(mt_json_get(root, "format"), NULL);
    if (!fmt || strcmp(fmt, JSON_FORMAT) != 0 ||
        !mt_json_int(mt_json_get(root, "format_version"), &fv) || fv != JSON_FORMAT_VERSION) {
        mt_json_free(root);
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "import %s: not a moetune JSON export "
                           "(format \"%s\" version %d expected)", path, JSON_FORMAT,
                           JSON_FORMAT_VERSION);
    }
    mt_db__merger m = {.db = db};
    jin j = {.db = db, .file = path};
    st = mt_db__begin(db);
    int began = st == MT_OK;
    for (size_t s = 0; s < MT_ARRAY_LEN(sections) && !st; s++) {
        const mt_json *arr = mt_json_get(root, sections[s]);
        j.section = sections[s];
        if (arr && mt_json_type_of(arr) != MT_JSON_ARRAY) {
            st = mt_db__fail(db, MT_ERR_INVALID_ARG, "import %s: \"%s\" is not an array", path,
                             sections[s]);
            break;
        }
        for (size_t i = 0; i < mt_json_len(arr) && !st; i++) {
            const mt_json *o = mt_json_at(arr, i);
            j.index = i;
            if (mt_json_type_of(o) != MT_JSON_OBJECT)
                st = mt_db__fail(db, MT_ERR_INVALID_ARG, "import %s: %s[%zu] is not an object",
                                 path, sections[s], i), j.named = 1;
            else if (s == 0)
                st = import_kernel(&j, &m, o);
            else if (s <= 2)
                st = import_entry(&j, &m, o, s == 1);
            else if (s == 3)
                st = import_candidate(&j, &m, o);
            else
                st = import_reference(&j, &m, o);
            /* A record the store refused: say which one (the field checks
             * above name it already). */
            if (st && !j.named) {
                char where[512];
                snprintf(where, sizeof where, "import %s: %s[%zu]", path, sections[s], i);
                st = mt_db__context(db, st, where);
            }
        }
    }
    mt_db__merger_done(&m);
    if (began)
        st = mt_db__end(db, st);
    mt_json_free(root);
    if (stats)
        *stats = st ? (mt_db_merge_stats){0} : m.stats;
    return st;
}

/* ---- vLLM layout ---- */

typedef struct vllm_row {
    mt_db_vllm_config c;
    size_t order;   /* keeps "first in key order wins" through the sort */
} vllm_row;

typedef struct vllm_ctx {
    mt_db *db;
    vllm_row *rows;
    size_t n, cap;
    sqlite3_stmt *variant;
    mt_status st;
} vllm_ctx;

static int triton_block(int b) { return b >= 16 && (b & (b - 1)) == 0; }

static int collect_vllm(const mt_db_entry *e, void *ctx)
{
    vllm_ctx *x = ctx;
    const char *g1 = mt_db_pipeline_kernel(&e->pipeline, "gemm1");
    if (strcmp(e->pipeline.backend, "moetune") != 0 || !g1)
        return 0;
    sqlite3_reset(x->variant);
    mt_db__bind_text(x->variant, 1, g1);
    mt_db__bind_text(x->variant, 2, e->pipeline.arch);
    int rc = sqlite3_step(x->variant);
    if (rc != SQLITE_ROW) {
        x->st = rc == SQLITE_DONE
                    ? mt_db__fail(x->db, MT_ERR_DB, "entry %s M=%lld: gemm1 kernel %s is missing",
                                  e->key.sku, (long long)e->M, g1)
                    : mt_db__sqlfail(x->db, "read gemm1 variant", __FILE__, __LINE__);
        return 1;
    }
    mt_variant v;
    char msg[256];
    if (mt_variant_parse((const char *)sqlite3_column_text(x->variant, 0), &v, msg, sizeof msg)) {
        x->st = mt_db__fail(x->db, MT_ERR_DB, "kernel %s: bad variant text: %s", g1, msg);
        return 1;
    }
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 64;
        vllm_row *r = realloc(x->rows, cap * sizeof *r);
        if (!r) {
            x->st = mt_db__fail(x->db, MT_ERR_NO_MEMORY, "out of memory");
            return 1;
        }
        x->rows = r;
        x->cap = cap;
    }
    vllm_row *r = &x->rows[x->n];
    memset(r, 0, sizeof *r);
    r->c.block_m = (int)mt_variant_int(&v, "BLOCK_M", 0);
    r->c.block_n = (int)mt_variant_int(&v, "BLOCK_N", 0);
    r->c.block_k = (int)mt_variant_int(&v, "BLOCK_K", 0);
    r->c.group_m = (int)mt_variant_int(&v, "GROUP_M", 1);
    /* The tile's warps: WARPS where the family has it, else its threads. */
    r->c.num_warps = (int)mt_variant_int(&v, "WARPS", v.threads > 0 ? v.threads / 32 : 4);
    r->c.num_stages = (int)mt_variant_int(&v, "STAGES", 2);
    /* A tile vLLM's Triton kernel can take: blocks of 16 and up, powers
     * of two (tl.dot, tl.arange). The matrix-vector decode kernels (no
     * BLOCK_K, BLOCK_M 1) and 192-wide tiles have none; vLLM takes the
     * nearest M the file does have. */
    if (!triton_block(r->c.block_m) || !triton_block(r->c.block_n) || !triton_block(r->c.block_k))
        return 0;
    r->order = x->n++;
    mt_db_vllm_device_name(e->key.sku, r->c.device, sizeof r->c.device);
    mt_db_vllm_selector(&e->key, r->c.selector, sizeof r->c.selector);
    r->c.E = e->key.E;
    r->c.N = e->key.N;
    r->c.M = e->M;
    return 0;
}

static int vllm_file_cmp(const vllm_row *a, const vllm_row *b)
{
    int c = strcmp(a->c.device, b->c.device);
    if (!c)
        c = (a->c.E > b->c.E) - (a->c.E < b->c.E);
    if (!c)
        c = (a->c.N > b->c.N) - (a->c.N < b->c.N);
    if (!c)
        c = strcmp(a->c.selector, b->c.selector);
    return c;
}

static int vllm_row_cmp(const void *pa, const void *pb)
{
    const vllm_row *a = pa, *b = pb;
    int c = vllm_file_cmp(a, b);
    if (!c)
        c = (a->c.M > b->c.M) - (a->c.M < b->c.M);
    if (!c)
        c = (a->order > b->order) - (a->order < b->order);
    return c;
}

static mt_status write_vllm_file(mt_db *db, const char *dir, const vllm_row *rows, size_t n)
{
    const mt_db_vllm_config *c0 = &rows[0].c;
    mt_json_writer w = {.pretty = 1};
    mt_jw_begin_object(&w);
    for (size_t i = 0; i < n; i++) {
        if (i && rows[i].c.M == rows[i - 1].c.M)
            continue;   /* another key of the same file: the first wins */
        char m[32];
        snprintf(m, sizeof m, "%lld", (long long)rows[i].c.M);
        mt_jw_key(&w, m);
        mt_jw_begin_object(&w);
        write_vllm_fields(&w, &rows[i].c);
        mt_jw_end_object(&w);
    }
    mt_jw_end_object(&w);
    mt_buf path = {0};
    mt_buf_printf(&path, "%s/E=%lld,N=%lld,device_name=%s%s%s.json", dir, (long long)c0->E,
                  (long long)c0->N, c0->device, c0->selector[0] ? "," : "", c0->selector);
    mt_status st = mt_jw_finish(&w);
    if (st || path.oom)
        st = mt_db__fail(db, st ? st : MT_ERR_NO_MEMORY, "cannot build vLLM JSON");
    else
        st = write_output(db, path.data, &w);
    mt_buf_free(&path);
    mt_json_writer_free(&w);
    return st;
}

mt_status mt_db_export_vllm(mt_db *db, const char *dir, int *files)
{
    if (files)
        *files = 0;
    if (!db || !dir)
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "export_vllm: no folder") : MT_ERR_INVALID_ARG;
    char msg[512];
    if (mt_mkdirs(dir, msg, sizeof msg) != MT_OK)
        return mt_db__fail(db, MT_ERR_IO, "%s", msg);
    vllm_ctx x = {.db = db};
    mt_status st = mt_db__prepare(db, "SELECT variant FROM kernel WHERE name = ? AND arch = ?",
                                  &x.variant);
    if (!st)
        st = mt_db_foreach_entry(db, NULL, collect_vllm, &x);
    if (!st)
        st = x.st;
    sqlite3_finalize(x.variant);
    if (!st && x.n)
        qsort(x.rows, x.n, sizeof *x.rows, vllm_row_cmp);
    for (size_t i = 0; i < x.n && !st;) {
        size_t k = i + 1;
        while (k < x.n && vllm_file_cmp(&x.rows[i], &x.rows[k]) == 0)
            k++;
        st = write_vllm_file(db, dir, x.rows + i, k - i);
        if (!st && files)
            (*files)++;
        i = k;
    }
    free(x.rows);
    return st;
}

/* "E=128,N=768,device_name=NVIDIA_H200[,dtype=..][,block_shape=[..]].json" */
static mt_status parse_vllm_name(mt_db *db, const char *path, mt_db_vllm_config *c)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    long long E = 0, N = 0;
    int off = 0;
    size_t len = strlen(base);
    if (sscanf(base, "E=%lld,N=%lld,device_name=%n", &E, &N, &off) != 2 || off == 0 ||
        len < 5 || strcmp(base + len - 5, ".json") != 0 || E <= 0 || N <= 0)
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "%s: not a vLLM config file name "
                           "(E=..,N=..,device_name=...json expected)", path);
    const char *dev = base + off, *end = base + len - 5;
    const char *sel = strstr(dev, ",dtype=");
    const char *blk = strstr(dev, ",block_shape=");
    if (!sel || (blk && blk < sel))
        sel = blk;
    if (!sel || sel > end)
        sel = end;
    if ((size_t)(sel - dev) >= sizeof c->device || sel == dev ||
        (size_t)(end - sel) >= sizeof c->selector)
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "%s: device name empty or too long", path);
    memcpy(c->device, dev, (size_t)(sel - dev));
    c->device[sel - dev] = '\0';
    if (sel < end) {
        memcpy(c->selector, sel + 1, (size_t)(end - sel - 1));
        c->selector[end - sel - 1] = '\0';
    }
    c->E = E;
    c->N = N;
    return MT_OK;
}

mt_status mt_db_import_vllm(mt_db *db, const char *path, int *count)
{
    if (count)
        *count = 0;
    if (!db || !path)
        return db ? mt_db__fail(db, MT_ERR_INVALID_ARG, "import_vllm: no file") : MT_ERR_INVALID_ARG;
    mt_db_vllm_config c;
    memset(&c, 0, sizeof c);
    mt_json *root = NULL;
    mt_status st = mt_db__check_destination(db, "nothing was imported into it");
    if (!st)
        st = parse_vllm_name(db, path, &c);
    if (!st)
        st = load_json(db, path, &root);
    if (st)
        return st;
    if (mt_json_type_of(root) != MT_JSON_OBJECT) {
        mt_json_free(root);
        return mt_db__fail(db, MT_ERR_INVALID_ARG, "%s: a JSON object of M -> config expected", path);
    }
    jin j = {.db = db, .file = path, .section = "M"};
    mt_db__merger m = {.db = db};
    st = mt_db__begin(db);
    int began = st == MT_OK;
    for (size_t i = 0; i < mt_json_len(root) && !st; i++) {
        const char *mk = mt_json_key_at(root, i);
        char *e = NULL;
        long long M = strtoll(mk, &e, 10);
        j.index = i;
        if (!*mk || *e || M < 1) {
            st = mt_db__fail(db, MT_ERR_INVALID_ARG, "%s: key \"%s\" is not a positive M", path, mk);
            break;
        }
        c.M = M;
        if (!read_vllm_fields(&j, mt_json_at(root, i), &c))
            st = MT_ERR_INVALID_ARG;
        else
            st = mt_db__merge_reference(&m, &c);
    }
    if (began)
        st = mt_db__end(db, st);
    mt_json_free(root);
    if (!st && count)
        *count = (int)m.stats.references;
    return st;
}
