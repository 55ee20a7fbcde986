/*
 * zrecv.h -- one message taken from a libzmq socket without blocking, its frames kept up to a bound.  For the
 * two ends of the startup handshake that speak through libzmq: the kernel waiting for its ACK
 * (src/server/register.c) and the gateway launcher waiting for the kernel's report (src/gateway/launcher.c).
 * (`pyc new` speaks ZMTP itself, cli/handshake.c, and does not link this.)
 */
#ifndef PYC_ZRECV_H
#define PYC_ZRECV_H

#include <zmq.h>

/* Receives every frame of the message waiting on sock, without blocking.  The first cap frames are kept in
 * parts, as initialised messages the caller gives back with pyc_zrecv_close; the rest are read and dropped,
 * so that no part of an oversized message is left behind to be taken for the next one.  Returns the number
 * kept: 0 when no message was waiting. */
int pyc_zrecv(void *sock, zmq_msg_t *parts, int cap);

/* Closes the n messages of pyc_zrecv. */
void pyc_zrecv_close(zmq_msg_t *parts, int n);

#endif
