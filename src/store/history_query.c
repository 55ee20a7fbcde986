/*
 * history_query.c -- history_request: checks a request's arguments and answers it from the history tables.
 *
 * The tables and the ways of asking (tail, range, search) are described in history.c and history.h; this file
 * reads them and never writes.  Queries follow IPython 8 (HistoryManager.get_tail, HistoryAccessor.get_range
 * and search), with the differences history.c lists.
 */
#include "history.h"

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite_lazy.h"

/* Request values longer than this are not echoed in error replies. */
#define MAX_ECHO 40

/* ---- history_request ---------------------------------------------------------------------------------- */

enum access { ACCESS_TAIL, ACCESS_RANGE, ACCESS_SEARCH };

/* A request's arguments once checked.  The integers are json_int_t (long long) as they came. */
typedef struct request {
    enum access access;
    bool raw, output, unique;
    bool has_n, has_stop;
    json_int_t n, session, start, stop;
    const char *pattern;
    /* The reply's bound (a history file may hold years of cells, and a search without n asks for all that
     * match): at most max_entries entries and max_bytes of their text (the first entry whatever its size); the
     * newest entries are kept for tail and search, the first ones of a range.  truncated says an entry was left
     * out. */
    size_t max_entries, max_bytes, bytes;
    bool truncated;
} request_t;

/* A new error reply; the sentence names the field.  Returns NULL only out of memory. */
static json_t *
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
error_reply(const char *ename, const char *fmt, ...)
{
    char evalue[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(evalue, sizeof evalue, fmt, ap);
    va_end(ap);
    json_t *evalue_j = json_string(evalue);
    if (evalue_j == NULL) /* cut inside a UTF-8 sequence; values are ASCII except echoed ones */
        evalue_j = json_string("invalid history_request");
    return json_pack("{s:s, s:s, s:o, s:[]}", "status", "error", "ename", ename, "evalue", evalue_j, "traceback");
}

/* Reads the optional boolean `name`: absent or null gives dflt.  Returns NULL, or a new error reply. */
static json_t *
get_bool(json_t *content, const char *name, bool dflt, bool *out)
{
    json_t *v = json_object_get(content, name);
    *out = dflt;
    if (v == NULL || json_is_null(v))
        return NULL;
    if (!json_is_boolean(v))
        return error_reply("TypeError", "history_request: \"%s\" must be a boolean", name);
    *out = json_is_true(v);
    return NULL;
}

/* Reads the integer `name`, which must be >= min.  Absent or null sets *present false, which is an error
 * when required.  Returns NULL, or a new error reply. */
static json_t *
get_int(json_t *content, const char *name, bool required, json_int_t min, bool *present, json_int_t *out)
{
    json_t *v = json_object_get(content, name);
    *present = false;
    *out = 0;
    if (v == NULL || json_is_null(v)) {
        if (required)
            return error_reply("TypeError", "history_request: \"%s\" is required (an integer)", name);
        return NULL;
    }
    if (!json_is_integer(v))
        return error_reply("TypeError", "history_request: \"%s\" must be an integer", name);
    if (json_integer_value(v) < min)
        return error_reply("ValueError", "history_request: \"%s\" must be at least %lld", name, (long long)min);
    *present = true;
    *out = json_integer_value(v);
    return NULL;
}

/* Checks the request content into r.  Returns NULL, or a new error reply. */
static json_t *
parse_request(json_t *content, request_t *r)
{
    json_t *e;
    bool present;

    memset(r, 0, sizeof *r);
    if (!json_is_object(content))
        return error_reply("TypeError", "history_request: the content is not an object");
    json_t *type = json_object_get(content, "hist_access_type");
    if (type == NULL || !json_is_string(type))
        return error_reply("TypeError", "history_request: \"hist_access_type\" is required (\"tail\", "
                                        "\"range\" or \"search\")");
    const char *t = json_string_value(type);
    if (strcmp(t, "tail") == 0) {
        r->access = ACCESS_TAIL;
    } else if (strcmp(t, "range") == 0) {
        r->access = ACCESS_RANGE;
    } else if (strcmp(t, "search") == 0) {
        r->access = ACCESS_SEARCH;
    } else if (json_string_length(type) <= MAX_ECHO && strlen(t) == json_string_length(type)) {
        return error_reply("ValueError", "history_request: unknown hist_access_type \"%s\" (expected \"tail\", "
                                         "\"range\" or \"search\")", t);
    } else {
        return error_reply("ValueError", "history_request: unknown hist_access_type (expected \"tail\", "
                                         "\"range\" or \"search\")");
    }
    if ((e = get_bool(content, "raw", true, &r->raw)) != NULL ||
        (e = get_bool(content, "output", false, &r->output)) != NULL)
        return e;
    switch (r->access) {
    case ACCESS_TAIL:
        r->has_n = true;
        return get_int(content, "n", true, 0, &present, &r->n);
    case ACCESS_RANGE:
        if ((e = get_int(content, "session", false, LLONG_MIN, &present, &r->session)) != NULL ||
            (e = get_int(content, "start", false, LLONG_MIN, &present, &r->start)) != NULL)
            return e;
        return get_int(content, "stop", false, LLONG_MIN, &r->has_stop, &r->stop);
    case ACCESS_SEARCH: {
        json_t *p = json_object_get(content, "pattern");
        if (p == NULL || !json_is_string(p))
            return error_reply("TypeError", "history_request: a search needs a string \"pattern\" (a glob)");
        r->pattern = json_string_value(p);
        if ((e = get_int(content, "n", false, 0, &r->has_n, &r->n)) != NULL)
            return e;
        return get_bool(content, "unique", false, &r->unique);
    }
    }
    return NULL;
}

/* A JSON string of len bytes of text that should be UTF-8.  Text that is not (a file damaged, or written by
 * another program) has each bad byte replaced with U+FFFD rather than failing the whole reply.  NULL only out
 * of memory. */
static json_t *
text_json(const unsigned char *s, size_t len)
{
    json_t *j = json_stringn((const char *)s, len);
    if (j != NULL)
        return j;
    if (len > (SIZE_MAX - 1) / 3)
        return NULL;
    unsigned char *fixed = malloc(len * 3 + 1), *o = fixed;
    if (fixed == NULL)
        return NULL;
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        size_t need = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2
                                                               : c >= 0xF0 && c <= 0xF4 ? 3 : 4;
        bool ok = need < 4 && i + need < len;
        unsigned cp = need == 0 ? c : need == 1 ? c & 0x1F : need == 2 ? c & 0x0F : c & 0x07;
        for (size_t k = 1; ok && k <= need; k++) {
            ok = (s[i + k] & 0xC0) == 0x80;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        /* Overlong forms, surrogates and code points above U+10FFFF are invalid, as jansson judges. */
        if (ok && ((need == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
                   (need == 3 && (cp < 0x10000 || cp > 0x10FFFF))))
            ok = false;
        if (ok) {
            memcpy(o, s + i, need + 1);
            o += need + 1;
            i += need + 1;
        } else {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    j = json_stringn((const char *)fixed, (size_t)(o - fixed));
    free(fixed);
    return j;
}

/* Runs st (bound by the caller) and appends one entry per row to hist.  The columns are session, line,
 * source_raw, source, output; r->raw chooses the source.  Returns 0, -1 on a database error (the message is
 * sqlite3_errmsg), -2 out of memory. */
static int
collect(sqlite3_stmt *st, request_t *r, json_t *hist)
{
    int rc, col = r->raw ? 2 : 3;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        /* The first entry is always given, whatever its size (a tail of 1 of a huge cell). */
        size_t len = (size_t)sqlite3_column_bytes(st, col) + (r->output ? (size_t)sqlite3_column_bytes(st, 4) : 0);
        size_t have = json_array_size(hist);
        if (have >= r->max_entries || (have > 0 && (r->bytes >= r->max_bytes || len > r->max_bytes - r->bytes))) {
            r->truncated = true;
            return 0;
        }
        r->bytes += len;
        const unsigned char *src = sqlite3_column_text(st, col);
        json_t *source = text_json(src != NULL ? src : (const unsigned char *)"",
                                   (size_t)sqlite3_column_bytes(st, col));
        json_t *item = source;
        if (r->output && source != NULL) {
            json_t *out = json_null();
            if (sqlite3_column_type(st, 4) != SQLITE_NULL)
                out = text_json(sqlite3_column_text(st, 4), (size_t)sqlite3_column_bytes(st, 4));
            item = out != NULL ? json_pack("[o, o]", source, out) : NULL;
            if (out == NULL)
                json_decref(source);
        }
        json_t *entry = item != NULL ? json_pack("[I, I, o]", (json_int_t)sqlite3_column_int64(st, 0),
                                                  (json_int_t)sqlite3_column_int64(st, 1), item)
                                     : NULL;
        if (entry == NULL || json_array_append_new(hist, entry) < 0)
            return -2;
    }
    return rc == SQLITE_DONE ? 0 : -1;
}

/* Prepares sql, binds the integers args[0..nargs-1] to ?1.. in order, skipping ?text_at, where the pattern goes
 * when text_at > 0; runs it and appends to hist.  Returns as collect. */
static int
query(sqlite3 *db, const char *sql, request_t *r, const sqlite3_int64 *args, int nargs, int text_at,
      json_t *hist)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return -1;
    for (int i = 0, p = 1; i < nargs; i++, p++) {
        if (p == text_at)
            p++;
        sqlite3_bind_int64(st, p, args[i]);
    }
    if (text_at > 0)
        sqlite3_bind_text(st, text_at, r->pattern, -1, SQLITE_STATIC);
    int rc = collect(st, r, hist);
    sqlite3_finalize(st);
    return rc;
}

/* The columns collect reads, for a history row h and its output o. */
#define SELECT_ENTRY \
    "SELECT h.session, h.line, h.source_raw, h.source, o.output FROM history AS h" \
    " LEFT JOIN output_history AS o ON o.session = h.session AND o.line = h.line "

/* Reverses the order of the array's elements in place. */
static void
reverse(json_t *arr)
{
    size_t n = json_array_size(arr);
    for (size_t i = 0; i < n / 2; i++) {
        json_t *a = json_incref(json_array_get(arr, i)), *b = json_incref(json_array_get(arr, n - 1 - i));
        json_array_set_new(arr, i, b);
        json_array_set_new(arr, n - 1 - i, a);
    }
}

/* Fills hist for r.  Returns as collect. */
static int
answer(sqlite3 *db, sqlite3_int64 current, request_t *r, json_t *hist)
{
    int rc;
    switch (r->access) {
    case ACCESS_TAIL: {
        /* As IPython's HistoryManager.get_tail: the current session's cells count as the latest, even when a
         * kernel started later has a higher session number; each query walks the primary key backwards. */
        sqlite3_int64 a[2] = { current, r->n };
        rc = query(db, SELECT_ENTRY "WHERE h.session = ?1 ORDER BY h.line DESC LIMIT ?2", r, a, 2, 0, hist);
        a[1] = r->n - (json_int_t)json_array_size(hist);
        if (rc == 0 && a[1] > 0)
            rc = query(db, SELECT_ENTRY "WHERE h.session != ?1 ORDER BY h.session DESC, h.line DESC LIMIT ?2",
                       r, a, 2, 0, hist);
        reverse(hist);
        return rc;
    }
    case ACCESS_RANGE: {
        json_int_t session = r->session <= 0 ? r->session + current : r->session;
        json_int_t start = r->start, stop = r->has_stop ? r->stop : 0;
        bool to_end = stop == 0; /* IPython tests `not stop` before adjusting: 0 is the end, -end is nothing */
        if (start < 0 || stop < 0) {
            /* Python slice semantics over the lines 0..last, as IPython's range of the current session. */
            sqlite3_stmt *st = NULL;
            if (sqlite3_prepare_v2(db, "SELECT coalesce(max(line), 0) + 1 FROM history WHERE session = ?1",
                                   -1, &st, NULL) != SQLITE_OK)
                return -1;
            sqlite3_bind_int64(st, 1, session);
            rc = sqlite3_step(st);
            json_int_t end = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
            sqlite3_finalize(st);
            if (rc != SQLITE_ROW)
                return -1;
            if (start < 0)
                start += end;
            if (stop < 0)
                stop += end;
        }
        sqlite3_int64 a[3] = { session, start, stop };
        if (to_end)
            return query(db, SELECT_ENTRY "WHERE h.session = ?1 AND h.line >= ?2 ORDER BY h.line", r, a, 2, 0,
                         hist);
        return query(db, SELECT_ENTRY "WHERE h.session = ?1 AND h.line >= ?2 AND h.line < ?3 ORDER BY h.line",
                     r, a, 3, 0, hist);
    }
    case ACCESS_SEARCH: {
        /* As IPython's search: the glob is matched against source_raw whatever "raw" says, "unique" keeps the
         * latest row of each distinct source_raw, and n then takes the last n of what is left. */
        sqlite3_int64 a[1] = { r->has_n ? r->n : -1 }; /* LIMIT -1: no limit */
        if (r->unique)
            rc = query(db,
                       "SELECT session, line, source_raw, source, output FROM ("
                       "SELECT h.session, h.line, h.source_raw, h.source, o.output, row_number() OVER"
                       " (PARTITION BY h.source_raw ORDER BY h.session DESC, h.line DESC) AS latest"
                       " FROM history AS h LEFT JOIN output_history AS o ON o.session = h.session AND o.line = h.line"
                       " WHERE h.source_raw GLOB ?1)"
                       " WHERE latest = 1 ORDER BY session DESC, line DESC LIMIT ?2",
                       r, a, 1, 1, hist);
        else
            rc = query(db,
                       SELECT_ENTRY "WHERE h.source_raw GLOB ?1 ORDER BY h.session DESC, h.line DESC LIMIT ?2", r,
                       a, 1, 1, hist);
        reverse(hist);
        return rc;
    }
    }
    return 0;
}

json_t *
pyc__history_query(sqlite3 *db, int session, json_t *content)
{
    request_t r;
    json_t *e = parse_request(content, &r);
    if (e != NULL)
        return e;
    r.max_entries = PYC_HISTORY_REPLY_ENTRIES;
    r.max_bytes = PYC_HISTORY_REPLY_BYTES;
    r.bytes = 0;
    r.truncated = false;
    const char *v = getenv("PYC_HISTORY_REPLY_MAX");
    if (v != NULL && v[0] != '\0' && strtoll(v, NULL, 10) > 0)
        r.max_entries = (size_t)strtoll(v, NULL, 10);
    json_t *hist = json_array();
    if (hist == NULL)
        return NULL;
    int rc = db != NULL ? answer(db, session, &r, hist) : 0;
    if (rc == -2) {
        json_decref(hist);
        return NULL;
    }
    if (rc < 0) {
        json_decref(hist);
        return error_reply("HistoryError", "history: %s", sqlite3_errmsg(db));
    }
    if (r.truncated)
        return json_pack("{s:s, s:o, s:{s:b, s:I, s:I}}", "status", "ok", "history", hist, "pyc", "truncated", 1,
                         "max_entries", (json_int_t)r.max_entries, "max_bytes", (json_int_t)r.max_bytes);
    return json_pack("{s:s, s:o}", "status", "ok", "history", hist);
}
