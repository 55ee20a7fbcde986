/*
 * execreq.c -- decodes an execute_request once (execreq.h): content members with the protocol's defaults,
 * metadata.pyc's limits, isolation, transaction, snapshot, color and pace, and the code that runs without the
 * first-line magics %%isolate and %%transaction.
 */
#include "execreq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A boolean member, or dflt when it is absent or not a boolean. */
static bool
get_bool(json_t *obj, const char *key, bool dflt)
{
    json_t *v = json_object_get(obj, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

/* True when code starts with the cell magic `magic` (its whole first word: followed by a space, an end of
 * line or the end). */
static bool
first_line_is(const char *code, const char *magic)
{
    size_t n = strlen(magic);
    return code != NULL && strncmp(code, magic, n) == 0 &&
           (code[n] == '\n' || code[n] == ' ' || code[n] == '\0' || code[n] == '\r');
}

/* The text after code's first line: its end ("") when it has only one, so that what is left still points into
 * code (execreq.h: code points into source; the fuzz target checks it). */
static const char *
after_first_line(const char *code)
{
    const char *nl = strchr(code, '\n');
    return nl != NULL ? nl + 1 : code + strlen(code);
}

/* metadata.pyc.isolate, then a first line %%isolate [SECONDS]: sets r->isolated, r->isolate_timeout and moves
 * r->code past the line.  Returns -1 with err for an isolation that is asked for but misspelt: a client that
 * asked for isolation must not get its cell run in the kernel itself, with an "ok" that reads as if it had
 * been isolated. */
static int
decode_isolation(pyc_execreq_t *r, json_t *pmd, pyc_error_t *err)
{
    json_t *iso = json_object_get(pmd, "isolate");
    if (json_is_string(iso) && strcmp(json_string_value(iso), "fork") == 0) {
        r->isolated = true;
        return 0;
    }
    if (iso != NULL && !json_is_null(iso)) {
        char *text = json_dumps(iso, JSON_COMPACT | JSON_ENCODE_ANY);
        pyc_error_set(err, "metadata.pyc.isolate must be \"fork\" (or null, or absent: not isolated), not %.64s",
                      text != NULL ? text : "that value");
        free(text);
        return -1;
    }
    if (!first_line_is(r->code, "%%isolate") || r->code[9] == '\r')
        return 0;
    const char *p = r->code + 9;
    const char *nl = strchr(r->code, '\n');
    size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
    char arg[64];
    snprintf(arg, sizeof arg, "%.*s", (int)(n < sizeof arg - 1 ? n : sizeof arg - 1), p);
    if (strspn(arg, " ") != strlen(arg) && pyc_limits_parse_seconds(arg, &r->isolate_timeout, err) < 0)
        return -1;
    r->isolated = true;
    r->code = after_first_line(r->code);
    return 0;
}

bool
pyc_execreq_silent(json_t *content)
{
    return get_bool(content, "silent", false);
}

int
pyc_execreq_decode(pyc_execreq_t *r, json_t *content, json_t *metadata, const pyc_limits_t *kernel)
{
    json_t *pmd = json_object_get(metadata, "pyc");
    pyc_error_t *err = &r->why;
    r->source_v = NULL;
    r->source = r->code = NULL;
    r->refused = NULL;
    r->isolated = r->transaction = false;
    r->isolate_timeout = 0;
    r->silent = pyc_execreq_silent(content);
    r->store_history = r->silent ? false : get_bool(content, "store_history", true);
    r->stop_on_error = get_bool(content, "stop_on_error", true);
    r->allow_stdin = get_bool(content, "allow_stdin", false);
    json_t *ue = json_object_get(content, "user_expressions");
    r->user_expressions = json_is_object(ue) ? ue : NULL;
    json_t *color = json_is_object(pmd) ? json_object_get(pmd, "color") : NULL;
    r->color = json_is_boolean(color) ? json_is_true(color) : -1;
    r->pace = !json_is_object(pmd) || !json_is_false(json_object_get(pmd, "pace"));
    json_t *snap = json_is_object(pmd) ? json_object_get(pmd, "snapshot") : NULL;
    r->snapshot = json_is_true(snap) || json_is_string(snap) ? snap : NULL;
    r->limits = (pyc_cell_limits_t){kernel->cell_timeout, kernel->cell_cpu, kernel->output_bytes,
                                    kernel->output_messages};

    json_t *code = json_object_get(content, "code");
    if (!json_is_string(code)) {
        r->refused = err->text;
        return pyc_error_set(err, "execute_request content lacks a string 'code'");
    }
    r->source_v = code;
    r->source = r->code = json_string_value(code);
    r->transaction = first_line_is(r->source, "%%transaction") ||
                     (json_is_object(pmd) && json_is_true(json_object_get(pmd, "transaction")));
    if (pyc_limits_for_cell(kernel, pmd, &r->limits, err) < 0 || decode_isolation(r, pmd, err) < 0) {
        r->refused = err->text;
        return -1;
    }
    if (first_line_is(r->code, "%%transaction"))
        r->code = after_first_line(r->code);
    return 0;
}
