/*
 * handshake.c -- `pyc new`'s side of the startup handshake (messaging protocol 5.6): the registration service
 * that a new session's kernel reports its ports to, so that no port is picked, released and raced for.
 *
 * `new` listens on 127.0.0.1 (a port the system gives, kept until the report came), writes a registration
 * file ({"kernel_id", "transport", "registration_ip", "registration_port", "signature_scheme", "key"}, and
 * the session's CURVE keys) where the session file will be, and starts the kernel on it.  The kernel binds
 * ports of its own choosing and connects a DEALER; here the accepted connection speaks ZMTP as a DEALER too
 * (pyc_zmtp_new_fd), takes the report [<IDS|MSG>, HMAC, content], checks the signature and the kernel_id,
 * and answers with a signed ACK.  The session file with the real ports then replaces the registration file.
 */
#include "cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "regreport.h"
#include "wire.h"
#include "zmtp.h"

int
cli_registration_listen(int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 4) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        cli_err("cannot listen for the kernel's registration on 127.0.0.1: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

int
cli_registration_write(const char *path, const char *kernel_id, const pyc_connfile_t *cf, int port,
                       pyc_error_t *err)
{
    json_t *root = pyc_connfile_to_json(cf);
    if (root == NULL)
        return pyc_error_set(err, "cannot encode the registration file");
    for (int c = 0; c < PYC_CHAN_COUNT; c++)
        json_object_del(root, pyc_connfile_port_names[c]);
    json_object_set_new(root, "kernel_id", json_string(kernel_id));
    json_object_set_new(root, "registration_ip", json_string("127.0.0.1"));
    json_object_set_new(root, "registration_port", json_integer(port));
    int rc = pyc_connfile_write_json(path, root, err);
    json_decref(root);
    return rc;
}

int
cli_registration_wait(int lfd, const char *kernel_id, pyc_connfile_t *cf, pid_t pid, double deadline,
                      pyc_error_t *err)
{
    pyc_auth_t *auth = pyc_auth_new(cf->signature_scheme, cf->key, cf->keylen, 0, err);
    pyc_zmtp_t *z = NULL;
    int rc = -1;
    bool reported = false;
    if (auth == NULL)
        return -1;
    while (!reported || pyc_zmtp_pending(z) > 0) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            rc = 1;              /* the caller tells how it ended (reaped here: it must not wait again) */
            goto out;
        }
        if (cli_sigint_count > 0 || pyc_now_s() > deadline) {
            pyc_error_set(err, cli_sigint_count > 0 ? "interrupted" : "the kernel did not report its ports in time");
            goto out;
        }
        struct pollfd p = {.fd = z != NULL ? pyc_zmtp_fd(z) : lfd,
                           .events = z != NULL ? pyc_zmtp_events(z) : POLLIN};
        if (poll(&p, 1, 50) < 0 && errno != EINTR) {
            pyc_error_set(err, "poll: %s", strerror(errno));
            goto out;
        }
        if (z == NULL) {
            int cfd = (p.revents & POLLIN) ? accept4(lfd, NULL, NULL, SOCK_CLOEXEC) : -1;
            if (cfd >= 0 && (z = pyc_zmtp_new_fd(cfd, PYC_ZMTP_DEALER, 65536, 4, err)) == NULL) {
                close(cfd);
                goto out;
            }
            continue;
        }
        if (pyc_zmtp_handle(z, p.revents, err) < 0)
            goto out;
        pyc_zmtp_msg_t *m = reported ? NULL : pyc_zmtp_recv(z);
        if (m == NULL)
            continue;
        int took = pyc_regreport_take(m->frames, m->n, auth, kernel_id, cf, err);
        pyc_zmtp_msg_destroy(&m);
        if (took < 0)
            goto out;
        char sig[PYC_AUTH_MAX_HEX + 1];
        if (pyc_regreport_ack(auth, sig) < 0) {
            pyc_error_set(err, "cannot sign the ACK");
            goto out;
        }
        pyc_frame_t frames[3] = {{PYC_WIRE_DELIM, PYC_WIRE_DELIM_LEN},
                                 {sig, strlen(sig)},
                                 {PYC_REGREPORT_ACK, sizeof PYC_REGREPORT_ACK - 1}};
        if (pyc_zmtp_send(z, frames, 3, 0, err) < 0)
            goto out;
        reported = true;
    }
    rc = 0;
out:
    pyc_zmtp_destroy(&z);
    pyc_auth_destroy(&auth);
    return rc;
}
