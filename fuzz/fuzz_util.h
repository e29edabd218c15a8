/*
 * Helpers shared by the libFuzzer harnesses in fuzz/: a private scratch
 * folder per process, writing an input to a file, removing a database with
 * its SQLite side files, a cursor that consumes the input as typed values,
 * and the seed database the database harnesses start from.
 * May call: common/util, moetune/db.
 */
#ifndef MT_FUZZ_UTIL_H
#define MT_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Abort with a message: an invariant broken (libFuzzer records a crash). */
#define FUZZ_CHECK(cond)                                                        \
    do {                                                                        \
        if (!(cond))                                                            \
            fuzz_fail(__FILE__, __LINE__, #cond);                               \
    } while (0)
void fuzz_fail(const char *file, int line, const char *what);

/*
 * Known findings (docs/RELIABILITY.md, R1...) that are reported but not yet
 * fixed are stepped around so that fuzzing can go on: FUZZ_KNOWN(cond) is
 * cond, or 0 in a build configured with -DMT_FUZZ_STRICT=ON, where the
 * regress_* seeds reproduce them.
 */
#ifdef MT_FUZZ_STRICT
#define FUZZ_KNOWN(cond) (0 && (cond))
#else
#define FUZZ_KNOWN(cond) (cond)
#endif

/* A fresh folder for this process (under /dev/shm when present, removed at
 * exit); the returned path is static. */
const char *fuzz_tmpdir(void);
/* dir/name in a static rotating buffer (4 slots). */
const char *fuzz_path(const char *name);
/* Write data to path (truncating); aborts when the disk refuses. */
void fuzz_write(const char *path, const void *data, size_t n);
/* unlink path and path-wal, path-shm, path-journal. */
void fuzz_rm_db(const char *path);
/* Copy a file (aborts on failure). */
void fuzz_copy(const char *from, const char *to);

/* Consume the input front to back; reads past the end give zeros. */
typedef struct fuzz_in {
    const uint8_t *p;
    size_t n;
} fuzz_in;
uint8_t fuzz_u8(fuzz_in *in);
uint32_t fuzz_u32(fuzz_in *in);
uint64_t fuzz_u64(fuzz_in *in);
/* An integer for a size or count field: a selector byte picks a small value
 * (0..127), a boundary (0, +-1, powers of two and their neighbours, the
 * moetune caps, INT32/INT64 extremes) or 8 raw bytes. */
int64_t fuzz_int(fuzz_in *in);
/* Up to max bytes (length from one byte), pointer into the input. */
const uint8_t *fuzz_bytes(fuzz_in *in, size_t max, size_t *len);

/*
 * Build a small valid database at path (created; removed first): two SKUs,
 * provenance rows, four kernels with images, entries at several M, history,
 * candidates and vLLM reference configs. Aborts on failure.
 */
void fuzz_build_db(const char *path);
/* The key the seed database holds entries for (SKU "NVIDIA H200"). */
struct mt_db_key;
void fuzz_seed_key(struct mt_db_key *k);



/*
 * Read a database through every reader of the API: open read-only, verify,
 * iterate entries (and history), kernels (with images), candidates and
 * reference configs, look up and fetch every kernel an entry names. Checks
 * the invariants a caller relies on (a kernel returned with MT_OK matches
 * its hashes; lookups return entries of the asked key). Returns the open
 * status.
 */
int fuzz_read_db(const char *path);
#endif
