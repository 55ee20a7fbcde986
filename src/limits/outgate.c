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

/* The caps the content of b has: its caps less what the notice keeps (0: no cap). */
static size_t
content_bytes(const pyc_outbudget_t *b)
{
    return b->max_bytes > 0 ? b->max_bytes - b->notice_len : 0;
}

static size_t
content_msgs(const pyc_outbudget_t *b)
{
    return b->max_msgs > 0 ? b->max_msgs - (b->notice_len > 0 ? 1 : 0) : 0;
}

/* Counts a message of bytes against b: see pyc_outgate_admit.  A cap, once reached, drops the rest. */
static size_t
budget_admit(pyc_outbudget_t *b, size_t bytes, const char *text)
{
    size_t allow = bytes, max_bytes = content_bytes(b), max_msgs = content_msgs(b);
    size_t left = b->bytes < max_bytes ? max_bytes - b->bytes : 0;
    if (b->dropping || (b->max_msgs > 0 && b->msgs >= max_msgs)) {
        allow = 0;
    } else if (b->max_bytes > 0 && bytes > left) {
        allow = text != NULL ? left : 0;
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
    if (allow < bytes || (b->max_msgs > 0 && b->msgs >= max_msgs))
        b->dropping = true;
    return allow;
}

/* Writes " (limit: N bytes, M messages)\n" for the caps given into text at n; returns the new length. */
static size_t
limits_text(char *text, size_t cap, size_t n, size_t max_bytes, size_t max_msgs)
{
    char bytes[32] = "", msgs[40] = "";
    if (max_bytes > 0)
        snprintf(bytes, sizeof bytes, " %zu bytes", max_bytes);
    if (max_msgs > 0)
        snprintf(msgs, sizeof msgs, "%s %zu messages", max_bytes > 0 ? "," : "", max_msgs);
    int m = n < cap ? snprintf(text + n, cap - n, " (limit:%s%s)\n", bytes, msgs) : 0;
    n += m > 0 ? (size_t)m : 0;
    return n < cap ? n : cap - 1;
}

/* Chooses b's notice for its caps (README, "Limits and outcomes"): the long one, which says what was dropped
 * and the caps, when it takes at most half of the byte cap; else the short one on the same terms; else none
 * (a cap of a few bytes, or of one message, has no room for one: metadata.pyc.output_dropped still tells). */
static void
budget_set_notice(pyc_outbudget_t *b, const char *what)
{
    static const char short_notice[] = "\n[pyc] output limit reached\n";
    size_t n = (size_t)snprintf(b->notice, sizeof b->notice, "\n[pyc] output limit reached: %s", what);
    n = limits_text(b->notice, sizeof b->notice, n > sizeof b->notice - 1 ? sizeof b->notice - 1 : n,
                    b->max_bytes, b->max_msgs);
    if (b->max_bytes > 0 && n > b->max_bytes / 2) {
        n = sizeof short_notice - 1;
        memcpy(b->notice, short_notice, sizeof short_notice);
    }
    if ((b->max_bytes > 0 && n > b->max_bytes / 2) || b->max_msgs == 1 || (b->max_bytes == 0 && b->max_msgs == 0))
        n = 0;
    b->notice_len = n;
}

/* Takes b's notice into text when output was dropped and it was not told yet: counted in b.  Returns its
 * length, or 0. */
static size_t
budget_take_notice(pyc_outbudget_t *b, char *text, size_t cap)
{
    if ((b->dropped_msgs == 0 && b->dropped_bytes == 0) || b->notice_len == 0 || b->notice_told ||
        b->notice_len >= cap)
        return 0;
    memcpy(text, b->notice, b->notice_len + 1);
    b->notice_told = true;
    b->bytes += b->notice_len;
    b->msgs++;
    return b->notice_len;
}

size_t
pyc_outgate_admit(pyc_outgate_t *g, size_t bytes, const char *text)
{
    size_t allow = bytes;
    pthread_mutex_lock(&g->lock);
    if (g->active)
        allow = budget_admit(&g->cell, bytes, text);
    else if (g->idle.max_bytes > 0 || g->idle.max_msgs > 0)
        allow = budget_admit(&g->idle, bytes, text);   /* between cells: the session's budget, cut like a cell's */
    pthread_mutex_unlock(&g->lock);
    return allow;
}

void
pyc_outgate_set(pyc_outgate_t *g, bool active, size_t max_bytes, size_t max_msgs)
{
    pthread_mutex_lock(&g->lock);
    if (active) {
        g->cell = (pyc_outbudget_t){.max_bytes = max_bytes, .max_msgs = max_msgs};
        budget_set_notice(&g->cell, "the rest of this cell's output was dropped");
        g->head_len = 0;
    } else {
        /* A new stretch between cells: its budget starts afresh (its caps and notice stay), so that threads
         * that print for the whole of a long session (a logger, a progress display) are capped per stretch,
         * not silenced for good once the first stretches spent a cap. */
        pyc_outbudget_t *b = &g->idle;
        b->bytes = b->msgs = b->dropped_bytes = b->dropped_msgs = 0;
        b->dropping = false;
        b->notice_told = false;
    }
    g->active = active;
    pthread_mutex_unlock(&g->lock);
}

void
pyc_outgate_set_session_caps(pyc_outgate_t *g, size_t max_bytes, size_t max_msgs)
{
    pthread_mutex_lock(&g->lock);
    g->idle.max_bytes = max_bytes;
    g->idle.max_msgs = max_msgs;
    budget_set_notice(&g->idle, "output between cells (from threads a cell started) is dropped until the next "
                      "cell");
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

bool
pyc_outgate_can_send(pyc_outgate_t *g)
{
    pthread_mutex_lock(&g->lock);
    bool can = g->cell.max_msgs == 0 || g->cell.msgs < g->cell.max_msgs;
    pthread_mutex_unlock(&g->lock);
    return can;
}

/* Appends text[0..n) to the head as far as it has room; the lock is held. */
static void
head_add(pyc_outgate_t *g, const char *text, size_t n)
{
    size_t room = g->head_len < g->head_cap ? g->head_cap - g->head_len : 0;
    size_t take = room < n ? room : n;
    if (take > 0)
        memcpy(g->head + g->head_len, text, take);
    g->head_len += take;
}

void
pyc_outgate_count(pyc_outgate_t *g, size_t bytes, const char *text, size_t n)
{
    pthread_mutex_lock(&g->lock);
    g->cell.msgs++;
    g->cell.bytes += bytes;
    if (text != NULL)
        head_add(g, text, n);
    pthread_mutex_unlock(&g->lock);
}

size_t
pyc_outgate_take_idle_notice(pyc_outgate_t *g, char *text, size_t cap)
{
    pthread_mutex_lock(&g->lock);
    size_t n = budget_take_notice(&g->idle, text, cap);
    pthread_mutex_unlock(&g->lock);
    return n;
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
    pthread_mutex_lock(&g->lock);
    size_t n = budget_take_notice(&g->cell, text, cap);
    pthread_mutex_unlock(&g->lock);
    return n;
}

void
pyc_outgate_set_head(pyc_outgate_t *g, size_t cap)
{
    pthread_mutex_lock(&g->lock);
    g->head_cap = cap < PYC_OUTGATE_HEAD_MAX ? cap : PYC_OUTGATE_HEAD_MAX;
    g->head_len = 0;
    pthread_mutex_unlock(&g->lock);
}

void
pyc_outgate_keep(pyc_outgate_t *g, const char *text, size_t n)
{
    pthread_mutex_lock(&g->lock);
    if (g->active)
        head_add(g, text, n);
    pthread_mutex_unlock(&g->lock);
}

bool
pyc_outgate_wants_text(pyc_outgate_t *g)
{
    pthread_mutex_lock(&g->lock);
    bool wants = g->active && g->head_len < g->head_cap;
    pthread_mutex_unlock(&g->lock);
    return wants;
}

size_t
pyc_outgate_head(pyc_outgate_t *g, char *out, size_t cap)
{
    if (cap == 0)
        return 0;
    pthread_mutex_lock(&g->lock);
    size_t n = g->head_len < cap - 1 ? g->head_len : cap - 1;
    memcpy(out, g->head, n);
    pthread_mutex_unlock(&g->lock);
    /* Cut a character split by the cap: back to the lead byte of the last one, dropped unless whole. */
    size_t lead = n;
    while (lead > 0 && ((unsigned char)out[lead - 1] & 0xC0) == 0x80)
        lead--;
    if (lead > 0 && ((unsigned char)out[lead - 1] & 0x80)) {
        unsigned char c = (unsigned char)out[lead - 1];
        size_t want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (n - (lead - 1) < want)
            n = lead - 1;
    }
    out[n] = '\0';
    return n;
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
