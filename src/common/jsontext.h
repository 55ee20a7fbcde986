/*
 * jsontext.h -- a jansson tree as compact JSON text, fast: what jansson's json_dumps(j, JSON_COMPACT) gives,
 * written into a pyc_buf_t.
 *
 * Why not json_dumps: message contents can be megabytes (a 10 MB repr as an execute_result, a DataFrame's
 * HTML, a base64 PNG), and jansson escapes them one code point at a time into a buffer that it grows by
 * allocating anew and copying (20 MB copied and faulted in for a 10 MB string).  Here strings go through
 * buf.c's escaper, which copies runs of plain bytes eight at a time, into a buffer grown by realloc, which
 * moves large blocks by remapping them instead of copying.
 *
 * The text is jansson's, byte for byte, for everything a message holds: object members in insertion order,
 * no spaces, integers as JSON_INTEGER_FORMAT, reals as the linked jansson writes them (its own formatter),
 * strings escaped with \" \\ \b \f \n
 * \r \t and \u00xx for other control characters (jansson writes those last four hex digits in upper case,
 * this in lower case: the same JSON value).
 * A tree nested deeper than PYC_JSON_TEXT_MAX_DEPTH is refused rather than walked (jansson's own parser
 * stops at 2048).
 */
#ifndef PYC_JSONTEXT_H
#define PYC_JSONTEXT_H

#include <jansson.h>

#include "buf.h"

#define PYC_JSON_TEXT_MAX_DEPTH 4096

/* Appends j as compact JSON text to b.  Returns 0, or -1 when b's cap or memory ran out or j is nested too
 * deeply or holds a real that is not finite; b is then left as it was. */
int pyc_json_text(pyc_buf_t *b, const json_t *j);

/* j as a NUL-terminated malloc'd string (its length in *len when len is not NULL), or NULL as for
 * pyc_json_text.  A drop-in for json_dumps(j, JSON_COMPACT). */
char *pyc_json_text_dup(const json_t *j, size_t *len);

#endif
