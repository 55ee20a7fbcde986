/*
 * limit.c -- parsing the session limits; see limit.h.
 *
 * Durations and sizes are parsed by src/common/units.c (the same code checks `pyc new`'s limit flags): one
 * number and one optional unit with nothing around them but spaces; negatives, NaN, infinities and sizes past
 * SIZE_MAX are refused, since a limit that is silently misread is worse than none.
 */
#include "limit.h"

#include "units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const pyc_limit_desc_t pyc_limit_descs[] = {
    {"idle-timeout", "PYC_IDLE_TIMEOUT", "shut down cleanly after this long without a request"},
    {"lifetime", "PYC_LIFETIME", "shut down this long after start (a running cell is stopped first)"},
    {"shutdown-grace", "PYC_SHUTDOWN_GRACE", "time atexit handlers and finalization may take at shutdown"},
    {"cell-timeout", "PYC_CELL_TIMEOUT", "interrupt a cell that runs longer than this"},
    {"cell-grace", "PYC_CELL_GRACE", "end the kernel when an interrupted cell has not stopped after this"},
    {"output-limit", "PYC_OUTPUT_LIMIT", "bytes of output a cell may publish"},
    {"output-messages", "PYC_OUTPUT_MESSAGES", "output messages a cell may publish"},
    {"memory-limit", "PYC_MEMORY_LIMIT", "memory the session may allocate after start-up"},
    {"event-output", "PYC_EVENT_OUTPUT", "bytes of a cell's output its cell_done event carries (at most 4096)"},
    {"cell-cpu", "PYC_CELL_CPU", "interrupt a cell that has spent this much CPU time (all the kernel's threads)"},
    {"open-files", "PYC_OPEN_FILES", "files (descriptors) the session may have open beyond the kernel's own"},
    {NULL, NULL, NULL},
};

void
pyc_limits_init(pyc_limits_t *l)
{
    memset(l, 0, sizeof *l);
    l->cell_grace = PYC_LIMITS_DEFAULT_GRACE;
    l->shutdown_grace = PYC_LIMITS_DEFAULT_SHUTDOWN_GRACE;
    l->output_bytes = PYC_LIMITS_DEFAULT_OUTPUT;
}

int
pyc_limits_parse_seconds(const char *text, double *out, pyc_error_t *err)
{
    return pyc_units_seconds(text, out, err);
}

int
pyc_limits_parse_bytes(const char *text, size_t *out, pyc_error_t *err)
{
    return pyc_units_bytes(text, out, err);
}

int
pyc_limits_set(pyc_limits_t *l, const char *option, const char *text, pyc_error_t *err)
{
    pyc_error_t e;
    int rc;
    if (strcmp(option, "idle-timeout") == 0)
        rc = pyc_limits_parse_seconds(text, &l->idle_timeout, &e);
    else if (strcmp(option, "lifetime") == 0)
        rc = pyc_limits_parse_seconds(text, &l->lifetime, &e);
    else if (strcmp(option, "shutdown-grace") == 0)
        rc = pyc_limits_parse_seconds(text, &l->shutdown_grace, &e);
    else if (strcmp(option, "cell-timeout") == 0)
        rc = pyc_limits_parse_seconds(text, &l->cell_timeout, &e);
    else if (strcmp(option, "cell-grace") == 0) {
        double g = 0;
        rc = pyc_limits_parse_seconds(text, &g, &e);
        if (rc == 0 && g <= 0)
            rc = pyc_error_set(&e, "the grace must be more than 0 s (a stuck cell ends the kernel after it)");
        if (rc == 0)
            l->cell_grace = g;
    }
    else if (strcmp(option, "output-limit") == 0)
        rc = pyc_limits_parse_bytes(text, &l->output_bytes, &e);
    else if (strcmp(option, "output-messages") == 0)
        rc = pyc_units_count(text, SIZE_MAX, &l->output_messages, &e);
    else if (strcmp(option, "memory-limit") == 0)
        rc = pyc_limits_parse_bytes(text, &l->memory, &e);
    else if (strcmp(option, "event-output") == 0) {
        size_t n = 0;
        rc = pyc_limits_parse_bytes(text, &n, &e);
        if (rc == 0 && n > PYC_LIMITS_EVENT_OUTPUT_MAX)
            rc = pyc_error_set(&e, "at most %zu bytes of a cell's output go into its event",
                               PYC_LIMITS_EVENT_OUTPUT_MAX);
        if (rc == 0)
            l->event_output = n;
    } else if (strcmp(option, "cell-cpu") == 0)
        rc = pyc_limits_parse_seconds(text, &l->cell_cpu, &e);
    else if (strcmp(option, "open-files") == 0)
        rc = pyc_units_count(text, PYC_UNITS_MAX_FILES, &l->open_files, &e);
    else
        return pyc_error_set(err, "unknown limit '%.64s'", option);
    if (rc < 0)
        return pyc_error_set(err, "%s: %s", option, e.text);
    return 0;
}

int
pyc_limits_from_env(pyc_limits_t *l, pyc_error_t *err)
{
    for (const pyc_limit_desc_t *d = pyc_limit_descs; d->option != NULL; d++) {
        const char *v = getenv(d->env);
        if (v == NULL || v[0] == '\0')
            continue;
        pyc_error_t e;
        if (pyc_limits_set(l, d->option, v, &e) < 0)
            return pyc_error_set(err, "%s: %s", d->env, e.text);
    }
    return 0;
}

json_t *
pyc_limits_to_json(const pyc_limits_t *l)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    const struct {
        const char *name;
        double v;
    } secs[] = {{"idle_timeout", l->idle_timeout}, {"lifetime", l->lifetime},
                {"shutdown_grace", l->shutdown_grace}, {"cell_timeout", l->cell_timeout},
                {"cell_cpu", l->cell_cpu}};
    for (size_t i = 0; i < sizeof secs / sizeof secs[0]; i++) {
        if (secs[i].v > 0)
            json_object_set_new(o, secs[i].name, json_real(secs[i].v));
    }
    if (l->cell_timeout > 0 || l->lifetime > 0 || l->cell_cpu > 0)
        json_object_set_new(o, "cell_grace", json_real(l->cell_grace));
    const struct {
        const char *name;
        size_t v;
    } sizes[] = {{"output_limit", l->output_bytes}, {"output_messages", l->output_messages},
                 {"memory_limit", l->memory}, {"event_output", l->event_output}, {"open_files", l->open_files}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (sizes[i].v > 0)
            json_object_set_new(o, sizes[i].name, json_integer((json_int_t)sizes[i].v));
    }
    return o;
}

double
pyc_limits_tighter(double a, double b)
{
    return a <= 0 ? b : b <= 0 ? a : (a < b ? a : b);
}

static size_t
tighter_z(size_t a, size_t b)
{
    return a == 0 ? b : b == 0 ? a : (a < b ? a : b);
}

/* Reads a non-negative number from the metadata; absent or null is 0 (none). */
static int
md_number(json_t *md, const char *key, double max, double *out, pyc_error_t *err)
{
    json_t *v = json_object_get(md, key);
    *out = 0;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0 ||
        json_number_value(v) > max)
        return pyc_error_set(err, "metadata.pyc.%s must be a number from 0 to %g", key, max);
    *out = json_number_value(v);
    return 0;
}

int
pyc_limits_for_cell(const pyc_limits_t *l, json_t *md, pyc_cell_limits_t *out, pyc_error_t *err)
{
    double t, c, b, m;
    out->timeout = l->cell_timeout;
    out->cpu = l->cell_cpu;
    out->output_bytes = l->output_bytes;
    out->output_messages = l->output_messages;
    if (md == NULL || json_is_null(md))
        return 0;
    if (!json_is_object(md))
        return pyc_error_set(err, "metadata.pyc must be an object");
    if (md_number(md, "timeout", 1e9, &t, err) < 0 || md_number(md, "cpu", 1e9, &c, err) < 0 ||
        md_number(md, "output_limit", 1e18, &b, err) < 0 ||
        md_number(md, "output_messages", 1e18, &m, err) < 0)
        return -1;
    out->timeout = pyc_limits_tighter(out->timeout, t);
    out->cpu = pyc_limits_tighter(out->cpu, c);
    out->output_bytes = tighter_z(out->output_bytes, (size_t)b);
    out->output_messages = tighter_z(out->output_messages, (size_t)m);
    return 0;
}
