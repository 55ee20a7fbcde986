/*
 * outgate.h -- the per-cell output cap (README, "Limits and outcomes"): counts what a cell publishes and
 * decides what may still go out.
 *
 * Every output message of the running cell (stream text, displays, results; pyc_outgate_counts says which
 * types) is admitted here before it is sent.  Once the cap of bytes or of messages is reached, everything
 * else of that cell is dropped, so that output never resumes with a gap in it; stream text, which can be cut,
 * is cut exactly at the byte limit on a whole UTF-8 character.
 *
 * A cap holds to the byte and to the message, its notice included: a budget keeps the length of its notice
 * (and one message) out of what its content may use, so that the content, the notice and a cell's error
 * together never exceed the cap.  The notice is fixed when the caps are set (its text names the caps, not
 * the counts, which metadata.pyc.output carries): the long form when it takes at most half the byte cap, a
 * short one on the same terms, else none.  At the end of a cell whose output was cut the kernel publishes the
 * notice (pyc_outgate_notice, which counts it).
 *
 * Between cells (a thread the cell started may go on printing), output counts against a budget of the same
 * size as a cell's caps (pyc_outgate_set_session_caps), which starts afresh each time a cell ends: once it is
 * spent, output is dropped until the next cell, and pyc_outgate_take_idle_notice gives its notice once per
 * stretch between cells.
 *
 * A cell's error is output too: pyc_outgate_room says how many bytes of the cap are left, so that an error
 * is cut to fit or, when even its name does not fit (or pyc_outgate_can_send says the message cap is spent),
 * not published (the execute_reply still carries it); pyc_outgate_count counts it.
 *
 * The gate is pure bookkeeping: no I/O, no Python, no time.  Output comes from the stream flusher, the main
 * thread and Python threads at once, so every call takes the gate's lock (see the lock order in kernel.h).
 */
#ifndef PYC_OUTGATE_H
#define PYC_OUTGATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* One budget of output (a cell's, or the session's between cells): its caps and what was counted. */
typedef struct pyc_outbudget {
    size_t max_bytes, max_msgs;  /* 0: no cap */
    size_t bytes, msgs, dropped_bytes, dropped_msgs;   /* what went out (the notice and an error included) */
    bool dropping;               /* a cap was reached: everything else is dropped */
    char notice[256];            /* the notice for these caps, told once when output was dropped */
    size_t notice_len;           /* its length, kept out of max_bytes for it; 0: this budget has no notice */
    bool notice_told;
} pyc_outbudget_t;

/* The most of a cell's output text the gate keeps for the cell's event (pyc_outgate_keep). */
#define PYC_OUTGATE_HEAD_MAX ((size_t)4096)

typedef struct pyc_outgate {
    pthread_mutex_t lock;
    bool active;                 /* an execute request is running */
    pyc_outbudget_t cell;        /* the running (or the last) cell's */
    pyc_outbudget_t idle;        /* between cells: the stretch since the last cell ended */
    size_t head_cap;             /* bytes of the cell's text kept (pyc_outgate_set_head); 0: none */
    size_t head_len;
    char head[PYC_OUTGATE_HEAD_MAX];   /* the first head_len bytes of the running (or last) cell's text */
} pyc_outgate_t;

/* A copy of the counts, taken under the lock. */
typedef struct pyc_outgate_stats {
    size_t bytes, msgs, dropped_bytes, dropped_msgs;
    size_t max_bytes, max_msgs;
} pyc_outgate_stats_t;

void pyc_outgate_init(pyc_outgate_t *g);
void pyc_outgate_destroy(pyc_outgate_t *g);

/* True for the message types the cap counts: what a cell prints and displays.  Comm messages (widgets,
 * transfers) are not output in this sense and always go out. */
bool pyc_outgate_counts(const char *msg_type);

/* Counts an output message of `bytes` against the running cell's cap.  Returns how many of its bytes may go
 * out: all of them, none (the message is dropped), or -- for stream text, which can be cut (text not NULL)
 * -- the part that fits, ending on a whole UTF-8 character.  Outside a cell everything is admitted. */
size_t pyc_outgate_admit(pyc_outgate_t *g, size_t bytes, const char *text);

/* Starts a cell's count with its caps (0: none), or ends it (active false).  The caller flushes output
 * first, so that nothing of the previous request is counted against this one. */
void pyc_outgate_set(pyc_outgate_t *g, bool active, size_t max_bytes, size_t max_msgs);

/* The caps of output between cells, for each stretch between two cells (0: no cap). */
void pyc_outgate_set_session_caps(pyc_outgate_t *g, size_t max_bytes, size_t max_msgs);

/* The bytes the running cell may still publish: SIZE_MAX without a byte cap. */
size_t pyc_outgate_room(pyc_outgate_t *g);

/* False once the running cell's message cap is spent (the notice included): its error is then not
 * published. */
bool pyc_outgate_can_send(pyc_outgate_t *g);

/* Counts a message of `bytes` that the caller publishes within pyc_outgate_room (a cell's error), and keeps
 * text[0..n) (what a reader sees of it; may be NULL) in the cell's head (pyc_outgate_set_head): the error
 * is published after the cell's count has ended, and is still the cell's. */
void pyc_outgate_count(pyc_outgate_t *g, size_t bytes, const char *text, size_t n);

/* The notice that output between cells is dropped from now on, once: written into text (cap bytes) and
 * counted in the session's budget; returns its length, or 0 (text untouched). */
size_t pyc_outgate_take_idle_notice(pyc_outgate_t *g, char *text, size_t cap);

/* Drops everything from now on until the next pyc_outgate_set (a stuck cell that the kernel is ending). */
void pyc_outgate_stop(pyc_outgate_t *g);

pyc_outgate_stats_t pyc_outgate_stats(pyc_outgate_t *g);

/* The notice of a cell whose output was cut, once: written into text (cap bytes) and counted in the cell's
 * budget; returns its length, or 0 (text untouched) when nothing was dropped or the caps leave no room for
 * a notice. */
size_t pyc_outgate_notice(pyc_outgate_t *g, char *text, size_t cap);

/* The head of a cell's output, for its cell_done event (README, "pyc events"): the gate keeps the first cap
 * bytes (at most PYC_OUTGATE_HEAD_MAX; 0, the default, keeps none) of the text that the running cell
 * published, in the order it went out.  The publishers give it what a reader of the cell sees as text
 * (pyc_outgate_keep): stream text as admitted, the text/plain of results and displays, the error's line. */
void pyc_outgate_set_head(pyc_outgate_t *g, size_t cap);

/* Keeps text[0..n) in the running cell's head, as far as the head has room; nothing outside a cell. */
void pyc_outgate_keep(pyc_outgate_t *g, const char *text, size_t n);

/* True while the running cell's head has room (a caller may skip making text that would not be kept). */
bool pyc_outgate_wants_text(pyc_outgate_t *g);

/* Copies the running (or last) cell's head into out (cap bytes, at least PYC_OUTGATE_HEAD_MAX + 1 for all of
 * it), cut to end on a whole UTF-8 character and NUL-terminated; returns its length. */
size_t pyc_outgate_head(pyc_outgate_t *g, char *out, size_t cap);

/* Held across fork(2) by pyc_kernel_fork, so that a child never inherits the lock taken. */
void pyc_outgate_lock(pyc_outgate_t *g);
void pyc_outgate_unlock(pyc_outgate_t *g);

#endif
