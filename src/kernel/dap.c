/*
 * dap.c -- see dap.h.  Header names are compared without regard to case, as in HTTP; headers other than
 * Content-Length are skipped.
 */
#include "dap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"

int
pyc_dap_frame(const char *buf, size_t len, size_t max_body, const char **body, size_t *body_len, size_t *used)
{
    static const char name[] = "content-length:";
    size_t pos = 0, length = 0;
    int have_length = 0;
    for (;;) {
        if (pos >= PYC_DAP_MAX_HEADER)
            return -1;
        const char *nl = memchr(buf + pos, '\n', len - pos);
        if (nl == NULL)
            return len - pos >= PYC_DAP_MAX_HEADER ? -1 : 0;
        size_t end = (size_t)(nl - buf);
        if (end == pos || end < pos + 1 || buf[end - 1] != '\r')
            return -1;           /* a line that does not end in CRLF */
        size_t line = end - 1 - pos;
        if (line == 0) {
            pos = end + 1;       /* the empty line: the body follows */
            break;
        }
        if (line > sizeof name - 1 && strncasecmp(buf + pos, name, sizeof name - 1) == 0) {
            size_t i = pos + sizeof name - 1;
            while (i < end - 1 && buf[i] == ' ')
                i++;
            if (i == end - 1 || have_length)
                return -1;
            for (; i < end - 1; i++) {
                if (buf[i] < '0' || buf[i] > '9' || length > max_body / 10)
                    return -1;
                length = length * 10 + (size_t)(buf[i] - '0');
            }
            if (length > max_body)
                return -1;
            have_length = 1;
        }
        pos = end + 1;
    }
    if (!have_length || pos > PYC_DAP_MAX_HEADER)
        return -1;
    if (len - pos < length)
        return 0;
    *body = buf + pos;
    *body_len = length;
    *used = pos + length;
    return 1;
}

void
pyc_dap_init(pyc_dap_conn_t *c)
{
    c->fd = -1;
    pyc_buf_init(&c->rx, PYC_DAP_MAX_BODY + PYC_DAP_MAX_HEADER + 65536);
}

int
pyc_dap_connect(pyc_dap_conn_t *c, int port, pyc_error_t *err)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        pyc_error_set(err, "cannot connect to debugpy's adapter on 127.0.0.1:%d: %s", port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pyc_dap_close(c);
    c->fd = fd;
    return 0;
}

void
pyc_dap_close(pyc_dap_conn_t *c)
{
    if (c == NULL)
        return;
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    pyc_buf_free(&c->rx);
}

int
pyc_dap_send(pyc_dap_conn_t *c, json_t *msg)
{
    char *body = c->fd >= 0 ? json_dumps(msg, JSON_COMPACT) : NULL;
    if (body == NULL)
        return -1;
    /* One write of header and body (a few hundred bytes: the copy costs less than a second system call).
     * SIGPIPE is ignored in the kernel (Python's start-up), so a peer that went away is an EPIPE here. */
    size_t blen = strlen(body);
    pyc_buf_t b;
    pyc_buf_init(&b, PYC_DAP_MAX_BODY + PYC_DAP_MAX_HEADER);
    int rc = pyc_buf_addf(&b, "Content-Length: %zu\r\n\r\n", blen) < 0 || pyc_buf_add(&b, body, blen) < 0 ||
                     pyc_write_all(c->fd, b.data, b.len) < 0
                 ? -1
                 : 0;
    pyc_buf_free(&b);
    free(body);
    if (rc < 0) {
        pyc_log("debugger: lost debugpy's adapter: %s", strerror(errno));
        pyc_dap_close(c);
    }
    return rc;
}

int
pyc_dap_read(pyc_dap_conn_t *c, int timeout_ms)
{
    if (c->fd < 0)
        return -1;
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    int n = poll(&p, 1, timeout_ms);
    if (n <= 0)
        return n < 0 && errno != EINTR ? -1 : 0;
    if (pyc_buf_reserve(&c->rx, 65536) < 0) {
        pyc_log("debugger: a message from debugpy's adapter is larger than %zu MiB: connection closed",
                PYC_DAP_MAX_BODY >> 20);
        pyc_dap_close(c);
        return -1;
    }
    ssize_t r = recv(c->fd, c->rx.data + c->rx.len, c->rx.alloc - c->rx.len - 1, 0);
    if (r <= 0) {
        if (r < 0 && errno == EINTR)
            return 0;
        pyc_dap_close(c);
        return -1;
    }
    c->rx.len += (size_t)r;
    return 1;
}

json_t *
pyc_dap_next(pyc_dap_conn_t *c)
{
    for (;;) {
        const char *body;
        size_t blen, used;
        int r = c->rx.len > 0 ? pyc_dap_frame(c->rx.data, c->rx.len, PYC_DAP_MAX_BODY, &body, &blen, &used) : 0;
        if (r == 0)
            return NULL;
        if (r < 0) {
            pyc_log("debugger: debugpy's adapter sent a malformed message header: connection closed");
            pyc_dap_close(c);
            return NULL;
        }
        json_error_t jerr;
        json_t *msg = json_loadb(body, blen, 0, &jerr);
        memmove(c->rx.data, c->rx.data + used, c->rx.len - used);
        c->rx.len -= used;
        if (msg != NULL && json_is_object(msg))
            return msg;
        pyc_log("debugger: dropped a message from debugpy's adapter that is not a JSON object");
        json_decref(msg);
    }
}
