/*
 * Small helpers shared by every module: bounded strings, messages, files,
 * hashing and clocks. No module-specific logic lives here.
 */
#ifndef MT_COMMON_UTIL_H
#define MT_COMMON_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "moetune/status.h"

#define MT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define MT_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))

/* Copy src into dst of `size` bytes, always NUL-terminated; NULL dst is ok. */
void mt_strlcpy(char *dst, const char *src, size_t size);

/* printf into a message buffer (NULL or size 0: nothing); returns `st` so a
 * caller can write `return mt_errf(msg, n, MT_ERR_SHAPE, "...", ...)`. */
mt_status mt_errf(char *msg, size_t size, mt_status st, const char *fmt, ...) MT_PRINTF(4, 5);

/* A growable, always NUL-terminated string. A failed append sets `oom`. */
typedef struct mt_buf {
    char *data;
    size_t len, cap;
    int oom;
} mt_buf;
void mt_buf_append(mt_buf *b, const char *s, size_t n);
void mt_buf_puts(mt_buf *b, const char *s);
void mt_buf_printf(mt_buf *b, const char *fmt, ...) MT_PRINTF(2, 3);
void mt_buf_free(mt_buf *b);

/* Read a whole file (adds a NUL after the bytes). *out is malloc'd. */
mt_status mt_file_read(const char *path, char **out, size_t *len, char *msg, size_t msg_size);
/* Write a file atomically: a temporary name in the same folder, then rename. */
mt_status mt_file_write_atomic(const char *path, const void *data, size_t len,
                               char *msg, size_t msg_size);
/* mkdir -p. An empty (or NULL) path is MT_ERR_INVALID_ARG. */
mt_status mt_mkdirs(const char *path, char *msg, size_t msg_size);

/* SHA-256. */
typedef struct mt_sha256 {
    uint32_t h[8];
    uint64_t nbytes;
    uint8_t block[64];
    size_t fill;
} mt_sha256;
void mt_sha256_init(mt_sha256 *s);
void mt_sha256_update(mt_sha256 *s, const void *data, size_t n);
void mt_sha256_final(mt_sha256 *s, uint8_t out[32]);
/* Hex digest of data into hex[65]. */
void mt_sha256_hex(const void *data, size_t n, char hex[65]);
void mt_hex(const uint8_t *bytes, size_t n, char *out);

/* Monotonic clock in seconds. */
double mt_now(void);

#endif
