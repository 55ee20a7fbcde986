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

size_t
pyc_outgate_admit(pyc_outgate_t *g, size_t bytes, const char *text)
{
    size_t allow = bytes;
    pthread_mutex_lock(&g->lock);
    if (!g->active && (g->session_max_bytes > 0 || g->session_max_msgs > 0)) {
        /* Between cells: the session's budget, cut like a cell's. */
        if (g->idle_dropping || (g->session_max_msgs > 0 && g->idle_msgs >= g->session_max_msgs)) {
            allow = 0;
        } else if (g->session_max_bytes > 0 && bytes > g->session_max_bytes - g->idle_bytes) {
            allow = text != NULL ? g->session_max_bytes - g->idle_bytes : 0;
            while (allow > 0 && ((unsigned char)text[allow] & 0xC0) == 0x80)
                allow--;
        }
        if (allow > 0) {
            g->idle_msgs++;
            g->idle_bytes += allow;
        } else {
            g->idle_dropped_msgs++;
        }
        g->idle_dropped_bytes += bytes - allow;
        if (!g->idle_dropping &&
            (allow < bytes || (g->session_max_msgs > 0 && g->idle_msgs >= g->session_max_msgs))) {
            g->idle_dropping = true;
            g->idle_notice = true;
        }
    } else if (g->active) {
        if (g->dropping || (g->max_msgs > 0 && g->msgs >= g->max_msgs)) {
            allow = 0;
        } else if (g->max_bytes > 0 && bytes > g->max_bytes - g->bytes) {
            allow = text != NULL ? g->max_bytes - g->bytes : 0;
            while (allow > 0 && ((unsigned char)text[allow] & 0xC0) == 0x80)
                allow--;
        }
        if (allow > 0) {
            g->msgs++;
            g->bytes += allow;
        } else {
            g->dropped_msgs++;
        }
        g->dropped_bytes += bytes - allow;
        if (allow < bytes || (g->max_msgs > 0 && g->msgs >= g->max_msgs))
            g->dropping = true;
    }
    pthread_mutex_unlock(&g->lock);
    return allow;
}

void
pyc_outgate_set(pyc_outgate_t *g, bool active, size_t max_bytes, size_t max_msgs)
{
    pthread_mutex_lock(&g->lock);
    if (active) {
        g->bytes = g->msgs = g->dropped_bytes = g->dropped_msgs = 0;
        g->dropping = false;
        g->max_bytes = max_bytes;
        g->max_msgs = max_msgs;
    }
    g->active = active;
    pthread_mutex_unlock(&g->lock);
}

void
pyc_outgate_set_session_caps(pyc_outgate_t *g, size_t max_bytes, size_t max_msgs)
{
    pthread_mutex_lock(&g->lock);
    g->session_max_bytes = max_bytes;
    g->session_max_msgs = max_msgs;
    pthread_mutex_unlock(&g->lock);
}

size_t
pyc_outgate_room(pyc_outgate_t *g)
{
    pthread_mutex_lock(&g->lock);
    size_t room = g->max_bytes == 0 ? SIZE_MAX : g->bytes < g->max_bytes ? g->max_bytes - g->bytes : 0;
    pthread_mutex_unlock(&g->lock);
    return room;
}

void
pyc_outgate_count(pyc_outgate_t *g, size_t bytes)
{
    pthread_mutex_lock(&g->lock);
    g->msgs++;
    g->bytes += bytes;
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
    g->dropping = true;
    pthread_mutex_unlock(&g->lock);
}

pyc_outgate_stats_t
pyc_outgate_stats(pyc_outgate_t *g)
{
    pthread_mutex_lock(&g->lock);
    pyc_outgate_stats_t s = {g->bytes, g->msgs, g->dropped_bytes, g->dropped_msgs, g->max_bytes, g->max_msgs};
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
