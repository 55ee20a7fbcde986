/*
 * zqueue.c -- see zqueue.h.
 */
#include "zqueue.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"


int
pyc_zqueue_init(pyc_zqueue_t *q)
{
    pthread_mutex_init(&q->lock, NULL);
    q->head = q->tail = NULL;
    q->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return q->efd < 0 ? -1 : 0;
}

void
pyc_zqueue_signal(pyc_zqueue_t *q)
{
    uint64_t one = 1;
    ssize_t w = write(q->efd, &one, sizeof one);
    (void)w;
}

void
pyc_zqueue_push(pyc_zqueue_t *q, pyc_zqitem_t *it)
{
    it->next = NULL;
    pthread_mutex_lock(&q->lock);
    bool was_empty = q->head == NULL;
    if (q->tail != NULL)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    pthread_mutex_unlock(&q->lock);
    if (was_empty)
        pyc_zqueue_signal(q);
}

/* Pops the whole queue at once (FIFO order kept) and clears the eventfd. */
pyc_zqitem_t *
pyc_zqueue_take_all(pyc_zqueue_t *q)
{
    uint64_t v;
    ssize_t r = read(q->efd, &v, sizeof v);
    (void)r;
    pthread_mutex_lock(&q->lock);
    pyc_zqitem_t *all = q->head;
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->lock);
    return all;
}

pyc_zqitem_t *
pyc_zqueue_try_pop(pyc_zqueue_t *q)
{
    pthread_mutex_lock(&q->lock);
    pyc_zqitem_t *it = q->head;
    if (it != NULL) {
        q->head = it->next;
        if (q->head == NULL)
            q->tail = NULL;
    }
    pthread_mutex_unlock(&q->lock);
    return it;
}

pyc_zqitem_t *
pyc_zqueue_pop(pyc_zqueue_t *q)
{
    pyc_zqitem_t *it = pyc_zqueue_try_pop(q);
    if (it == NULL) {
        uint64_t v;
        ssize_t r = read(q->efd, &v, sizeof v);
        (void)r;
        /* A push may have raced with the read above: re-signal so the waiter looks again. */
        pthread_mutex_lock(&q->lock);
        bool again = q->head != NULL;
        pthread_mutex_unlock(&q->lock);
        if (again)
            pyc_zqueue_signal(q);
    }
    return it;
}

void
pyc_zqueue_item_free(pyc_zqitem_t *it)
{
    for (size_t i = 0; i < it->n; i++)
        zmq_msg_close(&it->frames[i]);
    pyc_msg_destroy(&it->msg);
    free(it);
}

void
pyc_zqueue_clear(pyc_zqueue_t *q)
{
    for (pyc_zqitem_t *it = q->head, *next; it != NULL; it = next) {
        next = it->next;
        pyc_zqueue_item_free(it);
    }
    q->head = q->tail = NULL;
    if (q->efd >= 0)
        close(q->efd);
    q->efd = -1;
    pthread_mutex_destroy(&q->lock);
}


static void
free_owned(void *data, void *hint)
{
    (void)data;
    free(hint);
}

/* ZeroMQ is done with lent bytes (see pyc_releaser_t); runs on whatever thread closed the last copy of the
 * message, usually the I/O thread. */
static void
release_lent(void *data, void *hint)
{
    (void)data;
    pyc_releaser_t *r = hint;
    r->release(r);
}

/* Owned blocks up to this size are copied into the message and freed here, by the thread that made them;
 * larger ones are handed to ZeroMQ. */
#define COPY_OWNED_MAX 1024

/* Converts outframes to zmq messages; owned blocks and lent bytes are taken over in every case.  Large ones
 * are not copied: a 100 MiB buffer copied here cost 60 ms, most of it faulting in the fresh block.  Small
 * owned blocks (headers, metadata, contents of a few hundred bytes) are: a block handed over is freed by
 * libzmq's I/O thread, into the sending thread's malloc arena, under that arena's lock, which the sending
 * thread's own mallocs then wait on (futex calls, measured on the main thread of a pipelined run), and the
 * ZeroMQ message takes a block of its own in either case (its content_t).  Copied, ours goes back to this
 * thread's glibc cache (tcache) and the next message reuses it without a lock. */
pyc_zqitem_t *
pyc_zqueue_item_new(pyc_outframe_t *frames, size_t n)
{
    /* Fields set one by one: calloc bypasses glibc's per-thread cache (see buf.c), and a compiler may turn
     * malloc followed by memset into calloc.  The frames are each set up below before use. */
    pyc_zqitem_t *it = malloc(sizeof(pyc_zqitem_t) + n * sizeof(zmq_msg_t));
    size_t i = 0;
    if (it == NULL)
        goto fail;
    it->next = NULL;
    it->chan = 0;
    it->msg = NULL;
    it->n = 0;
    for (; i < n; i++) {
        int rc;
        if (frames[i].owned != NULL && frames[i].size > COPY_OWNED_MAX) {
            rc = zmq_msg_init_data(&it->frames[i], (void *)frames[i].data, frames[i].size, free_owned,
                                   frames[i].owned);
            if (rc == 0)
                frames[i].owned = NULL;
        } else if (frames[i].releaser != NULL && frames[i].size > 0) {
            rc = zmq_msg_init_data(&it->frames[i], (void *)frames[i].data, frames[i].size, release_lent,
                                   frames[i].releaser);
            if (rc == 0)
                frames[i].releaser = NULL;
        } else {
            rc = zmq_msg_init_size(&it->frames[i], frames[i].size);
            if (rc == 0 && frames[i].size > 0)
                memcpy(zmq_msg_data(&it->frames[i]), frames[i].data, frames[i].size);
            if (rc == 0)
                pyc_outframe_drop(&frames[i]);   /* a small owned block, or an empty lent frame */
        }
        if (rc != 0)
            goto fail;
        it->n = i + 1;
    }
    return it;
fail:
    for (size_t j = 0; j < n; j++)
        pyc_outframe_drop(&frames[j]);
    if (it != NULL)
        pyc_zqueue_item_free(it);
    return NULL;
}

/* Sends a queued item on a socket.  A failure (a peer gone, ETERM) drops the rest of the message. */
int
pyc_zqueue_item_send(void *sock, pyc_zqitem_t *it)
{
    int rc = 0;
    for (size_t i = 0; i < it->n; i++) {
        if (zmq_msg_send(&it->frames[i], sock, i + 1 < it->n ? ZMQ_SNDMORE : 0) < 0) {
            rc = -1;
            break;
        }
    }
    return rc;
}


void
pyc_zqueue_send_all(pyc_zqueue_t *q, void *sock, const char *name)
{
    for (pyc_zqitem_t *it = pyc_zqueue_take_all(q), *next; it != NULL; it = next) {
        next = it->next;
        if (pyc_zqueue_item_send(sock, it) < 0)
            pyc_log("%s: send failed: %s", name, zmq_strerror(zmq_errno()));
        pyc_zqueue_item_free(it);
    }
}

void
pyc_zqueue_push_msg(pyc_zqueue_t *q, int chan, pyc_msg_t *msg, const char *name)
{
    pyc_zqitem_t *it = calloc(1, sizeof *it);
    if (it == NULL) {
        pyc_log("%s: dropped message: out of memory", name);
        pyc_msg_destroy(&msg);
        return;
    }
    it->chan = chan;
    it->msg = msg;
    pyc_zqueue_push(q, it);
}

pyc_zqitem_t *
pyc_zqueue_take_if(pyc_zqueue_t *q, bool (*pred)(const pyc_zqitem_t *it))
{
    pyc_zqitem_t *taken = NULL, **ttail = &taken, *kept = NULL, **ktail = &kept, *last = NULL;
    pthread_mutex_lock(&q->lock);
    for (pyc_zqitem_t *it = q->head, *next; it != NULL; it = next) {
        next = it->next;
        it->next = NULL;
        if (pred(it)) {
            *ttail = it;
            ttail = &it->next;
        } else {
            *ktail = it;
            ktail = &it->next;
            last = it;
        }
    }
    q->head = kept;
    q->tail = last;
    pthread_mutex_unlock(&q->lock);
    return taken;
}
