/*
 * outcome.c -- see outcome.h.
 */
#include "outcome.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "guard.h"
#include "jsontext.h"

const char *const pyc_outcome_limit_names[PYC_GUARD_NWHY] = {
    [PYC_GUARD_NONE] = NULL,
    [PYC_GUARD_DEADLINE] = "deadline",
    [PYC_GUARD_LIFETIME] = "lifetime",
    [PYC_GUARD_IDLE] = "idle",
    [PYC_GUARD_MEMORY] = "memory",
    [PYC_GUARD_CPU] = "cpu",
};

const char *
pyc_outcome_of_limit(int why)
{
    return why == PYC_GUARD_LIFETIME ? "lifetime" : why == PYC_GUARD_MEMORY ? "error" : "timeout";
}

static double
ts_diff(const struct timespec *a, const struct timespec *b)
{
    return (double)(a->tv_sec - b->tv_sec) + (double)(a->tv_nsec - b->tv_nsec) / 1e9;
}

/* CPU seconds of the children reaped so far. */
static double
children_cpu(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_CHILDREN, &ru) < 0)
        return 0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec / 1e6;
}

void
pyc_cellclock_start(pyc_cellclock_t *c)
{
    clock_gettime(CLOCK_MONOTONIC, &c->wall);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c->cpu);
    c->children_cpu = children_cpu();
}

void
pyc_cellclock_read(const pyc_cellclock_t *c, double *wall, double *cpu)
{
    struct timespec w, p;
    clock_gettime(CLOCK_MONOTONIC, &w);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p);
    *wall = ts_diff(&w, &c->wall);
    *cpu = ts_diff(&p, &c->cpu) + (children_cpu() - c->children_cpu);
}

json_t *
pyc_outcome_limit_error(const pyc_limit_stop_t *s, json_t *traceback)
{
    char evalue[512];
    const char *ename = s->why == PYC_GUARD_LIFETIME ? "KernelLifetimeEnded"
                        : s->why == PYC_GUARD_MEMORY   ? "MemoryError"
                        : s->why == PYC_GUARD_CPU      ? "CellCPUTimeout"
                        : s->what != NULL              ? "RequestTimeout"
                                                       : "CellTimeout";
    const char *what = s->what != NULL ? s->what : s->isolated ? "the isolated cell" : "the cell";
    if (s->why == PYC_GUARD_MEMORY)
        snprintf(evalue, sizeof evalue, "%s grew the kernel's memory past its cap of %.0f bytes (shared memory "
                 "counted)", what, s->memory_cap);
    else if (s->why == PYC_GUARD_CPU)
        snprintf(evalue, sizeof evalue, "%s ran past its CPU time limit of %g s (spent by %s, every thread of it, "
                 "the cell's and any other)", what, s->cell_cpu,
                 s->isolated ? "its process and the kernel's" : "the kernel's process");
    else if (s->why == PYC_GUARD_LIFETIME)
        snprintf(evalue, sizeof evalue, "the kernel's lifetime of %g s ended while %s ran", s->lifetime, what);
    else
        snprintf(evalue, sizeof evalue, "%s ran past its deadline of %g s", what, s->cell_timeout);
    size_t n = strlen(evalue);
    if (s->stuck)
        snprintf(evalue + n, sizeof evalue - n, " and did not stop within %g s of being interrupted (stuck in "
                 "code that does not check for signals); the kernel is ending and the session's state is lost",
                 s->grace);
    else if (s->isolated)
        snprintf(evalue + n, sizeof evalue - n, "; its process was killed and the kernel's state is as it was "
                 "before the cell");
    else
        snprintf(evalue + n, sizeof evalue - n, "; it was interrupted and the kernel goes on (what the cell did "
                 "before the interrupt stays done)%s", s->why == PYC_GUARD_LIFETIME ? ", then shuts down" : "");
    json_t *tb = json_array();
    if (json_is_array(traceback) && !s->isolated) {
        /* Where the cell was when it was stopped, without the KeyboardInterrupt line that the limit's own
         * line replaces. */
        json_array_extend(tb, traceback);
        size_t len = json_array_size(tb);
        const char *last = len > 0 ? json_string_value(json_array_get(tb, len - 1)) : NULL;
        if (last != NULL && strncmp(last, "KeyboardInterrupt", 17) == 0)
            json_array_remove(tb, len - 1);
    }
    json_array_append_new(tb, json_sprintf("%s: %s", ename, evalue));
    return json_pack("{s:s, s:s, s:o}", "ename", ename, "evalue", evalue, "traceback", tb);
}

/* What metadata.pyc derives from an outcome, computed in one place for its two writers. */
typedef struct facts {
    bool dropped;                /* output_dropped */
    const char *limit;           /* limit, NULL for null */
    bool timed_out;
    bool ending;                 /* kernel_ending, and state "lost" */
} facts_t;

static facts_t
facts_of(const pyc_outcome_t *o)
{
    const pyc_outgate_stats_t *g = &o->output;
    /* The state is the session's, as README's table says: "intact" only when the kernel and its namespace go
     * on after this reply.  A kernel that ends after it -- cleanly at its lifetime, or at a shutdown that came
     * during the cell -- loses its state as surely as a stuck one, and a client must not send its next cell
     * there. */
    return (facts_t){
        .dropped = g->dropped_msgs > 0 || g->dropped_bytes > 0,
        .limit = o->why > PYC_GUARD_NONE && o->why < PYC_GUARD_NWHY ? pyc_outcome_limit_names[o->why] : NULL,
        .timed_out = o->why == PYC_GUARD_DEADLINE || o->why == PYC_GUARD_CPU || o->why == PYC_GUARD_LIFETIME,
        .ending = o->lost || o->kernel_ending,
    };
}

json_t *
pyc_outcome_metadata(const pyc_outcome_t *o)
{
    const pyc_outgate_stats_t *g = &o->output;
    facts_t f = facts_of(o);
    json_t *output = json_pack("{s:I, s:I, s:I, s:I}", "bytes", (json_int_t)g->bytes, "messages",
                               (json_int_t)g->msgs, "dropped_bytes", (json_int_t)g->dropped_bytes,
                               "dropped_messages", (json_int_t)g->dropped_msgs);
    return json_pack("{s:s, s:b, s:b, s:o, s:b, s:o, s:b, s:s, s:b, s:f, s:f}", "outcome", o->outcome,
                     "interrupted", o->interrupted, "timed_out", f.timed_out, "limit",
                     f.limit != NULL ? json_string(f.limit) : json_null(), "output_dropped", f.dropped, "output",
                     output, "memory_cap_hit", o->memory_hit, "state", f.ending ? "lost" : "intact",
                     "kernel_ending", f.ending, "wall_time", o->wall, "cpu_time", o->cpu);
}

/* The members pyc_outcome_metadata writes, which an extra member of the text form must not name. */
static const char *const fixed_members[] = {"outcome", "interrupted", "timed_out", "limit", "output_dropped",
                                            "output", "memory_cap_hit", "state", "kernel_ending", "wall_time",
                                            "cpu_time"};

static bool
seconds_fit(double t)
{
    return t >= 0 && t < 1e9;       /* false for NaN too */
}

/* Appends t seconds (seconds_fit) rounded to the nanosecond as a JSON real: at least one digit after the
 * point and no trailing zeros ("0.5", "1.011688964", "0.0"), so that it parses as a real, as jansson's
 * "%.17g" does, without printf's cost for doubles. */
static int
add_seconds(pyc_buf_t *b, double t)
{
    uint64_t ns = (uint64_t)(t * 1e9 + 0.5);
    unsigned frac = (unsigned)(ns % 1000000000u);
    char digits[10] = {'.'};
    size_t n = 10;
    for (size_t i = 9; i > 0; i--, frac /= 10)
        digits[i] = (char)('0' + frac % 10);
    while (n > 2 && digits[n - 1] == '0')
        n--;
    return pyc_buf_add_int(b, (long long)(ns / 1000000000u)) < 0 || pyc_buf_add(b, digits, n) < 0 ? -1 : 0;
}

/* Appends a member's name with its quotes and colon, and the separating comma before it unless first. */
static int
add_name(pyc_buf_t *b, const char *name, bool first)
{
    return (first ? 0 : pyc_buf_add(b, ",", 1)) < 0 || pyc_buf_add(b, "\"", 1) < 0 ||
                   pyc_buf_adds(b, name) < 0 || pyc_buf_add(b, "\":", 2) < 0
               ? -1
               : 0;
}

static int
add_bool(pyc_buf_t *b, const char *name, bool v)
{
    return add_name(b, name, false) < 0 || (v ? pyc_buf_add(b, "true", 4) : pyc_buf_add(b, "false", 5)) < 0
               ? -1
               : 0;
}

static int
add_count(pyc_buf_t *b, const char *name, size_t v, bool first)
{
    return add_name(b, name, first) < 0 || pyc_buf_add_int(b, (long long)v) < 0 ? -1 : 0;
}

static int
add_extra(pyc_buf_t *b, json_t *extra)
{
    const char *key;
    json_t *v;
    json_object_foreach(extra, key, v) {
        if (pyc_buf_add(b, ",", 1) < 0 || pyc_buf_add_json_string(b, key, strlen(key)) < 0 ||
            pyc_buf_add(b, ":", 1) < 0 || pyc_json_text(b, v) < 0)
            return -1;
    }
    return 0;
}

int
pyc_outcome_metadata_text(pyc_buf_t *b, const pyc_outcome_t *o, json_t *extra)
{
    const pyc_outgate_stats_t *g = &o->output;
    facts_t f = facts_of(o);
    size_t start = b->len;
    if (o->outcome == NULL || !seconds_fit(o->wall) || !seconds_fit(o->cpu))
        return -1;
    if (extra != NULL) {
        if (!json_is_object(extra))
            return -1;
        for (size_t i = 0; i < sizeof fixed_members / sizeof fixed_members[0]; i++)
            if (json_object_get(extra, fixed_members[i]) != NULL)
                return -1;
    }
    if (pyc_buf_add(b, "{", 1) < 0 || add_name(b, "outcome", true) < 0 ||
        pyc_buf_add_json_string(b, o->outcome, strlen(o->outcome)) < 0 ||
        add_bool(b, "interrupted", o->interrupted) < 0 || add_bool(b, "timed_out", f.timed_out) < 0 ||
        add_name(b, "limit", false) < 0 ||
        (f.limit != NULL ? pyc_buf_add_json_string(b, f.limit, strlen(f.limit)) : pyc_buf_add(b, "null", 4)) < 0 ||
        add_bool(b, "output_dropped", f.dropped) < 0 || add_name(b, "output", false) < 0 ||
        pyc_buf_add(b, "{", 1) < 0 || add_count(b, "bytes", g->bytes, true) < 0 ||
        add_count(b, "messages", g->msgs, false) < 0 || add_count(b, "dropped_bytes", g->dropped_bytes, false) < 0 ||
        add_count(b, "dropped_messages", g->dropped_msgs, false) < 0 || pyc_buf_add(b, "}", 1) < 0 ||
        add_bool(b, "memory_cap_hit", o->memory_hit) < 0 || add_name(b, "state", false) < 0 ||
        pyc_buf_adds(b, f.ending ? "\"lost\"" : "\"intact\"") < 0 || add_bool(b, "kernel_ending", f.ending) < 0 ||
        add_name(b, "wall_time", false) < 0 || add_seconds(b, o->wall) < 0 || add_name(b, "cpu_time", false) < 0 ||
        add_seconds(b, o->cpu) < 0 || (extra != NULL && add_extra(b, extra) < 0) || pyc_buf_add(b, "}", 1) < 0) {
        b->len = start;
        if (b->data != NULL)
            b->data[start] = '\0';
        return -1;
    }
    return 0;
}

/* The size of v as compact JSON. */
static size_t
json_size(json_t *v)
{
    size_t n = 0;
    free(pyc_json_text_dup(v, &n));
    return n;
}

json_t *
pyc_outcome_fit_error(json_t *error, size_t budget)
{
    if (!json_is_object(error) || json_size(error) <= budget)
        return json_incref(error);
    json_t *e = json_deep_copy(error);
    size_t before = json_size(e);
    const char *ev = json_string_value(json_object_get(e, "evalue"));
    if (ev != NULL && strlen(ev) > 1000) {
        size_t cut = 1000;
        while (cut > 0 && ((unsigned char)ev[cut] & 0xC0) == 0x80)
            cut--;
        json_object_set_new(e, "evalue", json_sprintf("%.*s... [cut by the output limit]", (int)cut, ev));
    }
    json_t *tb = json_object_get(e, "traceback");
    size_t dropped = 0;
    while (json_is_array(tb) && json_array_size(tb) > 0 && json_size(e) > budget) {
        json_array_remove(tb, 0);
        dropped++;
    }
    /* The last line, alone, may still be too large: cut it like evalue. */
    size_t n = json_is_array(tb) ? json_array_size(tb) : 0;
    const char *last = n > 0 ? json_string_value(json_array_get(tb, n - 1)) : NULL;
    if (last != NULL && json_size(e) > budget && strlen(last) > 1000) {
        size_t cut = 1000;
        while (cut > 0 && ((unsigned char)last[cut] & 0xC0) == 0x80)
            cut--;
        json_array_set_new(tb, n - 1, json_sprintf("%.*s... [cut by the output limit]", (int)cut, last));
    }
    if (json_is_array(tb) && (dropped > 0 || json_size(e) < before))
        json_array_insert_new(tb, 0, json_sprintf("[pyc] the output limit cut this error: %zu traceback line%s "
                                                  "dropped", dropped, dropped == 1 ? "" : "s"));
    return e;
}

json_t *
pyc_outcome_error_within(json_t *error, size_t budget)
{
    if (!json_is_object(error))
        return NULL;
    json_t *fit = pyc_outcome_fit_error(error, budget);
    if (json_size(fit) <= budget)
        return fit;
    /* Still too large: no traceback, and evalue cut on a whole UTF-8 character until the error fits. */
    json_t *e = json_deep_copy(fit);
    json_decref(fit);
    const char *ev = json_string_value(json_object_get(e, "evalue"));
    char *value = strdup(ev != NULL ? ev : "");
    json_object_set_new(e, "traceback", json_array());
    json_object_set_new(e, "evalue", json_string(""));
    size_t base = json_size(e), cut = value != NULL ? strlen(value) : 0;
    if (value == NULL || base > budget) {
        free(value);
        json_decref(e);
        return NULL;
    }
    /* The longest prefix, cut on a whole character, whose escaped form fits: the JSON size grows with the
     * prefix, so a binary search over the cut finds it (escapes make the JSON longer than the text). */
    size_t lo = 0, hi = cut < budget - base ? cut : budget - base;
    while (lo < hi) {
        size_t mid = lo + (hi - lo + 1) / 2, at = mid;
        while (at > 0 && ((unsigned char)value[at] & 0xC0) == 0x80)
            at--;
        json_object_set_new(e, "evalue", json_stringn(value, at));
        if (at > lo && json_size(e) <= budget)
            lo = at;
        else
            hi = mid - 1;
    }
    json_object_set_new(e, "evalue", json_stringn(value, lo));
    free(value);
    return e;
}

bool
pyc_outcome_is_memory_error(json_t *error)
{
    const char *ename = json_string_value(json_object_get(error, "ename"));
    return ename != NULL && strcmp(ename, "MemoryError") == 0;
}
