/*
 * zrecv.c -- see zrecv.h.
 */
#include "zrecv.h"

int
pyc_zrecv(void *sock, zmq_msg_t *parts, int cap)
{
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        if (n < cap)
            parts[n++] = m;
        else
            zmq_msg_close(&m);
    }
    return n;
}

void
pyc_zrecv_close(zmq_msg_t *parts, int n)
{
    for (int i = 0; i < n; i++)
        zmq_msg_close(&parts[i]);
}
