/*
 * zmtp_codec.c -- the pure half of zmtp.h: our greeting, READY and frame headers (the encoder), and the
 * decoder of a peer's bytes (pyc_zmtp_dec_*).  No sockets and no clock: bytes in, in any chunking, events
 * out, so that tests/unit/client/test_zmtp_codec.c and tests/fuzz/fuzz_zmtp.c drive it directly; zmtp.c
 * feeds it what its socket reads.
 *
 * Every byte is untrusted.  A frame's storage is allocated when its header arrives, after the caps are
 * checked: a peer can make us allocate no more than the caps (max_msg bytes and max_frames frames per
 * message, PYC_ZMTP_MAX_COMMAND = 64 KB per command), and only as much as it declares.  A peer that breaks
 * the protocol is refused at its first wrong byte (a greeting is checked as it arrives, not after all 64),
 * with one sentence that quotes what it sent as printable ASCII; tests/fuzz/corpus/zmtp/NAME.err pins those
 * sentences for the corpus inputs that must be refused.
 *
 * With CURVE (pyc_zmtp_dec_set_curve), the decoder expects the mechanism "CURVE", takes WELCOME (an event: the
 * connection answers with INITIATE) and an encrypted READY, and then reads every frame as a MESSAGE whose
 * body is opened in its own storage (zmtp_curve.c): the caps apply to what is inside.
 */
#include "zmtp.h"
#include "zmtp_curve.h"

#include <assert.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define FLAG_MORE 0x01
#define FLAG_LONG 0x02
#define FLAG_COMMAND 0x04

static const char *const type_names[PYC_ZMTP_NTYPES] = {"DEALER", "SUB", "REQ"};

/* The peers each of our types may talk to (as libzmq's mechanism_t::check_socket_type has it). */
static const char *const peers_of[PYC_ZMTP_NTYPES][4] = {
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
pyc_zmtp_greeting(unsigned char out[PYC_ZMTP_GREETING_LEN], bool curve)
{
    memset(out, 0, PYC_ZMTP_GREETING_LEN);
    out[0] = 0xff;
    out[9] = 0x7f;
    out[10] = 3;
    out[11] = 0;
    memcpy(out + 12, curve ? "CURVE" : "NULL", curve ? 5 : 4);
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
pyc_zmtp_properties(unsigned char *out, int type, const void *identity, size_t idlen)
{
    if (type < 0 || type >= PYC_ZMTP_NTYPES || idlen > PYC_ZMTP_MAX_IDENTITY)
        return -1;
    size_t n = put_property(out, "Socket-Type", type_names[type], strlen(type_names[type]));
    if (identity != NULL && idlen > 0)
        n += put_property(out + n, "Identity", identity, idlen);
    return (int)n;
}

int
pyc_zmtp_ready(unsigned char *out, size_t cap, int type, const void *identity, size_t idlen)
{
    unsigned char body[6 + PYC_ZMTP_MAX_PROPERTIES], hdr[9];
    int p = pyc_zmtp_properties(body + 6, type, identity, idlen);
    if (p < 0)
        return -1;
    memcpy(body, "\5READY", 6);
    size_t n = 6 + (size_t)p;
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
    pyc_zmtp_curve_t *curve;     /* borrowed: CURVE's keys and nonces, or NULL for NULL security */
    bool welcomed;               /* CURVE: the peer's WELCOME was accepted */
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
    if (type < 0 || type >= PYC_ZMTP_NTYPES) {
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
    self->welcomed = false;
    self->failure.text[0] = '\0';
}

void
pyc_zmtp_dec_set_curve(pyc_zmtp_dec_t *self, pyc_zmtp_curve_t *curve)
{
    self->curve = curve;
}

/* Checks what has come of the greeting so far, so that a peer that is not ZMTP 3 is refused at its first
 * wrong byte rather than after 64. */
static int
check_greeting(pyc_zmtp_dec_t *self, pyc_error_t *err)
{
    static const unsigned char null_mech[20] = "NULL", curve_mech[20] = "CURVE";
    const unsigned char *mech = self->curve != NULL ? curve_mech : null_mech;
    const unsigned char *g = self->greeting;
    char shown[24];
    if (g[0] != 0xff)
        return dec_fail(self, err, "the peer does not speak ZMTP (its greeting starts with 0x%02x, not 0xff)", g[0]);
    if (self->have >= 10 && !(g[9] & 1))
        return dec_fail(self, err, "the peer speaks ZMTP 1.0; only 3.x is supported");
    if (self->have >= 11 && g[10] < 3)
        return dec_fail(self, err, "the peer speaks ZMTP %d.x; only 3.x is supported", g[10]);
    if (self->have >= 32 && memcmp(g + 12, mech, sizeof null_mech) != 0)
        return dec_fail(self, err, "the peer asks for the security mechanism \"%s\"; the connection file says %s",
                        printable(shown, sizeof shown, g + 12, strnlen((const char *)g + 12, 20)),
                        self->curve != NULL ? "CURVE" : "NULL (no CURVE keys)");
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

/* CURVE's handshake commands, c[0..len) (name included, checked by the caller): WELCOME, then READY (opened
 * in place).  Returns PYC_ZMTP_EV_WELCOME, PYC_ZMTP_EV_READY or -1. */
static int
on_curve_handshake(pyc_zmtp_dec_t *self, unsigned char *c, size_t len, pyc_zmtp_event_t *ev, pyc_error_t *err)
{
    char shown[24];
    pyc_error_t e;
    const char *want = self->welcomed ? "READY" : "WELCOME";
    if (!is_name(c + 1, c[0], want))
        return dec_fail(self, err, "the peer sent %s where CURVE's %s belongs", printable(shown, sizeof shown,
                        c + 1, c[0]), want);
    if (!self->welcomed) {
        if (pyc_zmtp_curve_welcome(self->curve, c, len, &e) < 0)
            return dec_fail(self, err, "%s", e.text);
        self->welcomed = true;
        ev->type = PYC_ZMTP_EV_WELCOME;
        return PYC_ZMTP_EV_WELCOME;
    }
    const unsigned char *props;
    size_t plen;
    if (pyc_zmtp_curve_ready(self->curve, c, len, &props, &plen, &e) < 0)
        return dec_fail(self, err, "%s", e.text);
    return on_ready(self, props, plen, ev, err);
}

/* A whole command, c[0..len) (len >= 1).  Returns an event type (0 for a command that is ignored) or -1. */
static int
on_command(pyc_zmtp_dec_t *self, unsigned char *c, size_t len, pyc_zmtp_event_t *ev, pyc_error_t *err)
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
    if (!self->ready && self->curve != NULL)
        return on_curve_handshake(self, c, len, ev, err);
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
    if (self->cmd != NULL) {
        unsigned char *c = self->cmd;
        self->cmd = NULL;
        int r = on_command(self, c, (size_t)self->size, ev, err);
        free(c);
        return r;
    }
    bool more = (self->flags & FLAG_MORE) != 0;
    if (self->curve != NULL) {
        /* A MESSAGE: opened where it was read; its flags are the ones inside. */
        pyc_zmtp_msg_t *m = self->msg;
        pyc_frame_t *f = &m->frames[m->n - 1];
        int flags;
        size_t n;
        pyc_error_t e;
        if (pyc_zmtp_curve_open(self->curve, (unsigned char *)f->data, f->size, &flags, &n, &e) < 0)
            return dec_fail(self, err, "%s", e.text);
        m->bytes -= f->size - n;
        f->size = n;
        more = (flags & PYC_CURVE_MORE) != 0;
        if (flags & PYC_CURVE_COMMAND) {
            /* A command inside (PING): out of the message, and handled as one. */
            unsigned char *c = (unsigned char *)f->data;
            m->n--;
            m->bytes -= n;
            if (m->n == 0)
                pyc_zmtp_msg_destroy(&self->msg);
            if (n == 0) {
                free(c);
                return dec_fail(self, err, "the peer sent an empty command");
            }
            int r = on_command(self, c, n, ev, err);
            free(c);
            return r;
        }
    }
    if (more)
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
    /* What a CURVE MESSAGE holds is its size less the overhead: the caps are about that. */
    uint64_t inner = size;
    bool sealed = self->curve != NULL && self->ready;
    self->have = 0;
    if (sealed) {
        if (size < PYC_CURVE_MESSAGE_OVERHEAD)
            return dec_fail(self, err, "the peer sent a frame of %llu bytes, too short for a CurveZMQ MESSAGE",
                            (unsigned long long)size);
        inner = size - PYC_CURVE_MESSAGE_OVERHEAD;
    }
    if ((self->flags & FLAG_COMMAND) && !sealed) {
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
    if (inner > (uint64_t)(self->max_msg - m->bytes))
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
    if (self->state != D_BODY || self->cmd != NULL)
        return 0;
    *dst = self->body + self->have;
    return (size_t)(self->size - self->have);
}

int
pyc_zmtp_dec_commit(pyc_zmtp_dec_t *self, size_t k, pyc_zmtp_event_t *ev, pyc_error_t *err)
{
    ev->type = PYC_ZMTP_EV_NONE;
    ev->msg = NULL;
    assert(self->state == D_BODY && self->cmd == NULL && k <= self->size - self->have);
    self->have += k;
    if (self->have < self->size)
        return 0;
    return end_frame(self, ev, err);
}
