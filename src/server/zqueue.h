/*
 * zqueue.h -- the one queue of messages between the kernel's threads: a mutex-guarded FIFO with an eventfd
 * that is readable while the queue may be non-empty, so that a thread can wait on its socket and its queue at
 * once (zmq_poll and poll accept plain descriptors).  Items carry either a decoded request (the main
 * inbox, shell_in, a subshell's queue, the debugger's) or the frames of an outgoing message (replies queued
 * for the control and shell threads).
 *
 * Outgoing frames become zmq_msg_t in the sending thread: small frames copied, large owned blocks and lent
 * bytes handed over without a copy (a 100 MiB buffer copied here cost 60 ms, most of it faulting in the fresh
 * block).
 */
#ifndef PYC_ZQUEUE_H
#define PYC_ZQUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <zmq.h>

#include "frame.h"
#include "msg.h"

/* A multipart message waiting in a queue. */
typedef struct pyc_zqitem {
    struct pyc_zqitem *next;
    int chan;                    /* for the main inbox: where the request came from */
    pyc_msg_t *msg;              /* inbox items carry a decoded request ... */
    size_t n;                    /* ... outbox items carry frames */
    zmq_msg_t frames[];
} pyc_zqitem_t;

/* A mutex-guarded FIFO with an eventfd that is readable while the queue may be non-empty. */
typedef struct pyc_zqueue {
    pthread_mutex_t lock;
    pyc_zqitem_t *head, *tail;
    int efd;
} pyc_zqueue_t;

/* Sets up an empty queue.  Returns 0, or -1 when no eventfd could be made. */
int pyc_zqueue_init(pyc_zqueue_t *q);

/* Makes the queue's eventfd readable (a wake-up, also without an item). */
void pyc_zqueue_signal(pyc_zqueue_t *q);

/* Appends an item (taken over); signals when the queue was empty.  Any thread. */
void pyc_zqueue_push(pyc_zqueue_t *q, pyc_zqitem_t *it);

/* Appends a decoded request (taken over) that came on chan; when memory runs out it is dropped with a log
 * line that names the channel. */
void pyc_zqueue_push_msg(pyc_zqueue_t *q, int chan, pyc_msg_t *msg, const char *name);

/* Pops the whole queue at once (FIFO order kept) and clears the eventfd. */
pyc_zqitem_t *pyc_zqueue_take_all(pyc_zqueue_t *q);

/* Takes out the items for which pred is true, in their order (a list by next), leaving the others queued in
 * theirs. */
pyc_zqitem_t *pyc_zqueue_take_if(pyc_zqueue_t *q, bool (*pred)(const pyc_zqitem_t *it));

/* Pops one item, or returns NULL (and clears the eventfd) when the queue is empty. */
pyc_zqitem_t *pyc_zqueue_pop(pyc_zqueue_t *q);

/* Pops one item, or returns NULL, without touching the eventfd: for a waiter that reads the eventfd only when
 * poll(2) says it was signalled (a signal left over from an item popped this way costs one wasted wake). */
pyc_zqitem_t *pyc_zqueue_try_pop(pyc_zqueue_t *q);

/* Frees the items left, closes the eventfd and destroys the lock. */
void pyc_zqueue_clear(pyc_zqueue_t *q);

/* Frees an item, its frames and its message. */
void pyc_zqueue_item_free(pyc_zqitem_t *it);

/* An item carrying frames[0..n) as zmq messages; owned blocks and lent bytes are taken over in every case.
 * NULL when memory runs out. */
pyc_zqitem_t *pyc_zqueue_item_new(pyc_outframe_t *frames, size_t n);

/* Sends every item queued, in order, on sock and frees them (the owner of sock only); a failure is logged
 * with the channel's name and the rest still go. */
void pyc_zqueue_send_all(pyc_zqueue_t *q, void *sock, const char *name);

/* Sends an item's frames on a socket.  A failure (a peer gone, ETERM) drops the rest of the message and
 * returns -1. */
int pyc_zqueue_item_send(void *sock, pyc_zqitem_t *it);

#endif
