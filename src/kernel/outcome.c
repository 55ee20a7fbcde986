/*
 * outcome.c -- see outcome.h.
 */
#include "outcome.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "guard.h"

const char *const pyc_outcome_limit_names[5] = {
    [PYC_GUARD_NONE] = NULL,
    [PYC_GUARD_DEADLINE] = "deadline",
    [PYC_GUARD_LIFETIME] = "lifetime",
    [PYC_GUARD_IDLE] = "idle",
    [PYC_GUARD_MEMORY] = "memory",
};

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
                        : s->what != NULL              ? "RequestTimeout"
                                                       : "CellTimeout";
    const char *what = s->what != NULL ? s->what : s->isolated ? "the isolated cell" : "the cell";
    if (s->why == PYC_GUARD_MEMORY)
        snprintf(evalue, sizeof evalue, "%s grew the kernel's memory past its cap of %.0f bytes (shared memory "
                 "counted)", what, s->memory_cap);
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

json_t *
pyc_outcome_metadata(const pyc_outcome_t *o)
{
    const pyc_outgate_stats_t *g = &o->output;
    json_t *output = json_pack("{s:I, s:I, s:I, s:I}", "bytes", (json_int_t)g->bytes, "messages",
                               (json_int_t)g->msgs, "dropped_bytes", (json_int_t)g->dropped_bytes,
                               "dropped_messages", (json_int_t)g->dropped_msgs);
    bool dropped = g->dropped_msgs > 0 || g->dropped_bytes > 0;
    const char *limit = o->why > PYC_GUARD_NONE && o->why <= PYC_GUARD_MEMORY ? pyc_outcome_limit_names[o->why]
                                                                              : NULL;
    bool timed_out = o->why == PYC_GUARD_DEADLINE || o->why == PYC_GUARD_LIFETIME;
    /* The state is the session's, as README's table says: "intact" only when the kernel and its namespace go
     * on after this reply.  A kernel that ends after it -- cleanly at its lifetime, or at a shutdown that came
     * during the cell -- loses its state as surely as a stuck one, and a client must not send its next cell
     * there. */
    bool ending = o->lost || o->kernel_ending;
    return json_pack("{s:s, s:b, s:b, s:o, s:b, s:o, s:b, s:s, s:b, s:f, s:f}", "outcome", o->outcome,
                     "interrupted", o->interrupted, "timed_out", timed_out, "limit",
                     limit != NULL ? json_string(limit) : json_null(), "output_dropped", dropped, "output", output,
                     "memory_cap_hit", o->memory_hit, "state", ending ? "lost" : "intact", "kernel_ending", ending,
                     "wall_time", o->wall, "cpu_time", o->cpu);
}

/* The size of v as compact JSON. */
static size_t
json_size(json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t n = text != NULL ? strlen(text) : 0;
    free(text);
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

bool
pyc_outcome_is_memory_error(json_t *error)
{
    const char *ename = json_string_value(json_object_get(error, "ename"));
    return ename != NULL && strcmp(ename, "MemoryError") == 0;
}
