/*
 * Shared helpers (see util.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void mt_strlcpy(char *dst, const char *src, size_t size)
{
    if (!dst || size == 0)
        return;
    size_t n = src ? strlen(src) : 0;
    if (n >= size)
        n = size - 1;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

mt_status mt_errf(char *msg, size_t size, mt_status st, const char *fmt, ...)
{
    if (msg && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, size, fmt, ap);
        va_end(ap);
    }
    return st;
}

void mt_buf_append(mt_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void mt_buf_puts(mt_buf *b, const char *s) { mt_buf_append(b, s, strlen(s)); }

void mt_buf_printf(mt_buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        mt_buf_append(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    mt_buf_append(b, big, (size_t)n);
    free(big);
}

void mt_buf_free(mt_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

mt_status mt_file_read(const char *path, char **out, size_t *len, char *msg, size_t msg_size)
{
    *out = NULL;
    if (len)
        *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return mt_errf(msg, msg_size, MT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    mt_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        mt_buf_append(&b, chunk, n);
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (err || b.oom) {
        mt_buf_free(&b);
        return mt_errf(msg, msg_size, err ? MT_ERR_IO : MT_ERR_NO_MEMORY, "cannot read %s: %s", path,
                       err ? strerror(err) : "out of memory");
    }
    if (!b.data)
        mt_buf_append(&b, "", 0);
    if (b.oom)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "cannot read %s", path);
    *out = b.data;
    if (len)
        *len = b.len;
    return MT_OK;
}

mt_status mt_file_write_atomic(const char *path, const void *data, size_t len,
                               char *msg, size_t msg_size)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory writing %s", path);
    /* Unique per writer: two threads of one process (each with its own
     * generator, one cache) once shared a name and tore each other's file. */
    static unsigned long writes;
    snprintf(tmp, plen + 32, "%s.tmp.%ld.%lu", path, (long)getpid(),
             __atomic_fetch_add(&writes, 1, __ATOMIC_RELAXED));
    mt_status st = MT_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        st = mt_errf(msg, msg_size, MT_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
        goto done;
    }
    const char *p = data;
    size_t left = len;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            st = mt_errf(msg, msg_size, MT_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
            break;
        }
        p += w;
        left -= (size_t)w;
    }
    if (!st && fsync(fd) != 0)
        st = mt_errf(msg, msg_size, MT_ERR_IO, "cannot sync %s: %s", tmp, strerror(errno));
    if (close(fd) != 0 && !st)
        st = mt_errf(msg, msg_size, MT_ERR_IO, "cannot close %s: %s", tmp, strerror(errno));
    if (!st && rename(tmp, path) != 0)
        st = mt_errf(msg, msg_size, MT_ERR_IO, "cannot rename %s to %s: %s", tmp, path,
                     strerror(errno));
    if (st)
        unlink(tmp);
done:
    free(tmp);
    return st;
}

mt_status mt_mkdirs(const char *path, char *msg, size_t msg_size)
{
    /* "" names no folder; taken as one, a caller's "%s/%s" wrote into "/". */
    if (!path || !*path)
        return mt_errf(msg, msg_size, MT_ERR_INVALID_ARG, "no folder given (an empty path)");
    size_t n = strlen(path);
    char *p = malloc(n + 1);
    if (!p)
        return mt_errf(msg, msg_size, MT_ERR_NO_MEMORY, "out of memory");
    memcpy(p, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] == '/' || p[i] == '\0') {
            char c = p[i];
            p[i] = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                mt_status st = mt_errf(msg, msg_size, MT_ERR_IO, "cannot create folder %s: %s",
                                       p, strerror(errno));
                free(p);
                return st;
            }
            p[i] = c;
        }
    }
    free(p);
    return MT_OK;
}

/* SHA-256 as specified in FIPS 180-4. */
static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(mt_sha256 *s, const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3];
    uint32_t e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g; g = f; f = e; e = d + t1;
        d = c; c = b; b = a; a = t1 + t2;
    }
    s->h[0] += a; s->h[1] += b; s->h[2] += c; s->h[3] += d;
    s->h[4] += e; s->h[5] += f; s->h[6] += g; s->h[7] += h;
}

void mt_sha256_init(mt_sha256 *s)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->nbytes = 0;
    s->fill = 0;
}

void mt_sha256_update(mt_sha256 *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    s->nbytes += n;
    while (n) {
        size_t take = 64 - s->fill;
        if (take > n)
            take = n;
        memcpy(s->block + s->fill, p, take);
        s->fill += take;
        p += take;
        n -= take;
        if (s->fill == 64) {
            sha_block(s, s->block);
            s->fill = 0;
        }
    }
}

void mt_sha256_final(mt_sha256 *s, uint8_t out[32])
{
    uint64_t bits = s->nbytes * 8;
    uint8_t pad = 0x80;
    mt_sha256_update(s, &pad, 1);
    uint8_t zero = 0;
    while (s->fill != 56)
        mt_sha256_update(s, &zero, 1);
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)(bits >> (56 - 8 * i));
    mt_sha256_update(s, len, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
}

void mt_hex(const uint8_t *bytes, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}

void mt_sha256_hex(const void *data, size_t n, char hex[65])
{
    mt_sha256 s;
    uint8_t d[32];
    mt_sha256_init(&s);
    mt_sha256_update(&s, data, n);
    mt_sha256_final(&s, d);
    mt_hex(d, 32, hex);
}

double mt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
