/*
 * JSON, as much as the admin API and the json access log need: a writer
 * into a growing buffer, its string escaper, and a reader of one flat
 * object ({"weight": 2, "state": "up"}) whose values are scalars.
 *
 * Why not a library: the admin API reads objects of two or three scalar
 * fields and writes small documents; jansson would be a run-time
 * dependency for that, and this reader refuses by construction what the
 * API never takes (nesting, huge strings), so its callers need no limits
 * of their own.
 *
 * The writer escapes every string it is given so that the output is valid
 * JSON (and valid UTF-8) whatever the bytes, by one rule that the admin API
 * and the json access log share (sws_json_put_escaped):
 *   valid UTF-8 (RFC 3629)      as it is
 *   '"' and '\\'                \" and \\
 *   controls 0x00-0x1f, DEL     \u00XX
 *   any other byte (not part    \u00XX, one per byte (read as Latin-1)
 *   of valid UTF-8)
 * A character at or above U+0080 is never written as an escape, so in the
 * text of the output a \u00XX above \u007f always stands for an invalid
 * byte: the bytes given can be recovered exactly from the text. Not
 * \ufffd, which would lose them (ADR 0019).
 *
 * Ownership: sws_json_out_t owns its buffer (malloc); sws_json_out_free()
 * releases it. A failed allocation sets oom and drops the rest: the caller
 * checks oom once, at the end. Pure functions on memory: any process.
 */
#ifndef SWS_CORE_JSON_H
#define SWS_CORE_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef struct sws_json_out {
    char *p;
    size_t len;
    size_t cap;
    int oom;
} sws_json_out_t;

/* The longest output of one input byte ("\u00XX"): a writer of n bytes
 * reserves SWS_JSON_ESC_MAX(n). */
#define SWS_JSON_ESC_MAX(n) (6 * (n))

/* s (n bytes) escaped by the rule above, without the quotes, at o; returns
 * the position after. No bounds check, no NUL (as core/fmt.h). */
char *sws_json_put_escaped(char *o, const char *s, size_t n);

void sws_json_raw(sws_json_out_t *o, const char *s, size_t n);
/* lit: a string literal (its size is taken: never a pointer). */
#define sws_json_lit(o, lit) sws_json_raw((o), "" lit, sizeof(lit) - 1)
/* s as a quoted, escaped JSON string. */
void sws_json_str(sws_json_out_t *o, const char *s, size_t n);
void sws_json_cstr(sws_json_out_t *o, const char *s);
void sws_json_u64(sws_json_out_t *o, uint64_t v);
void sws_json_out_free(sws_json_out_t *o);

/* {"error": "<msg>"}: the body of every refusal of the admin API. */
void sws_json_error(sws_json_out_t *o, const char *msg);

/* ---- the reader ---- */

#define SWS_JSON_KEY_MAX 32   /* bytes of a key, with its NUL */
#define SWS_JSON_VALUE_MAX 128 /* bytes of a value's text, with its NUL */
#define SWS_JSON_FIELDS_MAX 8

typedef enum sws_json_type {
    SWS_JSON_STRING,
    SWS_JSON_NUMBER, /* text as written, checked against the JSON grammar */
    SWS_JSON_TRUE,
    SWS_JSON_FALSE,
    SWS_JSON_NULL,
} sws_json_type_t;

typedef struct sws_json_field {
    char key[SWS_JSON_KEY_MAX];
    sws_json_type_t type;
    char value[SWS_JSON_VALUE_MAX]; /* a string decoded (UTF-8), a number's text */
} sws_json_field_t;

/* Parse text (n bytes, not NUL-terminated) as one object whose values are
 * strings, numbers, true, false or null, surrounded by whitespace only.
 * Fills f[0..*count). Refused (-1, one sentence in err): anything that is
 * not JSON, a nested object or array, a key or value longer than the
 * limits above, \u0000 or a lone surrogate, a key written twice, more than
 * SWS_JSON_FIELDS_MAX fields. */
int sws_json_parse_flat(const char *text, size_t n, sws_json_field_t f[SWS_JSON_FIELDS_MAX],
                        size_t *count, char *err, size_t errlen);

/* The field named key, or NULL. */
const sws_json_field_t *sws_json_field(const sws_json_field_t *f, size_t count, const char *key);

#endif
