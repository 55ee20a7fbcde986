/*
 * outgate.c -- see outgate.h.
 */
#include "outgate.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

void
pyc_outgate_init(pyc_outgate_t *g)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->lock, NULL);
}

void
pyc_outgate_destroy(pyc_outgate_t *g)
{
    pthread_mutex_destroy(&g->lock);
}

bool
pyc_outgate_counts(const char *msg_type)
{
    return strcmp(msg_type, "stream") == 0 || strcmp(msg_type, "display_data") == 0 ||
           strcmp(msg_type, "update_display_data") == 0 || strcmp(msg_type, "execute_result") == 0 ||
           strcmp(msg_type, "clear_output") == 0;
}

/* Counts a message of bytes against b: see pyc_outgate_admit.  A cap, once reached, drops the rest. */
static size_t
budget_admit(pyc_outbudget_t *b, size_t bytes, const char *text)
{
    size_t allow = bytes;
    if (b->dropping || (b->max_msgs > 0 && b->msgs >= b->max_msgs)) {
        allow = 0;
    } else if (b->max_bytes > 0 && bytes > b->max_bytes - b->bytes) {
        allow = text != NULL ? b->max_bytes - b->bytes : 0;
        while (allow > 0 && ((unsigned char)text[allow] & 0xC0) == 0x80)
            allow--;
    }
    if (allow > 0) {
        b->msgs++;
        b->bytes += allow;
    } else {
        b->dropped_msgs++;
    }
    b->dropped_bytes += bytes - allow;
    if (allow < bytes || (b->max_msgs > 0 && b->msgs >= b->max_msgs))
        b->dropping = true;
    return allow;
}

size_t
pyc_outgate_admit(pyc_outgate_t *g, size_t bytes, const char *text)
{
    size_t allow = bytes;
    pthread_mutex_lock(&g->lock);
    if (g->active) {
        allow = budget_admit(&g->cell, bytes, text);
    } else if (g->idle.max_bytes > 0 || g->idle.max_msgs > 0) {
        /* Between cells: the session's budget, cut like a cell's; its end is told once. */
        bool was_dropping = g->idle.dropping;
        allow = budget_admit(&g->idle, bytes, text);
        if (!was_dropping && g->idle.dropping)
            g->idle_notice = true;
    }
    pthread_mutex_unlock(&g->lock);
    return allow;
}

void
pyc_outgate_set(pyc_outgate_t *g, bool active, size_t max_bytes, size_t max_msgs)
{
    pthread_mutex_lock(&g->lock);
    if (active)
        g->cell = (pyc_outbudget_t){.max_bytes = max_bytes, .max_msgs = max_msgs};
    g->active = active;
    pthread_mutex_unlock(&g->lock);
}

void
pyc_outgate_set_session_caps(pyc_outgate_t *g, size_t max_bytes, size_t max_msgs)
{
    pthread_mutex_lock(&g->lock);
    g->idle.max_bytes = max_bytes;
    g->idle.max_msgs = max_msgs;
    pthread_mutex_unlock(&g->lock);
}

size_t
pyc_outgate_room(pyc_outgate_t *g)
{
    pthread_mutex_lock(&g->lock);
    const pyc_outbudget_t *b = &g->cell;
    size_t room = b->max_bytes == 0 ? SIZE_MAX : b->bytes < b->max_bytes ? b->max_bytes - b->bytes : 0;
    pthread_mutex_unlock(&g->lock);
    return room;
}

void
pyc_outgate_count(pyc_outgate_t *g, size_t bytes)
{
    pthread_mutex_lock(&g->lock);
    g->cell.msgs++;
    g->cell.bytes += bytes;
    pthread_mutex_unlock(&g->lock);
}

bool
pyc_outgate_take_notice(pyc_outgate_t *g)
{
    pthread_mutex_lock(&g->lock);
    bool notice = g->idle_notice;
    g->idle_notice = false;
    pthread_mutex_unlock(&g->lock);
    return notice;
}

void
pyc_outgate_stop(pyc_outgate_t *g)
{
    pthread_mutex_lock(&g->lock);
    g->cell.dropping = true;
    pthread_mutex_unlock(&g->lock);
}

pyc_outgate_stats_t
pyc_outgate_stats(pyc_outgate_t *g)
{
    pthread_mutex_lock(&g->lock);
    const pyc_outbudget_t *b = &g->cell;
    pyc_outgate_stats_t s = {b->bytes, b->msgs, b->dropped_bytes, b->dropped_msgs, b->max_bytes, b->max_msgs};
    pthread_mutex_unlock(&g->lock);
    return s;
}

size_t
pyc_outgate_notice(pyc_outgate_t *g, char *text, size_t cap)
{
    pyc_outgate_stats_t s = pyc_outgate_stats(g);
    if (s.dropped_msgs == 0 && s.dropped_bytes == 0)
        return 0;
    int n = snprintf(text, cap, "\n[pyc] output limit reached: %zu bytes of this cell's output were dropped, %zu "
                     "whole message%s among them (limit:", s.dropped_bytes, s.dropped_msgs,
                     s.dropped_msgs == 1 ? "" : "s");
    if (s.max_bytes > 0 && n >= 0 && (size_t)n < cap)
        n += snprintf(text + n, cap - (size_t)n, " %zu bytes", s.max_bytes);
    if (s.max_msgs > 0 && n >= 0 && (size_t)n < cap)
        n += snprintf(text + n, cap - (size_t)n, "%s %zu messages", s.max_bytes > 0 ? "," : "", s.max_msgs);
    if (n >= 0 && (size_t)n < cap)
        n += snprintf(text + n, cap - (size_t)n, ")\n");
    if (n < 0)
        return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

void
pyc_outgate_lock(pyc_outgate_t *g)
{
    pthread_mutex_lock(&g->lock);
}

void
pyc_outgate_unlock(pyc_outgate_t *g)
{
    pthread_mutex_unlock(&g->lock);
}
