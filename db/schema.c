/*
 * The database schema: the one place where tables are defined. A new file
 * runs the v1 script and then every migration in order, so a fresh file and
 * a migrated one are built by the same statements. To change the schema,
 * append a migration and raise MT_DB_SCHEMA_VERSION (include/moetune/db.h);
 * never edit a released step. docs/DATABASE.md explains the columns.
 */
#include "db/db_internal.h"

const char *const mt_db__schema_v1 =
    /* Where and with what software results were measured. Identical rows
     * are shared (created = first time seen). */
    "CREATE TABLE provenance (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  sku TEXT NOT NULL,\n"
    "  cc TEXT NOT NULL,\n"
    "  sm_count INTEGER NOT NULL,\n"
    "  mem_clock_khz INTEGER NOT NULL,\n"
    "  driver_version TEXT NOT NULL,\n"
    "  cuda_version TEXT NOT NULL,\n"
    "  nvrtc_version TEXT NOT NULL,\n"
    "  moetune_version TEXT NOT NULL,\n"
    "  template_hash TEXT NOT NULL,\n"
    "  created INTEGER NOT NULL,\n"
    "  UNIQUE (sku, cc, sm_count, mem_clock_khz, driver_version, cuda_version,\n"
    "          nvrtc_version, moetune_version, template_hash));\n"
    /* One row per (variant name, arch). image is NULL when only the source
     * was kept (a JSON import without images). */
    "CREATE TABLE kernel (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  name TEXT NOT NULL,\n"
    "  arch TEXT NOT NULL,\n"
    "  family TEXT NOT NULL,\n"
    "  variant TEXT NOT NULL,\n"
    "  source TEXT NOT NULL,\n"
    "  source_sha256 TEXT NOT NULL,\n"
    "  image BLOB,\n"
    "  image_sha256 TEXT,\n"
    "  is_ptx INTEGER NOT NULL DEFAULT 0,\n"
    "  template_hash TEXT NOT NULL,\n"
    "  UNIQUE (name, arch));\n"
    /* Problem keys without SKU and M; the identity is a separate index so a
     * migration can widen it. */
    "CREATE TABLE problem_key (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  E INTEGER NOT NULL,\n"
    "  topk INTEGER NOT NULL,\n"
    "  K INTEGER NOT NULL,\n"
    "  N INTEGER NOT NULL,\n"
    "  dtype TEXT NOT NULL,\n"
    "  quant TEXT NOT NULL,\n"
    "  group_size INTEGER NOT NULL,\n"
    "  has_zero_point INTEGER NOT NULL,\n"
    "  act_format TEXT NOT NULL,\n"
    "  activation TEXT NOT NULL,\n"
    "  has_expert_map INTEGER NOT NULL,\n"
    "  router_on_input INTEGER NOT NULL);\n"
    "CREATE UNIQUE INDEX problem_key_identity ON problem_key (E, topk, K, N, dtype, quant,\n"
    "  group_size, has_zero_point, act_format, activation, has_expert_map, router_on_input);\n"
    /* The winner per (SKU, key, M). pipeline is mt_db_pipeline_format text. */
    "CREATE TABLE entry (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  sku TEXT NOT NULL,\n"
    "  key_id INTEGER NOT NULL REFERENCES problem_key(id),\n"
    "  M INTEGER NOT NULL,\n"
    "  pipeline TEXT NOT NULL,\n"
    "  time_us REAL NOT NULL,\n"
    "  default_time_us REAL NOT NULL,\n"
    "  cublas_time_us REAL,\n"
    "  rel_err REAL NOT NULL,\n"
    "  provenance_id INTEGER NOT NULL REFERENCES provenance(id),\n"
    "  recorded INTEGER NOT NULL,\n"
    "  UNIQUE (sku, key_id, M));\n"
    /* Every record ever offered for an entry, winners and losers. */
    "CREATE TABLE entry_history (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  sku TEXT NOT NULL,\n"
    "  key_id INTEGER NOT NULL REFERENCES problem_key(id),\n"
    "  M INTEGER NOT NULL,\n"
    "  pipeline TEXT NOT NULL,\n"
    "  time_us REAL NOT NULL,\n"
    "  default_time_us REAL NOT NULL,\n"
    "  cublas_time_us REAL,\n"
    "  rel_err REAL NOT NULL,\n"
    "  provenance_id INTEGER NOT NULL REFERENCES provenance(id),\n"
    "  recorded INTEGER NOT NULL,\n"
    "  UNIQUE (sku, key_id, M, pipeline, time_us, rel_err, provenance_id));\n"
    /* The tuner's log of measured candidates: resume and rejections. */
    "CREATE TABLE candidate (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  sku TEXT NOT NULL,\n"
    "  key_id INTEGER NOT NULL REFERENCES problem_key(id),\n"
    "  M INTEGER NOT NULL,\n"
    "  pipeline TEXT NOT NULL,\n"
    "  status TEXT NOT NULL CHECK (status IN ('ok', 'rejected')),\n"
    "  time_us REAL,\n"
    "  rel_err REAL,\n"
    "  reason TEXT NOT NULL DEFAULT '',\n"
    "  recorded INTEGER NOT NULL,\n"
    "  UNIQUE (sku, key_id, M, pipeline));\n"
    /* vLLM per-device configs, kept for comparison only (no kernels). */
    "CREATE TABLE reference_config (\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  device TEXT NOT NULL,\n"
    "  E INTEGER NOT NULL,\n"
    "  N INTEGER NOT NULL,\n"
    "  selector TEXT NOT NULL DEFAULT '',\n"
    "  M INTEGER NOT NULL,\n"
    "  block_m INTEGER NOT NULL,\n"
    "  block_n INTEGER NOT NULL,\n"
    "  block_k INTEGER NOT NULL,\n"
    "  group_m INTEGER NOT NULL,\n"
    "  num_warps INTEGER NOT NULL,\n"
    "  num_stages INTEGER NOT NULL,\n"
    "  UNIQUE (device, E, N, selector, M));\n";

const char *const mt_db__migrations[MT_DB_SCHEMA_VERSION - 1] = {
    /* v1 -> v2: the routing distribution becomes part of the problem key
     * (results tuned on skewed routing must not answer uniform lookups),
     * and an index serves the compute-capability fallback lookup, which
     * scans entries by key across SKUs. */
    "ALTER TABLE problem_key ADD COLUMN routing TEXT NOT NULL DEFAULT 'uniform'\n"
    "  CHECK (routing IN ('uniform', 'balanced', 'skewed'));\n"
    "DROP INDEX problem_key_identity;\n"
    "CREATE UNIQUE INDEX problem_key_identity ON problem_key (E, topk, K, N, dtype, quant,\n"
    "  group_size, has_zero_point, act_format, activation, has_expert_map, router_on_input,\n"
    "  routing);\n"
    "CREATE INDEX entry_by_key ON entry (key_id, M);\n",
};
