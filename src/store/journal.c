/*
 * journal.c -- the kernel's record of its recent cells (journal.h): who fed it, how it is bounded, and the
 * journal_reply text built from it.
 *
 * Records form a list, oldest first.  A begun cell is recognized by its request's header frame, which the
 * kernel passes as the parent of everything the cell causes (a byte comparison, no parsing on the hot path);
 * a queued one (announced by pyc_journal_expect, not begun) only by its msg_id, which is parsed out of a
 * reply's parent only while such records exist.  A done record keeps its header frame, so that what the
 * cell's threads print after it ended ("late" outputs: the notebook shows them under the cell) is kept with
 * it too, and handed once to the next client that asks (pyc_journal_report_late: `pyc run` shows them).
 * `tapped` counts the records with a header: a kernel whose journal holds none (no cell yet, or the journal
 * off) pays one atomic load per message sent; once cells ran, an output message takes the lock and finds its
 * record at once (the cell begun last) while cells run one at a time.
 */
#include "journal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"

enum { QUEUED, RUNNING, DONE };
static const char *const state_names[] = {"queued", "running", "done"};

typedef struct entry {
    struct entry *next;
    char *id;                    /* owned: the execute_request's msg_id */
    int state;
    int count;                   /* execution_count, 0 until begun */
    double queued, started, ended; /* Unix seconds; 0 when it did not happen */
    char *hdr;                   /* owned: the request's header frame, once begun */
    size_t hlen;
    size_t late_off;             /* once done: where in out the late outputs not yet handed out begin */
    size_t late_n;               /* once done: how many late outputs out holds from late_off on */
    pyc_buf_t out;               /* the outputs kept, as JSON array elements separated by commas */
    size_t n_out;                /* messages kept */
    size_t dropped;              /* messages not kept: past the cell's cap, or dropped for the total bound */
    char *reply;                 /* owned: {"content":...,"metadata":...}, once done */
    unsigned long reported;      /* the last report that included this record (one copy per report) */
} entry_t;

struct pyc_journal {
    pthread_mutex_t lock;
    pyc_journal_limits_t lim;
    entry_t *head, *tail;
    size_t n;
    size_t total;                /* bytes of outputs kept */
    size_t queued;               /* records in state QUEUED */
    atomic_int running;          /* records in state RUNNING */
    atomic_int tapped;           /* records that hold a header frame (begun: running or done) */
    atomic_size_t late;          /* the sum of the records' late_n: read without the lock, once a cell */
    entry_t *last_begun;         /* the record begun last, or NULL: the one a message's parent names, mostly */
    unsigned long reports;       /* reports made, numbering each */
};

/* An output message type the journal keeps. */
static bool
is_output(const char *t)
{
    switch (t[0]) {
    case 's':
        return strcmp(t, "stream") == 0;
    case 'd':
        return strcmp(t, "display_data") == 0;
    case 'u':
        return strcmp(t, "update_display_data") == 0;
    case 'e':
        return strcmp(t, "execute_result") == 0 || strcmp(t, "error") == 0;
    case 'c':
        return strcmp(t, "clear_output") == 0;
    default:
        return false;
    }
}

static double
now_unix(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static size_t
env_size(const char *name, size_t dflt)
{
    const char *s = getenv(name);
    char *end;
    if (s == NULL || *s == '\0')
        return dflt;
    unsigned long long v = strtoull(s, &end, 10);
    return *end == '\0' && s[0] != '-' ? (size_t)v : dflt;
}

void
pyc_journal_limits_from_env(pyc_journal_limits_t *lim)
{
    lim->cells = env_size("PYC_JOURNAL_CELLS", PYC_JOURNAL_CELLS);
    lim->cell_bytes = env_size("PYC_JOURNAL_CELL_BYTES", PYC_JOURNAL_CELL_BYTES);
    lim->total_bytes = env_size("PYC_JOURNAL_BYTES", PYC_JOURNAL_TOTAL_BYTES);
}

pyc_journal_t *
pyc_journal_new(const pyc_journal_limits_t *lim)
{
    if (lim->cells == 0)
        return NULL;
    pyc_journal_t *j = calloc(1, sizeof *j);
    if (j == NULL)
        return NULL;
    pthread_mutex_init(&j->lock, NULL);
    j->lim = *lim;
    return j;
}

static void
drop_outputs(pyc_journal_t *j, entry_t *e)
{
    j->total -= e->out.len;
    e->dropped += e->n_out;
    e->n_out = 0;
    e->late_off = 0;
    atomic_fetch_sub(&j->late, e->late_n);
    e->late_n = 0;
    pyc_buf_free(&e->out);
}

static void
entry_free(pyc_journal_t *j, entry_t *e)
{
    drop_outputs(j, e);
    if (e->state == QUEUED)
        j->queued--;
    else if (e->state == RUNNING)
        atomic_fetch_sub(&j->running, 1);
    if (j->last_begun == e)
        j->last_begun = NULL;
    if (e->hdr != NULL)
        atomic_fetch_sub(&j->tapped, 1);
    free(e->id);
    free(e->hdr);
    free(e->reply);
    free(e);
}

void
pyc_journal_free(pyc_journal_t **j_p)
{
    pyc_journal_t *j = *j_p;
    if (j == NULL)
        return;
    for (entry_t *e = j->head, *next; e != NULL; e = next) {
        next = e->next;
        entry_free(j, e);
    }
    pthread_mutex_destroy(&j->lock);
    free(j);
    *j_p = NULL;
}

void
pyc_journal_lock(pyc_journal_t *j)
{
    if (j != NULL)
        pthread_mutex_lock(&j->lock);
}

void
pyc_journal_unlock(pyc_journal_t *j)
{
    if (j != NULL)
        pthread_mutex_unlock(&j->lock);
}

void
pyc_journal_after_fork(pyc_journal_t *j)
{
    if (j == NULL)
        return;
    pthread_mutex_lock(&j->lock);
    entry_t **pp = &j->head;
    j->tail = NULL;
    while (*pp != NULL) {
        entry_t *e = *pp;
        if (e->state != DONE) {
            *pp = e->next;
            j->n--;
            entry_free(j, e);
        } else {
            j->tail = e;
            pp = &e->next;
        }
    }
    pthread_mutex_unlock(&j->lock);
}

static entry_t *
find_id(pyc_journal_t *j, const char *id)
{
    for (entry_t *e = j->head; e != NULL; e = e->next) {
        if (strcmp(e->id, id) == 0)
            return e;
    }
    return NULL;
}

/* Unlinks and frees the oldest done record (the oldest of all when none is done).  Lock held. */
static void
evict_one(pyc_journal_t *j)
{
    entry_t *victim = NULL, *before = NULL, *prev = NULL;
    for (entry_t *e = j->head; e != NULL; prev = e, e = e->next) {
        if (e->state == DONE) {
            victim = e;
            before = prev;
            break;
        }
    }
    if (victim == NULL)
        victim = j->head;
    if (victim == NULL)
        return;
    if (before != NULL)
        before->next = victim->next;
    else
        j->head = victim->next;
    if (j->tail == victim)
        j->tail = before;
    j->n--;
    entry_free(j, victim);
}

/* A new record for id at the end of the list.  Lock held. */
static entry_t *
add_entry(pyc_journal_t *j, const char *id)
{
    entry_t *e = calloc(1, sizeof *e);
    if (e == NULL || (e->id = strdup(id)) == NULL) {
        free(e);
        return NULL;
    }
    while (j->n >= j->lim.cells)
        evict_one(j);
    pyc_buf_init(&e->out, j->lim.cell_bytes);
    if (j->tail != NULL)
        j->tail->next = e;
    else
        j->head = e;
    j->tail = e;
    j->n++;
    return e;
}

int
pyc_journal_expect(pyc_journal_t *j, const char *id)
{
    if (j == NULL)
        return 0;
    int rc = 0;
    pthread_mutex_lock(&j->lock);
    if (find_id(j, id) == NULL) {
        entry_t *e = add_entry(j, id);
        if (e != NULL) {
            e->state = QUEUED;
            e->queued = now_unix();
            j->queued++;
        } else {
            rc = -1;
        }
    }
    pthread_mutex_unlock(&j->lock);
    return rc;
}

void
pyc_journal_begin(pyc_journal_t *j, const char *id, const void *hdr, size_t hlen, int count)
{
    if (j == NULL)
        return;
    char *copy = malloc(hlen);
    if (copy == NULL)
        return;
    memcpy(copy, hdr, hlen);
    pthread_mutex_lock(&j->lock);
    entry_t *e = j->queued > 0 ? find_id(j, id) : NULL;
    if (e != NULL && e->state == QUEUED) {
        j->queued--;
    } else {
        /* A msg_id used again (clients should not, but may) starts a record of its own. */
        e = add_entry(j, id);
    }
    if (e == NULL) {
        pthread_mutex_unlock(&j->lock);
        free(copy);
        return;
    }
    e->state = RUNNING;
    e->count = count;
    e->started = now_unix();
    if (e->hdr == NULL)
        atomic_fetch_add(&j->tapped, 1);
    free(e->hdr);
    e->hdr = copy;
    e->hlen = hlen;
    j->last_begun = e;
    atomic_fetch_add(&j->running, 1);
    pthread_mutex_unlock(&j->lock);
}

static bool
has_header(const entry_t *e, const void *parent, size_t plen)
{
    return e->hdr != NULL && e->hlen == plen && memcmp(e->hdr, parent, plen) == 0;
}

/* The begun record whose request has this header frame: a running one first (two records with the same
 * header, a request sent twice, must not keep the running one from its reply), then, unless running_only, a
 * done one (its late outputs).  Lock held. */
static entry_t *
find_begun(pyc_journal_t *j, const void *parent, size_t plen, bool running_only)
{
    /* The cell begun last first: without subshells it is the only one running (and the one whose threads
     * print between cells, mostly), and the walk through up to PYC_JOURNAL_CELLS records for every message
     * was 2.7% of a pipelined request's CPU. */
    entry_t *last = j->last_begun, *done = NULL;
    if (last != NULL && has_header(last, parent, plen)) {
        if (last->state == RUNNING)
            return last;
        done = last;
    }
    if (atomic_load(&j->running) > 0) {
        for (entry_t *e = j->head; e != NULL; e = e->next) {
            if (e->state == RUNNING && has_header(e, parent, plen))
                return e;
        }
    }
    if (running_only)
        return NULL;
    for (entry_t *e = j->head; e != NULL && done == NULL; e = e->next) {
        if (e->state == DONE && has_header(e, parent, plen))
            done = e;
    }
    return done;
}

/* The queued record that a reply's parent names (parsed: only while queued records exist).  Lock held. */
static entry_t *
find_queued(pyc_journal_t *j, const void *parent, size_t plen)
{
    json_t *h = json_loadb(parent, plen, 0, NULL);
    const char *id = json_string_value(json_object_get(h, "msg_id"));
    entry_t *e = id != NULL ? find_id(j, id) : NULL;
    json_decref(h);
    return e != NULL && e->state == QUEUED ? e : NULL;
}

/* Keeps the total of outputs within its bound, dropping the outputs of the oldest done records first.  Lock
 * held. */
static void
trim_total(pyc_journal_t *j)
{
    for (entry_t *e = j->head; e != NULL && j->total > j->lim.total_bytes; e = e->next) {
        if (e->state == DONE && e->n_out > 0)
            drop_outputs(j, e);
    }
}

/* The length of the longest prefix of the JSON string body s[0..n) that is at most max bytes and ends on a
 * whole character: not inside an escape (\x or \uXXXX) nor inside a UTF-8 sequence. */
static size_t
json_body_cut(const char *s, size_t n, size_t max)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t step = c == '\\' ? (i + 1 < n && s[i + 1] == 'u' ? 6 : 2)
                    : c < 0x80  ? 1
                    : c >= 0xF0 ? 4
                    : c >= 0xE0 ? 3
                                : 2;
        if (i + step > max || i + step > n)
            break;
        i += step;
    }
    return i;
}

/* Appends the record of one output whose content is content[0..len), or, with cut, a stream's content whose
 * text is cut to its first cut bytes (head: the bytes of content up to and including the text's opening
 * quote), marked "cut": true.  Returns 0, or -1 with e->out as it was.  Lock held. */
static int
add_record(entry_t *e, const char *msg_type, const char *content, size_t len, size_t head, size_t cut)
{
    size_t before = e->out.len;
    bool whole = head == 0;
    if ((e->n_out > 0 && pyc_buf_add(&e->out, ",", 1) < 0) || pyc_buf_adds(&e->out, "{\"type\":\"") < 0 ||
        pyc_buf_adds(&e->out, msg_type) < 0 || pyc_buf_adds(&e->out, "\",\"content\":") < 0 ||
        pyc_buf_add(&e->out, content, whole ? len : head + cut) < 0 ||
        pyc_buf_adds(&e->out, whole ? "}" : "\"},\"cut\":true}") < 0) {
        e->out.len = before;
        if (e->out.data != NULL)
            e->out.data[before] = '\0';
        return -1;
    }
    return 0;
}

/* Keeps a stream output that does not fit whole as the first part of its text that does, so that `pyc poll`
 * of a cell that printed megabytes shows its first MiB.  The content is the kernel's own
 * {"name":"stdout"|"stderr","text":"..."} (host.c); anything else is not cut.  Returns 0 when kept.  Lock
 * held. */
static int
keep_stream_cut(entry_t *e, const char *content, size_t len)
{
    static const char key[] = "\",\"text\":\"";
    /* The record's own bytes around the content; the two NULs counted by sizeof make room for the comma. */
    static const size_t overhead = sizeof "{\"type\":\"stream\",\"content\":" + sizeof "\"},\"cut\":true}";
    const char *t = len > 2 ? memmem(content, len < 64 ? len : 64, key, sizeof key - 1) : NULL;
    if (t == NULL || memcmp(content + len - 2, "\"}", 2) != 0)
        return -1;
    size_t head = (size_t)(t - content) + sizeof key - 1, room = e->out.max - e->out.len;
    if (head + 2 > len || room < overhead + head + 1)
        return -1;
    size_t cut = json_body_cut(content + head, len - head - 2, room - overhead - head);
    return cut > 0 ? add_record(e, "stream", content, len, head, cut) : -1;
}

/* Keeps one output of e (a late one when e is done), within the cell's cap.  Lock held. */
static void
keep_output(pyc_journal_t *j, entry_t *e, const char *msg_type, const char *content, size_t len)
{
    size_t before = e->out.len;
    if (add_record(e, msg_type, content, len, 0, 0) < 0 &&
        (strcmp(msg_type, "stream") != 0 || keep_stream_cut(e, content, len) < 0)) {
        e->dropped++;            /* past the cell's cap: counted, not kept */
        return;
    }
    e->n_out++;
    if (e->state == DONE) {
        e->late_n++;
        atomic_fetch_add(&j->late, 1);
    }
    j->total += e->out.len - before;
    if (j->total > j->lim.total_bytes)
        trim_total(j);
}

static void
finish(pyc_journal_t *j, entry_t *e, const char *metadata, const char *content, size_t len)
{
    pyc_buf_t r;
    pyc_buf_init(&r, (size_t)-1);
    if (pyc_buf_adds(&r, "{\"content\":") == 0 && pyc_buf_add(&r, content, len) == 0 &&
        pyc_buf_adds(&r, ",\"metadata\":") == 0 && pyc_buf_adds(&r, metadata != NULL ? metadata : "{}") == 0 &&
        pyc_buf_add(&r, "}", 1) == 0) {
        free(e->reply);
        e->reply = pyc_buf_detach(&r, NULL);
    }
    pyc_buf_free(&r);
    if (e->state == QUEUED)
        j->queued--;
    else if (e->state == RUNNING)
        atomic_fetch_sub(&j->running, 1);
    e->state = DONE;
    e->ended = now_unix();
    pyc_buf_shrink(&e->out);     /* kept for up to PYC_JOURNAL_CELLS cells */
    e->late_off = e->out.len;    /* the header stays: what the cell's threads print from now on is late */
    e->late_n = 0;
    if (j->total > j->lim.total_bytes)
        trim_total(j);
}

void
pyc_journal_tap(pyc_journal_t *j, const char *msg_type, const void *parent, size_t plen,
                const char *metadata, const char *content, size_t len)
{
    if (j == NULL || parent == NULL || plen <= 2)
        return;
    bool reply = strcmp(msg_type, "execute_reply") == 0;
    if (!reply && (atomic_load(&j->tapped) == 0 || !is_output(msg_type)))
        return;
    pthread_mutex_lock(&j->lock);
    entry_t *e = find_begun(j, parent, plen, reply);   /* a reply comes once: a running record's */
    if (e == NULL && reply && j->queued > 0)
        e = find_queued(j, parent, plen);
    if (e != NULL) {
        if (reply)
            finish(j, e, metadata, content, len);
        else
            keep_output(j, e, msg_type, content, len);
    }
    pthread_mutex_unlock(&j->lock);
}

/* One cell's object.  Lock held. */
static int
report_entry(pyc_buf_t *b, const entry_t *e, bool outputs)
{
    int rc = pyc_buf_adds(b, "{\"id\":");
    rc |= pyc_buf_add_json_string(b, e->id, strlen(e->id));
    rc |= pyc_buf_addf(b, ",\"state\":\"%s\"", state_names[e->state]);
    if (e->count > 0)
        rc |= pyc_buf_addf(b, ",\"execution_count\":%d", e->count);
    if (e->queued > 0)
        rc |= pyc_buf_addf(b, ",\"queued\":%.6f", e->queued);
    if (e->started > 0)
        rc |= pyc_buf_addf(b, ",\"started\":%.6f", e->started);
    if (e->ended > 0)
        rc |= pyc_buf_addf(b, ",\"ended\":%.6f", e->ended);
    if (outputs) {
        rc |= pyc_buf_adds(b, ",\"outputs\":[");
        if (e->n_out > 0)
            rc |= pyc_buf_add(b, e->out.data, e->out.len);
        rc |= pyc_buf_addf(b, "],\"outputs_dropped\":%zu", e->dropped);
    }
    if (e->reply != NULL) {
        rc |= pyc_buf_adds(b, outputs ? ",\"reply\":" : ",\"status\":");
        if (outputs) {
            rc |= pyc_buf_adds(b, e->reply);
        } else {
            /* The listing names the reply's status only: {"content":{"status":"ok",... */
            json_t *r = json_loads(e->reply, 0, NULL);
            const char *st = json_string_value(json_object_get(json_object_get(r, "content"), "status"));
            rc |= pyc_buf_add_json_string(b, st != NULL ? st : "", st != NULL ? strlen(st) : 0);
            json_decref(r);
        }
    }
    rc |= pyc_buf_add(b, "}", 1);
    return rc != 0 ? -1 : 0;
}

/* The record of one id of a selection, or {"id", "state": "unknown"}; an id the report has given already is
 * left out (*skip set), so that a selection naming one cell a million times costs one copy of its outputs,
 * not a million.  Lock held (j may be NULL). */
static int
report_id(pyc_buf_t *b, pyc_journal_t *j, const char *id, bool outputs, bool *skip)
{
    entry_t *e = j != NULL ? find_id(j, id) : NULL;
    *skip = e != NULL && e->reported == j->reports;
    if (*skip)
        return 0;
    if (e != NULL) {
        e->reported = j->reports;
        return report_entry(b, e, outputs);
    }
    int rc = pyc_buf_adds(b, "{\"id\":");
    rc |= pyc_buf_add_json_string(b, id, strlen(id));
    rc |= pyc_buf_adds(b, ",\"state\":\"unknown\"}");
    return rc != 0 ? -1 : 0;
}

char *
pyc_journal_report(pyc_journal_t *j, json_t *ids, bool outputs, size_t *len)
{
    pyc_buf_t b;
    pyc_buf_init(&b, (size_t)-1);
    int rc = pyc_buf_adds(&b, "{\"status\":\"ok\",\"cells\":[");
    bool first = true;
    if (j != NULL) {
        pthread_mutex_lock(&j->lock);
        j->reports++;
    }
    if (ids != NULL) {
        size_t i;
        json_t *v;
        json_array_foreach(ids, i, v) {
            if (!json_is_string(v))
                continue;
            size_t mark = b.len;
            bool skip = false;
            rc |= first ? 0 : pyc_buf_add(&b, ",", 1);
            rc |= report_id(&b, j, json_string_value(v), outputs, &skip);
            if (skip && b.data != NULL) {
                b.len = mark;            /* the comma goes too */
                b.data[mark] = '\0';
            }
            else
                first = false;
        }
    } else if (j != NULL) {
        for (entry_t *e = j->head; e != NULL; e = e->next) {
            rc |= first ? 0 : pyc_buf_add(&b, ",", 1);
            first = false;
            rc |= report_entry(&b, e, outputs);
        }
    }
    if (j != NULL) {
        rc |= pyc_buf_addf(&b, "],\"limits\":{\"cells\":%zu,\"cell_bytes\":%zu,\"total_bytes\":%zu}}",
                           j->lim.cells, j->lim.cell_bytes, j->lim.total_bytes);
        pthread_mutex_unlock(&j->lock);
    } else {
        rc |= pyc_buf_adds(&b, "],\"limits\":{\"cells\":0}}");
    }
    char *text = rc == 0 ? pyc_buf_detach(&b, len) : NULL;
    pyc_buf_free(&b);
    return text;
}

size_t
pyc_journal_late_unseen(pyc_journal_t *j)
{
    return j != NULL ? atomic_load(&j->late) : 0;
}

char *
pyc_journal_report_late(pyc_journal_t *j, size_t *len)
{
    pyc_buf_t b;
    pyc_buf_init(&b, (size_t)-1);
    int rc = pyc_buf_adds(&b, "{\"status\":\"ok\",\"cells\":[");
    bool first = true;
    if (j != NULL) {
        pthread_mutex_lock(&j->lock);
        for (entry_t *e = j->head; e != NULL; e = e->next) {
            if (e->state != DONE || e->late_n == 0 || e->late_off > e->out.len)
                continue;
            /* out holds "o1,o2,...": the late ones are what follows late_off, after its comma. */
            const char *late = e->out.data + e->late_off;
            size_t late_len = e->out.len - e->late_off;
            if (late_len > 0 && late[0] == ',') {
                late++;
                late_len--;
            }
            rc |= first ? 0 : pyc_buf_add(&b, ",", 1);
            first = false;
            rc |= pyc_buf_adds(&b, "{\"id\":");
            rc |= pyc_buf_add_json_string(&b, e->id, strlen(e->id));
            if (e->count > 0)
                rc |= pyc_buf_addf(&b, ",\"execution_count\":%d", e->count);
            rc |= pyc_buf_adds(&b, ",\"late\":[");
            rc |= pyc_buf_add(&b, late, late_len);
            rc |= pyc_buf_add(&b, "]}", 2);
            if (rc == 0) {
                e->late_off = e->out.len;    /* handed out once */
                atomic_fetch_sub(&j->late, e->late_n);
                e->late_n = 0;
            }
        }
        pthread_mutex_unlock(&j->lock);
    }
    rc |= pyc_buf_adds(&b, "]}");
    char *text = rc == 0 ? pyc_buf_detach(&b, len) : NULL;
    pyc_buf_free(&b);
    return text;
}
