/*
 * The compile cache: `<key>.bin` files in one folder, content-addressed by
 * the amalgamated source, the NVRTC version, the options and the arch.
 * An entry is a 64-byte header then the image:
 *   "MTKCACHE" | u32 format | u32 reserved | u64 payload length | 32-byte sha256 | 8 zero bytes
 * (integers little-endian); the sha256 is of the key (hex, NUL) and then the
 * payload, so that an entry copied or linked under another key's name is
 * no image of that key (format 1 hashed the payload alone, and such an
 * entry was served as a hit). Anything that does not check out, or is not
 * a regular file, is "corrupt".
 * Calls: common/util.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "gen/gen_internal.h"

#define CACHE_MAGIC "MTKCACHE"
#define CACHE_FORMAT 2u
#define HEADER_SIZE 64

static void put_u32(uint8_t *p, uint32_t x)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(x >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t x)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(x >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--)
        x = x << 8 | p[i];
    return x;
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void gen_cache_key(const char *source, size_t len, const char *const *opts, int nopts,
                   const char *arch, char hex[65])
{
    mt_sha256 h;
    mt_sha256_init(&h);
    /* Every part is followed by a NUL so that no two lists hash alike. */
    static const char tag[] = "moetune-nvrtc-cache-v1";
    mt_sha256_update(&h, tag, sizeof tag);
    int major = 0, minor = 0;
    gen_nvrtc_version(&major, &minor);
    char ver[32];
    int n = snprintf(ver, sizeof ver, "nvrtc %d.%d", major, minor);
    mt_sha256_update(&h, ver, (size_t)n + 1);
    for (int i = 0; i < nopts; i++)
        mt_sha256_update(&h, opts[i], strlen(opts[i]) + 1);
    mt_sha256_update(&h, arch, strlen(arch) + 1);
    mt_sha256_update(&h, source, len);
    uint8_t d[32];
    mt_sha256_final(&h, d);
    mt_hex(d, 32, hex);
}

static void entry_path(const char *dir, const char *key, char *path, size_t size)
{
    snprintf(path, size, "%s/%s.bin", dir, key);
}

/* The header's hash: of the key, then the payload. */
static void entry_hash(const char *key, const uint8_t *payload, size_t len, uint8_t d[32])
{
    mt_sha256 h;
    mt_sha256_init(&h);
    mt_sha256_update(&h, key, strlen(key) + 1);
    mt_sha256_update(&h, payload, len);
    mt_sha256_final(&h, d);
}

gen_cache_result gen_cache_read(const char *dir, const char *key, uint8_t **image, size_t *len,
                                char *msg, size_t msg_size)
{
    *image = NULL;
    *len = 0;
    char path[PATH_MAX];
    entry_path(dir, key, path, sizeof path);
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return GEN_CACHE_MISS;
    if (!S_ISREG(sb.st_mode)) {   /* a link (to another entry), a folder */
        mt_errf(msg, msg_size, MT_ERR_IO, "cache entry %s: not a regular file", path);
        return GEN_CACHE_CORRUPT;
    }
    char *data = NULL;
    size_t n = 0;
    if (mt_file_read(path, &data, &n, msg, msg_size) != MT_OK)
        return GEN_CACHE_CORRUPT;
    const uint8_t *u = (const uint8_t *)data;
    gen_cache_result r = GEN_CACHE_CORRUPT;
    if (n < HEADER_SIZE || memcmp(u, CACHE_MAGIC, 8) != 0) {
        mt_errf(msg, msg_size, MT_ERR_IO, "cache entry %s: bad magic", path);
    } else if (get_u32(u + 8) != CACHE_FORMAT) {
        mt_errf(msg, msg_size, MT_ERR_IO, "cache entry %s: format %u, expected %u", path,
                get_u32(u + 8), CACHE_FORMAT);
    } else if (get_u64(u + 16) != n - HEADER_SIZE) {
        mt_errf(msg, msg_size, MT_ERR_IO, "cache entry %s: payload length %llu, file has %zu",
                path, (unsigned long long)get_u64(u + 16), n - HEADER_SIZE);
    } else {
        uint8_t d[32];
        entry_hash(key, u + HEADER_SIZE, n - HEADER_SIZE, d);
        if (memcmp(d, u + 24, 32) != 0) {
            mt_errf(msg, msg_size, MT_ERR_IO, "cache entry %s: hash mismatch (damaged, or the "
                    "entry of another key)", path);
        } else if ((*image = malloc(n - HEADER_SIZE ? n - HEADER_SIZE : 1))) {
            memcpy(*image, u + HEADER_SIZE, n - HEADER_SIZE);
            *len = n - HEADER_SIZE;
            r = GEN_CACHE_HIT;
        } else {
            r = GEN_CACHE_MISS;   /* out of memory: just compile */
        }
    }
    free(data);
    return r;
}

mt_status gen_cache_write(const char *dir, const char *key, const uint8_t *image, size_t len,
                          char *msg, size_t msg_size)
{
    mt_status st = mt_mkdirs(dir, msg, msg_size);
    if (st)
        return st;
    uint8_t *buf = malloc(HEADER_SIZE + len);
    if (!buf)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    memset(buf, 0, HEADER_SIZE);
    memcpy(buf, CACHE_MAGIC, 8);
    put_u32(buf + 8, CACHE_FORMAT);
    put_u64(buf + 16, len);
    entry_hash(key, image, len, buf + 24);
    memcpy(buf + HEADER_SIZE, image, len);
    char path[PATH_MAX];
    entry_path(dir, key, path, sizeof path);
    st = mt_file_write_atomic(path, buf, HEADER_SIZE + len, msg, msg_size);
    free(buf);
    return st;
}
