/*
 * register.c -- see register.h.  The handshake has a ZeroMQ context of its own, made and ended around it: it
 * runs once, before the kernel's threads start, and costs one I/O thread for its few milliseconds.
 */
#include "register.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "clock.h"
#include "log.h"
#include "regreport.h"
#include "wire.h"
#include "zrecv.h"

static int
send_report(void *sock, const char *content, size_t len, const char *sig)
{
    return zmq_send(sock, PYC_WIRE_DELIM, PYC_WIRE_DELIM_LEN, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
                   zmq_send(sock, sig, strlen(sig), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
                   zmq_send(sock, content, len, ZMQ_DONTWAIT) < 0
               ? -1
               : 0;
}

/* Reads one message and says whether it is a well-signed ACK: 1 yes, 0 no (counted in *refused). */
static int
read_ack(void *sock, pyc_auth_t *auth, int *refused)
{
    zmq_msg_t parts[8];
    int n = pyc_zrecv(sock, parts, 8);
    int delim = -1;
    for (int i = 0; i < n && delim < 0; i++) {
        if (zmq_msg_size(&parts[i]) == PYC_WIRE_DELIM_LEN &&
            memcmp(zmq_msg_data(&parts[i]), PYC_WIRE_DELIM, PYC_WIRE_DELIM_LEN) == 0)
            delim = i;
    }
    int ok = 0;
    if (delim >= 0 && delim + 2 < n) {
        pyc_frame_t content = {zmq_msg_data(&parts[delim + 2]), zmq_msg_size(&parts[delim + 2])};
        pyc_error_t verr;
        ok = pyc_auth_verify(auth, &content, 1, zmq_msg_data(&parts[delim + 1]), zmq_msg_size(&parts[delim + 1]),
                             &verr) == 0;
        if (!ok)
            pyc_log("registration: refused an answer: %s", verr.text);
    } else {
        pyc_log("registration: refused an answer of %d frames without <IDS|MSG>, signature and content", n);
    }
    *refused += !ok;
    pyc_zrecv_close(parts, n);
    return ok;
}

int
pyc_register(const pyc_connfile_t *cf, pyc_auth_t *auth, double timeout_s, pyc_error_t *err)
{
    char content[1024], sig[PYC_AUTH_MAX_HEX + 1], ep[512];
    int len = pyc_regreport_content(cf, content, sizeof content);
    if (len < 0)
        return pyc_error_set(err, "registration: the report does not fit (kernel_id too long?)");
    pyc_frame_t frame = {content, (size_t)len};
    if (pyc_auth_sign(auth, &frame, 1, sig) < 0)
        return pyc_error_set(err, "registration: cannot sign the report");
    snprintf(ep, sizeof ep, "tcp://%s:%d", cf->registration_ip, cf->registration_port);
    void *ctx = zmq_ctx_new();
    void *sock = ctx != NULL ? zmq_socket(ctx, ZMQ_DEALER) : NULL;
    int zero = 0, rc = -1, refused = 0;
    if (sock == NULL || zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero) < 0 || zmq_connect(sock, ep) < 0) {
        pyc_error_set(err, "registration: cannot connect to %s: %s", ep, zmq_strerror(zmq_errno()));
        goto out;
    }
    double deadline = pyc_now_s() + timeout_s, next_send = 0;
    while (pyc_now_s() < deadline) {
        double now = pyc_now_s();
        if (now >= next_send) {
            /* A DEALER queues the report until the connection is up; one waiting unsent is enough. */
            if (send_report(sock, content, (size_t)len, sig) < 0 && zmq_errno() != EAGAIN)
                pyc_log("registration: cannot send the report to %s: %s", ep, zmq_strerror(zmq_errno()));
            next_send = now + PYC_REGISTER_RETRY_MS / 1000.0;
        }
        double wait = next_send < deadline ? next_send - now : deadline - now;
        zmq_pollitem_t item = {.socket = sock, .events = ZMQ_POLLIN};
        int p = zmq_poll(&item, 1, (long)(wait * 1000) + 1);
        if (p < 0 && zmq_errno() != EINTR) {
            pyc_error_set(err, "registration: %s", zmq_strerror(zmq_errno()));
            goto out;
        }
        if (p > 0 && read_ack(sock, auth, &refused)) {
            rc = 0;
            goto out;
        }
    }
    pyc_error_set(err, "registration: no signed answer from %s within %g s (%d answers refused for their "
                       "signature): the launcher is gone or does not know this kernel", ep, timeout_s, refused);
out:
    if (sock != NULL)
        zmq_close(sock);
    if (ctx != NULL)
        zmq_ctx_term(ctx);
    return rc;
}
