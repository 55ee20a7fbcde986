/*
 * client.h -- a small synchronous Jupyter client for the `pyc` command, speaking ZMTP itself (zmtp.h).
 *
 * One pyc_client_t is one connection to one kernel: DEALER connections for shell, control and stdin (sharing
 * one routing id, so that the kernel's input_request for a shell request reaches our stdin connection), a SUB
 * connection for iopub subscribed to everything, and on demand a REQ connection for the heartbeat.  Messages
 * are made with msg.c (headers), signed with auth.c and decoded with wire.c, exactly as the kernel does it;
 * nothing here knows what a message means beyond its parent's msg_id.
 *
 * Everything is blocking with a timeout and single-threaded.  A wait returns early when a signal arrives
 * (poll fails with EINTR), so that the caller can forward Ctrl-C as an interrupt_request.  When the caller
 * names the kernel's process (pyc_client_watch), a wait also ends as soon as that process is gone, instead of
 * waiting for a reply that can never come; and when the caller asks for the heartbeat watch
 * (pyc_client_watch_heartbeat), a wait also ends when the kernel's process lives but its heartbeat is silent
 * (stopped, or stuck), or when it answers its heartbeat but drops every message we sign (another key).  As
 * with ZeroMQ, connecting never waits and a refused or lost connection is tried again in the background; a
 * kernel that breaks the protocol ends the wait with an error.
 *
 * Buffers sent with a message are not copied: the connection writes them from the caller's memory, possibly
 * after pyc_client_send has returned (during later waits).  The caller keeps them valid until the kernel has
 * answered the message, or until pyc_client_destroy (which drops what is unsent).
 */
#ifndef PYC_CLIENT_H
#define PYC_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "auth.h"
#include "connfile.h"
#include "error.h"
#include "msg.h"
#include "wire.h"

typedef struct pyc_client pyc_client_t;

/* Results of pyc_client_recv and the waits built on it. */
enum {
    PYC_RECV_MSG = 1,            /* a message */
    PYC_RECV_TIMEOUT = 0,        /* nothing within the timeout */
    PYC_RECV_ERROR = -1,         /* err says why; err.code PYC_EGONE: the watched process is gone;
                                  * PYC_ETIMEDOUT: the heartbeat watch found the kernel silent; PYC_EAUTH: the
                                  * kernel signs with another key, or drops what we sign; else the kernel broke
                                  * the protocol */
    PYC_RECV_SIGNAL = -2,        /* a signal arrived; the caller decides what to do, then waits again */
};

/* Connects to the kernel of cf (not copied; only read here): shell, iopub and control, and stdin when
 * with_stdin (only a client that answers input_request needs it; every channel costs a TCP connection).
 * Returns NULL with err when an endpoint is unusable, a socket cannot be made or the signature scheme is
 * unknown.  Connecting never waits for the kernel: it goes on in the background of the waits. */
pyc_client_t *pyc_client_new(const pyc_connfile_t *cf, bool with_stdin, pyc_error_t *err);

/* Closes the sockets (unsent messages are dropped) and frees the client; sets *self_p to NULL.  NULL-safe. */
void pyc_client_destroy(pyc_client_t **self_p);

/* From now on a wait fails with "the kernel (pid P) is gone" (PYC_EGONE) as soon as process pid (with start
 * tick start, 0 for any) does not exist any more, and what it sent before it ended has been read (a wait that
 * finds the process gone delivers the messages already on its connections first).  pid 0 turns the watch
 * off.  pyc_client_watched_pid: the pid watched, 0 for none. */
void pyc_client_watch(pyc_client_t *self, long pid, unsigned long long start);
long pyc_client_watched_pid(const pyc_client_t *self);

/* The heartbeat watch, off until this is called with silence_ms > 0 (0 turns it off).  Once the waits of the
 * client have lasted 1 s in all without a sign of life from the kernel (a message, a heartbeat echo), the
 * client pings the kernel's heartbeat (a REQ connection made then, never before: short requests pay
 * nothing), and again every second while it is silent.  A wait then fails with PYC_RECV_ERROR when:
 *   1) the heartbeat has been silent for silence_ms after that first second (err.code PYC_ETIMEDOUT, "the
 *      kernel (pid P) does not answer its heartbeat: it is stopped or stuck");
 *   2) the heartbeat answers but no message from the kernel has verified yet, and a kernel_info_request sent
 *      on control then got no answer within silence_ms (err.code PYC_EAUTH: the kernel drops what we sign).
 * A message whose signature does not verify ends a wait at once with PYC_EAUTH, watch or not.  Only time
 * spent inside the waits counts.  pyc's heartbeat is echoed by a thread of its own, so a long cell never
 * trips it. */
void pyc_client_watch_heartbeat(pyc_client_t *self, int silence_ms);

/* Sends a message on PYC_CHAN_SHELL, _CONTROL or _STDIN.  content and metadata may be NULL ({}); parent may be
 * NULL ({}) or the header of the message being answered (input_reply).  bufs[0..nbufs) follow as raw frames
 * (see the note on buffers above).  Writes the new msg_id into msg_id_out (PYC_MSG_ID_LEN + 1 bytes) when not
 * NULL.  Returns 0 or -1 with err. */
int pyc_client_send(pyc_client_t *self, int chan, const char *msg_type, json_t *content, json_t *metadata,
                    json_t *parent, const pyc_frame_t *bufs, size_t nbufs, char *msg_id_out, pyc_error_t *err);

/* The read end of a pipe that a signal handler writes to (the self-pipe trick), non-blocking; -1 for none.
 * Every wait of every client watches it and returns PYC_RECV_SIGNAL when it holds something, so that a
 * signal that arrives just before a wait begins, and thus interrupts no system call, is not missed. */
void pyc_client_set_signal_fd(int fd);

/* Waits up to timeout_ms (-1: no limit) for the next message on any channel.  On PYC_RECV_MSG, *out is a new
 * message (the caller destroys it; its buffers are views that live as long as it does) and *chan its
 * channel.  A message whose signature does not verify ends the wait (PYC_RECV_ERROR, PYC_EAUTH: nobody but
 * the kernel sends on these connections, so it holds another key); one that fails to decode otherwise
 * (layout, a replay, JSON) is dropped with one line on stderr and the wait goes on. */
int pyc_client_recv(pyc_client_t *self, int timeout_ms, pyc_msg_t **out, int *chan, pyc_error_t *err);

/* Makes sure iopub is subscribed before anything is sent whose output matters: a SUB socket drops what is
 * published before its subscription reaches the kernel, and nothing says when that is.  Sends
 * kernel_info_request on control (answered even while a cell runs) and waits for any iopub message, asking
 * again every 100 ms.  Returns PYC_RECV_MSG when iopub is live, PYC_RECV_TIMEOUT, _ERROR or _SIGNAL. */
int pyc_client_sync_iopub(pyc_client_t *self, int timeout_ms, pyc_error_t *err);

/* Sends a request and waits up to timeout_ms for the reply on the same channel whose parent is that request;
 * other messages are dropped.  Returns PYC_RECV_MSG with *reply set, or _TIMEOUT, _ERROR, _SIGNAL. */
int pyc_client_request(pyc_client_t *self, int chan, const char *msg_type, json_t *content, int timeout_ms,
                       pyc_msg_t **reply, pyc_error_t *err);

/* True when the parent_header of msg has msg_id `id`. */
bool pyc_client_is_child_of(const pyc_msg_t *msg, const char *id);

/* Pings the heartbeats of n kernels at once and waits at most timeout_ms in all for their echoes; alive[i]
 * says whether kernel i answered.  Returns 0, or -1 with err when memory runs out. */
int pyc_client_heartbeat(const pyc_connfile_t *const *cfs, size_t n, int timeout_ms, bool *alive, pyc_error_t *err);

#endif
