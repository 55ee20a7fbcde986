/*
 * zmtp.c -- ZMTP 3.0 client connections for `pyc`: the decoder, the encoder, and a non-blocking socket that
 * reconnects; see zmtp.h for the wire subset and the contracts.
 *
 * Costs that shaped it: a `pyc run` moves a few hundred bytes each way, so output is queued as a list of
 * segments (copied headers and small bodies in one buffer, borrowed large bodies in place) and written with
 * one sendmsg per batch of 64; input is read 64 KB at a time and decoded in place, except that the body of a
 * large frame (at least 64 KB still missing) is read straight into its own storage, so a 1 GB pickle buffer
 * is read once and never copied.  Frame storage is allocated when its header arrives, after the caps are
 * checked: a peer can make us allocate no more than the cap, and only as much as it declares.
 */
#include "zmtp.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"

#define FLAG_MORE 0x01
#define FLAG_LONG 0x02
#define FLAG_COMMAND 0x04

#define N_TYPES 3

/* Reconnection: the first retry after 10 ms, then doubling up to libzmq's 100 ms. */
#define RETRY_FIRST_MS 10
#define RETRY_MAX_MS 100

/* The read buffer; a frame body with at least this much still missing is read into its storage directly. */
#define RBUF_SIZE 65536

/* At most this much is read per pyc_zmtp_handle, so that one busy connection does not hold up the caller. */
#define READ_BUDGET ((size_t)16 << 20)

/* iovecs per sendmsg. */
#define IOV_BATCH 64

/* Our greeting and READY: 64 + 9 + a READY body of at most 6 + 22 + 13 + 255 bytes. */
#define HS_MAX 512

static const char *const type_names[N_TYPES] = {"DEALER", "SUB", "REQ"};

/* The peers each of our types may talk to (as libzmq's mechanism_t::check_socket_type has it). */
static const char *const peers_of[N_TYPES][4] = {
    {"ROUTER", "DEALER", "REP", NULL},
    {"PUB", "XPUB", NULL, NULL},
    {"ROUTER", "REP", NULL, NULL},
};

/* The storage of every empty frame: data pointers are never NULL. */
static unsigned char empty_frame[1];

/* Copies up to cap - 1 bytes of s[0..n) into out as printable ASCII ('?' for anything else), for error
 * sentences that quote the peer. */
static const char *
printable(char *out, size_t cap, const unsigned char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < cap; i++)
        out[k++] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
    out[k] = '\0';
    return out;
}

/* ---- messages -------------------------------------------------------------------------------------------- */

void
pyc_zmtp_msg_destroy(pyc_zmtp_msg_t **msg_p)
{
    if (msg_p == NULL || *msg_p == NULL)
        return;
    pyc_zmtp_msg_t *m = *msg_p;
    for (size_t i = 0; i < m->n; i++) {
        if (m->frames[i].data != empty_frame)
            free((void *)m->frames[i].data);
    }
    free(m->frames);
    free(m);
    *msg_p = NULL;
}

void
pyc_zmtp_msg_free(void *msg)
{
    pyc_zmtp_msg_t *m = msg;
    pyc_zmtp_msg_destroy(&m);
}

/* ---- encoding -------------------------------------------------------------------------------------------- */

void
pyc_zmtp_greeting(unsigned char out[PYC_ZMTP_GREETING_LEN])
{
    memset(out, 0, PYC_ZMTP_GREETING_LEN);
    out[0] = 0xff;
    out[9] = 0x7f;
    out[10] = 3;
    out[11] = 0;
    memcpy(out + 12, "NULL", 4);
}

size_t
pyc_zmtp_frame_header(unsigned char out[9], size_t size, bool more, bool command)
{
    unsigned char flags = (unsigned char)((more ? FLAG_MORE : 0) | (command ? FLAG_COMMAND : 0));
    if (size <= 255) {
        out[0] = flags;
        out[1] = (unsigned char)size;
        return 2;
    }
    out[0] = flags | FLAG_LONG;
    uint64_t s = size;
    for (int i = 0; i < 8; i++)
        out[1 + i] = (unsigned char)(s >> (56 - 8 * i));
    return 9;
}

static size_t
put_property(unsigned char *p, const char *name, const void *value, size_t vlen)
{
    size_t nl = strlen(name);
    p[0] = (unsigned char)nl;
    memcpy(p + 1, name, nl);
    p += 1 + nl;
    p[0] = (unsigned char)(vlen >> 24);
    p[1] = (unsigned char)(vlen >> 16);
    p[2] = (unsigned char)(vlen >> 8);
    p[3] = (unsigned char)vlen;
    if (vlen > 0)
        memcpy(p + 4, value, vlen);
    return 1 + nl + 4 + vlen;
}

int
pyc_zmtp_ready(unsigned char *out, size_t cap, int type, const void *identity, size_t idlen)
{
    unsigned char body[6 + (1 + 11 + 4 + 6) + (1 + 8 + 4 + PYC_ZMTP_MAX_IDENTITY)], hdr[9];
    if (type < 0 || type >= N_TYPES || idlen > PYC_ZMTP_MAX_IDENTITY)
        return -1;
    memcpy(body, "\5READY", 6);
    size_t n = 6;
    n += put_property(body + n, "Socket-Type", type_names[type], strlen(type_names[type]));
    if (identity != NULL && idlen > 0)
        n += put_property(body + n, "Identity", identity, idlen);
    size_t h = pyc_zmtp_frame_header(hdr, n, false, true);
    if (h + n > cap)
        return -1;
    memcpy(out, hdr, h);
    memcpy(out + h, body, n);
    return (int)(h + n);
}

/* ---- decoding -------------------------------------------------------------------------------------------- */

enum { D_GREETING, D_FLAGS, D_SIZE, D_BODY, D_FAILED };

struct pyc_zmtp_dec {
    int type;
    size_t max_msg, max_frames;
    int state;
    unsigned char greeting[PYC_ZMTP_GREETING_LEN];
    size_t have;                 /* bytes so far of the greeting (D_GREETING), size field (D_SIZE) or body */
    unsigned char flags;         /* of the frame being read */
    unsigned char size_field[8];
    size_t size_len;             /* 1 or 8 */
    uint64_t size;               /* D_BODY: the frame's */
    unsigned char *body;         /* D_BODY: where it goes, the last frame of msg or cmd */
    unsigned char *cmd;          /* the body of a command being read (owned) */
    bool ready;                  /* the peer's READY was accepted */
    pyc_zmtp_msg_t *msg;         /* the message being received; NULL between messages */
    pyc_error_t failure;         /* D_FAILED: why */
};

static void
dec_drop(pyc_zmtp_dec_t *self)
{
    pyc_zmtp_msg_destroy(&self->msg);
    free(self->cmd);
    self->cmd = NULL;
    self->body = NULL;
}

/* Stops the decoder for good (until reset) with a sentence in self->failure and err.  Returns -1. */
static int
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
dec_fail(pyc_zmtp_dec_t *self, pyc_error_t *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(self->failure.text, sizeof self->failure.text, fmt, ap);
    va_end(ap);
    self->state = D_FAILED;
    dec_drop(self);
    if (err != NULL)
        *err = self->failure;
    return -1;
}

pyc_zmtp_dec_t *
pyc_zmtp_dec_new(int type, size_t max_msg, size_t max_frames, pyc_error_t *err)
{
    if (type < 0 || type >= N_TYPES) {
        pyc_error_set(err, "unknown socket type %d", type);
        return NULL;
    }
    pyc_zmtp_dec_t *self = calloc(1, sizeof *self);
    if (self == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    self->type = type;
    self->max_msg = max_msg;
    self->max_frames = max_frames > 0 ? max_frames : 1;
    self->state = D_GREETING;
    return self;
}

void
pyc_zmtp_dec_destroy(pyc_zmtp_dec_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    dec_drop(*self_p);
    free(*self_p);
    *self_p = NULL;
}

void
pyc_zmtp_dec_reset(pyc_zmtp_dec_t *self)
{
    dec_drop(self);
    self->state = D_GREETING;
    self->have = 0;
    self->ready = false;
    self->failure.text[0] = '\0';
}

/* Checks what has come of the greeting so far, so that a peer that is not ZMTP 3 is refused at its first
 * wrong byte rather than after 64. */
static int
check_greeting(pyc_zmtp_dec_t *self, pyc_error_t *err)
{
    static const unsigned char null_mech[20] = "NULL";
    const unsigned char *g = self->greeting;
    char shown[24];
    if (g[0] != 0xff)
        return dec_fail(self, err, "the peer does not speak ZMTP (its greeting starts with 0x%02x, not 0xff)", g[0]);
    if (self->have >= 10 && !(g[9] & 1))
        return dec_fail(self, err, "the peer speaks ZMTP 1.0; only 3.x is supported");
    if (self->have >= 11 && g[10] < 3)
        return dec_fail(self, err, "the peer speaks ZMTP %d.x; only 3.x is supported", g[10]);
    if (self->have >= 32 && memcmp(g + 12, null_mech, sizeof null_mech) != 0)
        return dec_fail(self, err, "the peer asks for the security mechanism \"%s\"; only NULL is supported",
                        printable(shown, sizeof shown, g + 12, strnlen((const char *)g + 12, 20)));
    return 0;
}

static bool
is_name(const unsigned char *name, size_t nl, const char *want)
{
    return nl == strlen(want) && memcmp(name, want, nl) == 0;
}

/* The peer's READY: body[0..len) after the command name.  Returns PYC_ZMTP_EV_READY or -1. */
static int
on_ready(pyc_zmtp_dec_t *self, const unsigned char *p, size_t len, pyc_zmtp_event_t *ev, pyc_error_t *err)
{
    const unsigned char *end = p + len;
    bool typed = false;
    char shown[40];
    while (p < end) {
        size_t nl = p[0];
        p++;
        if (nl == 0 || (size_t)(end - p) < nl + 4)
            return dec_fail(self, err, "the peer's READY has a malformed property");
        const unsigned char *name = p;
        p += nl;
        uint64_t vl = (uint64_t)p[0] << 24 | (uint64_t)p[1] << 16 | (uint64_t)p[2] << 8 | p[3];
        p += 4;
        if (vl > (uint64_t)(end - p))
            return dec_fail(self, err, "the peer's READY has a property longer than the command");
        const unsigned char *value = p;
        p += vl;
        if (nl == 11 && strncasecmp((const char *)name, "Socket-Type", 11) == 0) {
            int k;
            for (k = 0; peers_of[self->type][k] != NULL; k++) {
                if (is_name(value, vl, peers_of[self->type][k]))
                    break;
            }
            if (peers_of[self->type][k] == NULL)
                return dec_fail(self, err, "the peer is a %s socket, which a %s cannot talk to",
                                printable(shown, sizeof shown, value, vl), type_names[self->type]);
            typed = true;
        }
    }
    if (!typed)
        return dec_fail(self, err, "the peer's READY has no Socket-Type");
    self->ready = true;
    ev->type = PYC_ZMTP_EV_READY;
    return PYC_ZMTP_EV_READY;
}

/* A whole command, c[0..len) (len >= 1).  Returns an event type (0 for a command that is ignored) or -1. */
static int
on_command(pyc_zmtp_dec_t *self, const unsigned char *c, size_t len, pyc_zmtp_event_t *ev, pyc_error_t *err)
{
    char shown[80];
    size_t nl = c[0];
    if (nl == 0 || nl > len - 1)
        return dec_fail(self, err, "the peer sent a malformed command");
    const unsigned char *name = c + 1, *rest = c + 1 + nl;
    size_t rlen = len - 1 - nl;
    if (is_name(name, nl, "ERROR")) {
        if (rlen < 1 || rest[0] > rlen - 1)
            return dec_fail(self, err, "the peer sent a malformed ERROR");
        return dec_fail(self, err, "the peer refused the connection: %s",
                        printable(shown, sizeof shown, rest + 1, rest[0]));
    }
    if (!self->ready) {
        if (!is_name(name, nl, "READY"))
            return dec_fail(self, err, "the peer's first command is %s, not READY", printable(shown, 24, name, nl));
        return on_ready(self, rest, rlen, ev, err);
    }
    if (is_name(name, nl, "READY"))
        return dec_fail(self, err, "the peer sent a second READY");
    if (is_name(name, nl, "PING")) {
        if (rlen < 2 || rlen - 2 > sizeof ev->ping_ctx)
            return dec_fail(self, err, "the peer sent a malformed PING");
        ev->type = PYC_ZMTP_EV_PING;
        ev->ping_len = rlen - 2;
        memcpy(ev->ping_ctx, rest + 2, rlen - 2);
        return PYC_ZMTP_EV_PING;
    }
    return 0;                    /* PONG, SUBSCRIBE, CANCEL and commands of later versions: ignored */
}

/* The frame that was being read is whole.  Returns an event type or -1. */
static int
end_frame(pyc_zmtp_dec_t *self, pyc_zmtp_event_t *ev, pyc_error_t *err)
{
    self->state = D_FLAGS;
    self->have = 0;
    self->body = NULL;
    if (self->flags & FLAG_COMMAND) {
        unsigned char *c = self->cmd;
        self->cmd = NULL;
        int r = on_command(self, c, (size_t)self->size, ev, err);
        free(c);
        return r;
    }
    if (self->flags & FLAG_MORE)
        return 0;
    ev->type = PYC_ZMTP_EV_MSG;
    ev->msg = self->msg;
    self->msg = NULL;
    return PYC_ZMTP_EV_MSG;
}

/* The size of a frame is known: checks it against the caps and makes room.  Returns an event type (an empty
 * frame is whole at once) or -1. */
static int
start_body(pyc_zmtp_dec_t *self, pyc_zmtp_event_t *ev, pyc_error_t *err)
{
    uint64_t size = self->size;
    self->have = 0;
    if (self->flags & FLAG_COMMAND) {
        if (size == 0)
            return dec_fail(self, err, "the peer sent an empty command");
        if (size > PYC_ZMTP_MAX_COMMAND)
            return dec_fail(self, err, "the peer sent a command of %llu bytes (at most %d are accepted)",
                            (unsigned long long)size, PYC_ZMTP_MAX_COMMAND);
        if ((self->cmd = malloc((size_t)size)) == NULL)
            return dec_fail(self, err, "out of memory");
        self->body = self->cmd;
        self->state = D_BODY;
        return 0;
    }
    if (!self->ready)
        return dec_fail(self, err, "the peer sent a message before its READY");
    pyc_zmtp_msg_t *m = self->msg;
    if (m == NULL) {
        if ((m = self->msg = calloc(1, sizeof *m)) == NULL)
            return dec_fail(self, err, "out of memory");
    }
    if (m->n >= self->max_frames)
        return dec_fail(self, err, "the peer sent a message of more than %zu frames", self->max_frames);
    if (size > (uint64_t)(self->max_msg - m->bytes))
        return dec_fail(self, err, "the peer sent a message of more than %zu bytes", self->max_msg);
    if (m->n == m->cap) {
        size_t ncap = m->cap > 0 ? m->cap * 2 : 8;
        if (ncap > self->max_frames)
            ncap = self->max_frames;
        pyc_frame_t *f = realloc(m->frames, ncap * sizeof *f);
        if (f == NULL)
            return dec_fail(self, err, "out of memory");
        m->frames = f;
        m->cap = ncap;
    }
    unsigned char *data = size > 0 ? malloc((size_t)size) : empty_frame;
    if (data == NULL)
        return dec_fail(self, err, "out of memory for a frame of %llu bytes", (unsigned long long)size);
    m->frames[m->n].data = data;
    m->frames[m->n].size = (size_t)size;
    m->n++;
    m->bytes += (size_t)size;
    self->body = data;
    if (size == 0)
        return end_frame(self, ev, err);
    self->state = D_BODY;
    return 0;
}

int
pyc_zmtp_dec_feed(pyc_zmtp_dec_t *self, const void *p, size_t n, size_t *used, pyc_zmtp_event_t *ev,
                  pyc_error_t *err)
{
    const unsigned char *in = p;
    size_t i = 0;
    int r = 0;

    ev->type = PYC_ZMTP_EV_NONE;
    ev->msg = NULL;
    *used = 0;
    if (self->state == D_FAILED) {
        if (err != NULL)
            *err = self->failure;
        return -1;
    }
    while (i < n && r == 0) {
        size_t take;
        switch (self->state) {
        case D_GREETING:
            take = PYC_ZMTP_GREETING_LEN - self->have;
            take = take < n - i ? take : n - i;
            memcpy(self->greeting + self->have, in + i, take);
            self->have += take;
            i += take;
            if (check_greeting(self, err) < 0)
                return -1;
            if (self->have == PYC_ZMTP_GREETING_LEN) {
                self->state = D_FLAGS;
                self->have = 0;
            }
            break;
        case D_FLAGS:
            self->flags = in[i++];
            if (self->flags & ~(FLAG_MORE | FLAG_LONG | FLAG_COMMAND))
                return dec_fail(self, err, "the peer sent a frame with reserved flag bits set (0x%02x)", self->flags);
            if ((self->flags & FLAG_COMMAND) && (self->flags & FLAG_MORE))
                return dec_fail(self, err, "the peer sent a command marked MORE");
            self->size_len = self->flags & FLAG_LONG ? 8 : 1;
            self->have = 0;
            self->state = D_SIZE;
            break;
        case D_SIZE:
            take = self->size_len - self->have;
            take = take < n - i ? take : n - i;
            memcpy(self->size_field + self->have, in + i, take);
            self->have += take;
            i += take;
            if (self->have < self->size_len)
                break;
            self->size = 0;
            for (size_t k = 0; k < self->size_len; k++)
                self->size = self->size << 8 | self->size_field[k];
            r = start_body(self, ev, err);
            if (r < 0)
                return -1;
            break;
        case D_BODY:
            take = (size_t)(self->size - self->have);
            take = take < n - i ? take : n - i;
            memcpy(self->body + self->have, in + i, take);
            self->have += take;
            i += take;
            if (self->have == self->size) {
                r = end_frame(self, ev, err);
                if (r < 0)
                    return -1;
            }
            break;
        default:
            assert(0);
        }
    }
    *used = i;
    return r;
}

size_t
pyc_zmtp_dec_body(pyc_zmtp_dec_t *self, void **dst)
{
    if (self->state != D_BODY || (self->flags & FLAG_COMMAND))
        return 0;
    *dst = self->body + self->have;
    return (size_t)(self->size - self->have);
}

int
pyc_zmtp_dec_commit(pyc_zmtp_dec_t *self, size_t k, pyc_zmtp_event_t *ev, pyc_error_t *err)
{
    ev->type = PYC_ZMTP_EV_NONE;
    ev->msg = NULL;
    assert(self->state == D_BODY && !(self->flags & FLAG_COMMAND) && k <= self->size - self->have);
    self->have += k;
    if (self->have < self->size)
        return 0;
    return end_frame(self, ev, err);
}

/* ---- the connection -------------------------------------------------------------------------------------- */

enum { C_WAIT, C_CONNECTING, C_HANDSHAKE, C_UP, C_FAILED };

/* A piece of queued output: borrowed bytes (ext), or bytes at obuf.data + off. */
typedef struct seg {
    const unsigned char *ext;
    size_t off, len;
    bool first;                  /* the first piece of a message */
} seg_t;

struct pyc_zmtp {
    int type;
    char *endpoint;
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
        struct sockaddr_un un;
    } addr;
    socklen_t addrlen;
    int fd, state;
    double retry_at;             /* C_WAIT: when to connect again, in pyc_now_s seconds */
    int retry_ms;
    unsigned char hs[HS_MAX];    /* our greeting and READY, written first on every connection */
    size_t hs_len, hs_off;
    pyc_zmtp_dec_t *dec;
    /* output: segs[cur..nseg) are unwritten, the first of them from cur_off on; pending counts their bytes */
    pyc_buf_t obuf;
    seg_t *segs;
    size_t nseg, segcap, cur, cur_off, pending;
    bool in_msg;                 /* the caller's last send had PYC_ZMTP_MORE */
    bool discard;                /* the open message was dropped with a lost connection: drop its rest too */
    bool pong_due;               /* a PONG waits for the open message to end */
    unsigned char pong_ctx[16];
    size_t pong_len;
    unsigned char *rbuf;
    pyc_zmtp_msg_t *head, *tail; /* received messages */
    pyc_error_t failure;         /* C_FAILED: why */
};

static int
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
conn_fail(pyc_zmtp_t *self, pyc_error_t *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(self->failure.text, sizeof self->failure.text, fmt, ap);
    va_end(ap);
    if (self->fd >= 0)
        close(self->fd);
    self->fd = -1;
    self->state = C_FAILED;
    if (err != NULL)
        *err = self->failure;
    return -1;
}

static int
parse_endpoint(pyc_zmtp_t *self, const char *ep, pyc_error_t *err)
{
    memset(&self->addr, 0, sizeof self->addr);
    if (strncmp(ep, "ipc://", 6) == 0) {
        const char *path = ep + 6;
        size_t len = strlen(path);
        if (len == 0 || (path[0] == '@' && len == 1))
            return pyc_error_set(err, "the endpoint %s has no path", ep);
        if (len >= sizeof self->addr.un.sun_path)
            return pyc_error_set(err, "the path of %s is longer than %zu bytes", ep, sizeof self->addr.un.sun_path - 1);
        self->addr.un.sun_family = AF_UNIX;
        memcpy(self->addr.un.sun_path, path, len);
        if (path[0] == '@') {
            /* libzmq's abstract namespace: a NUL for the '@', and the address is exactly the name. */
            self->addr.un.sun_path[0] = '\0';
            self->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
        } else {
            self->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
        }
        return 0;
    }
    if (strncmp(ep, "tcp://", 6) != 0)
        return pyc_error_set(err, "the endpoint %s is neither tcp:// nor ipc://", ep);
    const char *hp = ep + 6, *colon = strrchr(hp, ':');
    char host[256], *end;
    if (colon == NULL || colon == hp)
        return pyc_error_set(err, "the endpoint %s has no address:port", ep);
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (colon[1] < '0' || colon[1] > '9' || *end != '\0' || errno != 0 || port == 0 || port > 65535)
        return pyc_error_set(err, "the endpoint %s has no valid port", ep);
    size_t hl = (size_t)(colon - hp);
    if (hl >= 2 && hp[0] == '[' && hp[hl - 1] == ']') {
        hp++;
        hl -= 2;
    }
    if (hl == 0 || hl >= sizeof host)
        return pyc_error_set(err, "the endpoint %s has no valid address", ep);
    memcpy(host, hp, hl);
    host[hl] = '\0';
    if (inet_pton(AF_INET, host, &self->addr.in4.sin_addr) == 1) {
        self->addr.in4.sin_family = AF_INET;
        self->addr.in4.sin_port = htons((uint16_t)port);
        self->addrlen = sizeof self->addr.in4;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &self->addr.in6.sin6_addr) == 1) {
        self->addr.in6.sin6_family = AF_INET6;
        self->addr.in6.sin6_port = htons((uint16_t)port);
        self->addrlen = sizeof self->addr.in6;
        return 0;
    }
    /* A host name, or an IPv6 address with a zone ("fe80::1%eth0"): the resolver, which only numbers skip.
     * IPv4 first, as libzmq (without ZMQ_IPV6) has it: "localhost" is the kernel's 127.0.0.1, not ::1. */
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int gr = getaddrinfo(host, colon + 1, &hints, &res);
    if (gr != 0) {
        hints.ai_family = AF_UNSPEC;
        gr = getaddrinfo(host, colon + 1, &hints, &res);
    }
    if (gr != 0 || res == NULL)
        return pyc_error_set(err, "cannot resolve %s: %s", host, gr != 0 ? gai_strerror(gr) : "no address");
    if (res->ai_addrlen > sizeof self->addr) {
        freeaddrinfo(res);
        return pyc_error_set(err, "cannot resolve %s: an address of an unknown kind", host);
    }
    memcpy(&self->addr, res->ai_addr, res->ai_addrlen);
    self->addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* Errors after which libzmq, and we, simply try again later: nobody listens yet, or the path to the peer is
 * down for now. */
static bool
retryable(int e)
{
    switch (e) {
    case ECONNREFUSED: case ENOENT: case EAGAIN: case ETIMEDOUT: case ECONNRESET: case ECONNABORTED:
    case EHOSTUNREACH: case ENETUNREACH: case ENETDOWN: case EHOSTDOWN: case EADDRNOTAVAIL: case EPIPE:
    case EINTR:
        return true;
    default:
        return false;
    }
}

/* Skips the rest of the message whose bytes were being written when the connection was lost: the peer saw
 * only its start and dropped it, so writing the rest to the next connection would be nonsense. */
static void
drop_partial(pyc_zmtp_t *self)
{
    if (self->cur >= self->nseg || (self->cur_off == 0 && self->segs[self->cur].first))
        return;
    self->pending -= self->segs[self->cur].len - self->cur_off;
    self->cur++;
    self->cur_off = 0;
    while (self->cur < self->nseg && !self->segs[self->cur].first) {
        self->pending -= self->segs[self->cur].len;
        self->cur++;
    }
    if (self->cur == self->nseg) {
        self->discard = self->in_msg;
        self->nseg = self->cur = 0;
        pyc_buf_reset(&self->obuf);
    }
}

/* The connection is gone (refused, reset, closed by the peer): close it and try again later. */
static void
lost(pyc_zmtp_t *self)
{
    if (self->fd >= 0)
        close(self->fd);
    self->fd = -1;
    if (self->state == C_UP)
        drop_partial(self);
    self->state = C_WAIT;
    self->retry_at = pyc_now_s() + self->retry_ms / 1e3;
    self->retry_ms = self->retry_ms * 2 < RETRY_MAX_MS ? self->retry_ms * 2 : RETRY_MAX_MS;
    pyc_zmtp_dec_reset(self->dec);
}

/* Moves the output position on by w written bytes. */
static void
advance(pyc_zmtp_t *self, size_t w)
{
    if (self->hs_off < self->hs_len) {
        self->hs_off += w;       /* flush writes the handshake alone */
        return;
    }
    self->pending -= w;
    while (w > 0) {
        size_t rem = self->segs[self->cur].len - self->cur_off;
        if (w >= rem) {
            w -= rem;
            self->cur++;
            self->cur_off = 0;
        } else {
            self->cur_off += w;
            w = 0;
        }
    }
    if (self->cur == self->nseg) {
        self->nseg = self->cur = 0;
        pyc_buf_reset(&self->obuf);
    }
}

/* Writes what the socket takes: our greeting and READY first (the peer's READY may come before the socket took
 * all of ours), queued messages once up.  A write error is a lost connection. */
static void
flush(pyc_zmtp_t *self)
{
    for (;;) {
        struct iovec iov[IOV_BATCH];
        size_t k = 0;
        if ((self->state == C_HANDSHAKE || self->state == C_UP) && self->hs_off < self->hs_len) {
            iov[k].iov_base = self->hs + self->hs_off;
            iov[k++].iov_len = self->hs_len - self->hs_off;
        } else if (self->state == C_UP) {
            for (size_t j = self->cur; j < self->nseg && k < IOV_BATCH; j++) {
                const seg_t *s = &self->segs[j];
                const unsigned char *base = s->ext != NULL ? s->ext : (const unsigned char *)self->obuf.data + s->off;
                size_t off = j == self->cur ? self->cur_off : 0;
                iov[k].iov_base = (void *)(base + off);
                iov[k++].iov_len = s->len - off;
            }
        }
        if (k == 0)
            return;
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = iov;
        mh.msg_iovlen = k;
        /* MSG_NOSIGNAL: a peer that is gone is a lost connection, not a SIGPIPE. */
        ssize_t w = sendmsg(self->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                lost(self);
            return;
        }
        advance(self, (size_t)w);
    }
}

/* The socket is connected: the handshake starts with our greeting and READY. */
static void
connected(pyc_zmtp_t *self)
{
    self->state = C_HANDSHAKE;
    self->hs_off = 0;
    pyc_zmtp_dec_reset(self->dec);
    flush(self);
}

static int
try_connect(pyc_zmtp_t *self, pyc_error_t *err)
{
    int one = 1;
    self->fd = socket(self->addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (self->fd < 0)
        return conn_fail(self, err, "cannot make a socket for %s: %s", self->endpoint, strerror(errno));
    /* As libzmq: a small message goes out now, not when Nagle's algorithm has waited for an ACK. */
    if (self->addr.sa.sa_family != AF_UNIX)
        setsockopt(self->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(self->fd, &self->addr.sa, self->addrlen) == 0) {
        connected(self);
        return 0;
    }
    int e = errno;
    if (e == EINPROGRESS || e == EINTR) {
        self->state = C_CONNECTING;
        return 0;
    }
    if (retryable(e)) {
        lost(self);
        return 0;
    }
    return conn_fail(self, err, "cannot connect to %s: %s", self->endpoint, strerror(e));
}

pyc_zmtp_t *
pyc_zmtp_new(const char *endpoint, int type, const char *identity, size_t max_msg, size_t max_frames,
             pyc_error_t *err)
{
    size_t idlen = identity != NULL ? strlen(identity) : 0;
    unsigned char greeting[PYC_ZMTP_GREETING_LEN];
    if (type < 0 || type >= N_TYPES) {
        pyc_error_set(err, "unknown socket type %d", type);
        return NULL;
    }
    if (idlen > PYC_ZMTP_MAX_IDENTITY) {
        pyc_error_set(err, "an identity of %zu bytes (at most %d)", idlen, PYC_ZMTP_MAX_IDENTITY);
        return NULL;
    }
    pyc_zmtp_t *self = calloc(1, sizeof *self);
    if (self == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        return NULL;
    }
    self->fd = -1;
    self->type = type;
    self->state = C_WAIT;
    self->retry_ms = RETRY_FIRST_MS;
    pyc_buf_init(&self->obuf, max_msg);
    if ((self->endpoint = strdup(endpoint)) == NULL || (self->rbuf = malloc(RBUF_SIZE)) == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        goto fail;
    }
    if ((self->dec = pyc_zmtp_dec_new(type, max_msg, max_frames, err)) == NULL)
        goto fail;
    if (parse_endpoint(self, endpoint, err) < 0)
        goto fail;
    pyc_zmtp_greeting(greeting);
    memcpy(self->hs, greeting, sizeof greeting);
    int r = pyc_zmtp_ready(self->hs + sizeof greeting, sizeof self->hs - sizeof greeting, type, identity, idlen);
    assert(r > 0);
    self->hs_len = sizeof greeting + (size_t)r;
    if (try_connect(self, err) < 0)
        goto fail;
    return self;
fail:
    pyc_zmtp_destroy(&self);
    return NULL;
}

void
pyc_zmtp_destroy(pyc_zmtp_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    pyc_zmtp_t *self = *self_p;
    if (self->fd >= 0)
        close(self->fd);
    while (self->head != NULL) {
        pyc_zmtp_msg_t *m = self->head;
        self->head = m->next;
        pyc_zmtp_msg_destroy(&m);
    }
    pyc_zmtp_dec_destroy(&self->dec);
    pyc_buf_free(&self->obuf);
    free(self->segs);
    free(self->rbuf);
    free(self->endpoint);
    free(self);
    *self_p = NULL;
}

/* Appends n bytes to the output: copied into obuf (and onto the last piece when that is the copy just
 * before), or borrowed.  Returns 0 or -1 when memory (or the cap) runs out. */
static int
queue(pyc_zmtp_t *self, const void *p, size_t n, bool borrow, bool first)
{
    if (n == 0)
        return 0;
    seg_t *last = self->nseg > self->cur ? &self->segs[self->nseg - 1] : NULL;
    if (!borrow && !first && last != NULL && last->ext == NULL && last->off + last->len == self->obuf.len) {
        if (pyc_buf_add(&self->obuf, p, n) < 0)
            return -1;
        last->len += n;
        self->pending += n;
        return 0;
    }
    if (self->nseg == self->segcap) {
        size_t ncap = self->segcap > 0 ? self->segcap * 2 : 16;
        seg_t *s = realloc(self->segs, ncap * sizeof *s);
        if (s == NULL)
            return -1;
        self->segs = s;
        self->segcap = ncap;
    }
    seg_t *s = &self->segs[self->nseg];
    if (borrow) {
        s->ext = p;
        s->off = 0;
    } else {
        s->ext = NULL;
        s->off = self->obuf.len;
        if (pyc_buf_add(&self->obuf, p, n) < 0)
            return -1;
    }
    s->len = n;
    s->first = first;
    self->nseg++;
    self->pending += n;
    return 0;
}

/* Queues a command or a one-frame message from our side (subscription, PONG) between the caller's
 * messages. */
static int
queue_own(pyc_zmtp_t *self, const unsigned char *body, size_t n, bool command)
{
    unsigned char hdr[9];
    size_t h = pyc_zmtp_frame_header(hdr, n, false, command);
    unsigned char frame[9 + 32];
    assert(n <= sizeof frame - h);
    memcpy(frame, hdr, h);
    memcpy(frame + h, body, n);
    return queue(self, frame, h + n, false, true);
}

static int
queue_pong(pyc_zmtp_t *self)
{
    unsigned char body[5 + 16];
    memcpy(body, "\4PONG", 5);
    memcpy(body + 5, self->pong_ctx, self->pong_len);
    self->pong_due = false;
    return queue_own(self, body, 5 + self->pong_len, true);
}

int
pyc_zmtp_send(pyc_zmtp_t *self, const pyc_frame_t *frames, size_t n, int flags, pyc_error_t *err)
{
    if (self->state == C_FAILED) {
        if (err != NULL)
            *err = self->failure;
        return -1;
    }
    bool more_after = (flags & PYC_ZMTP_MORE) != 0, starts = !self->in_msg;
    if (self->discard) {
        /* The start of this message went down with a lost connection: its rest goes nowhere either. */
        self->in_msg = more_after;
        self->discard = more_after;
        return 0;
    }
    size_t nseg0 = self->nseg, len0 = self->obuf.len, pending0 = self->pending;
    size_t lastlen0 = self->nseg > 0 ? self->segs[self->nseg - 1].len : 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char hdr[9];
        size_t h = pyc_zmtp_frame_header(hdr, frames[i].size, i + 1 < n || more_after, false);
        if (queue(self, hdr, h, false, starts && i == 0) < 0 ||
            queue(self, frames[i].data, frames[i].size, (flags & PYC_ZMTP_BORROW) != 0, false) < 0)
            goto nomem;
    }
    self->in_msg = more_after;
    if (!self->in_msg && self->pong_due && queue_pong(self) < 0)
        return conn_fail(self, err, "out of memory");
    if (self->state == C_UP)
        flush(self);
    return 0;
nomem:
    if (!starts)
        return conn_fail(self, err, "out of memory queueing a message");
    /* Undo this message: nothing of it was written, since nothing is written while queueing. */
    self->nseg = nseg0;
    if (nseg0 > 0)
        self->segs[nseg0 - 1].len = lastlen0;
    self->obuf.len = len0;
    self->pending = pending0;
    return pyc_error_set(err, "out of memory queueing a message");
}

int
pyc_zmtp_fd(const pyc_zmtp_t *self)
{
    return self->state == C_CONNECTING || self->state == C_HANDSHAKE || self->state == C_UP ? self->fd : -1;
}

short
pyc_zmtp_events(const pyc_zmtp_t *self)
{
    switch (self->state) {
    case C_CONNECTING:
        return POLLOUT;
    case C_HANDSHAKE:
        return (short)(POLLIN | (self->hs_off < self->hs_len ? POLLOUT : 0));
    case C_UP:
        return (short)(POLLIN | (self->pending > 0 || self->hs_off < self->hs_len ? POLLOUT : 0));
    default:
        return 0;
    }
}

int
pyc_zmtp_wake_ms(const pyc_zmtp_t *self)
{
    if (self->state != C_WAIT)
        return -1;
    double left_ms = (self->retry_at - pyc_now_s()) * 1e3;
    return left_ms > 0 ? (int)(left_ms + 0.999) : 0;
}

/* Acts on one decoded event.  Returns 0 or -1 (failed for good). */
static int
on_event(pyc_zmtp_t *self, pyc_zmtp_event_t *ev, pyc_error_t *err)
{
    static const unsigned char subscribe_all[1] = {1};
    switch (ev->type) {
    case PYC_ZMTP_EV_READY:
        self->state = C_UP;
        self->retry_ms = RETRY_FIRST_MS;
        /* ZMTP 3.0's subscription is a message whose first byte is 1 (then the topic, here none); it goes
         * before anything else the caller queued. */
        if (self->type == PYC_ZMTP_SUB) {
            if (queue_own(self, subscribe_all, 1, false) < 0)
                return conn_fail(self, err, "out of memory");
            /* It must be first: move it to the front (a SUB sends nothing else, but keep the rule general). */
            if (self->nseg - self->cur > 1) {
                seg_t s = self->segs[self->nseg - 1];
                memmove(&self->segs[self->cur + 1], &self->segs[self->cur],
                        (self->nseg - 1 - self->cur) * sizeof *self->segs);
                self->segs[self->cur] = s;
            }
        }
        flush(self);
        return 0;
    case PYC_ZMTP_EV_MSG:
        ev->msg->next = NULL;
        if (self->tail != NULL)
            self->tail->next = ev->msg;
        else
            self->head = ev->msg;
        self->tail = ev->msg;
        ev->msg = NULL;
        return 0;
    case PYC_ZMTP_EV_PING:
        memcpy(self->pong_ctx, ev->ping_ctx, ev->ping_len);
        self->pong_len = ev->ping_len;
        self->pong_due = true;
        if (!self->in_msg) {
            if (queue_pong(self) < 0)
                return conn_fail(self, err, "out of memory");
            flush(self);
        }
        return 0;
    default:
        return 0;
    }
}

/* Reads and decodes what the socket has (up to READ_BUDGET).  Returns 0 or -1 (failed for good). */
static int
read_all(pyc_zmtp_t *self, pyc_error_t *err)
{
    size_t total = 0;
    pyc_zmtp_event_t ev;
    pyc_error_t derr;
    while (total < READ_BUDGET && (self->state == C_HANDSHAKE || self->state == C_UP)) {
        void *dst = NULL;
        size_t want = pyc_zmtp_dec_body(self->dec, &dst);
        bool direct = want >= RBUF_SIZE;
        size_t ask = direct ? want : RBUF_SIZE;
        ssize_t r = read(self->fd, direct ? dst : self->rbuf, ask);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                lost(self);
            return 0;
        }
        if (r == 0) {
            lost(self);
            return 0;
        }
        total += (size_t)r;
        if (direct) {
            if (pyc_zmtp_dec_commit(self->dec, (size_t)r, &ev, &derr) < 0)
                return conn_fail(self, err, "%s", derr.text);
            if (on_event(self, &ev, err) < 0)
                return -1;
        } else {
            size_t off = 0;
            while (off < (size_t)r && (self->state == C_HANDSHAKE || self->state == C_UP)) {
                size_t used;
                if (pyc_zmtp_dec_feed(self->dec, self->rbuf + off, (size_t)r - off, &used, &ev, &derr) < 0)
                    return conn_fail(self, err, "%s", derr.text);
                off += used;
                if (on_event(self, &ev, err) < 0)
                    return -1;
            }
        }
        if ((size_t)r < ask)
            return 0;            /* drained for now; poll says when there is more */
    }
    return 0;
}

int
pyc_zmtp_handle(pyc_zmtp_t *self, short revents, pyc_error_t *err)
{
    switch (self->state) {
    case C_FAILED:
        if (err != NULL)
            *err = self->failure;
        return -1;
    case C_WAIT:
        if (pyc_now_s() >= self->retry_at)
            return try_connect(self, err);
        return 0;
    case C_CONNECTING: {
        if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
            return 0;
        int e = 0;
        socklen_t len = sizeof e;
        if (getsockopt(self->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
            e = errno;
        if (e == 0) {
            connected(self);
            return 0;
        }
        if (retryable(e)) {
            lost(self);
            return 0;
        }
        return conn_fail(self, err, "cannot connect to %s: %s", self->endpoint, strerror(e));
    }
    default:
        if (revents & POLLOUT)
            flush(self);
        if ((revents & (POLLIN | POLLERR | POLLHUP)) && (self->state == C_HANDSHAKE || self->state == C_UP))
            return read_all(self, err);
        return 0;
    }
}

bool
pyc_zmtp_has_msg(const pyc_zmtp_t *self)
{
    return self->head != NULL;
}

pyc_zmtp_msg_t *
pyc_zmtp_recv(pyc_zmtp_t *self)
{
    pyc_zmtp_msg_t *m = self->head;
    if (m != NULL) {
        self->head = m->next;
        if (self->head == NULL)
            self->tail = NULL;
        m->next = NULL;
    }
    return m;
}

size_t
pyc_zmtp_pending(const pyc_zmtp_t *self)
{
    return self->pending;
}

bool
pyc_zmtp_is_up(const pyc_zmtp_t *self)
{
    return self->state == C_UP;
}
