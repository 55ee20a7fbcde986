/*
 * fuzz_zmtp.c -- libFuzzer target for the ZMTP decoder of zmtp_codec.c (what a peer's bytes go through).
 *
 * Input: byte 0 picks our socket type (its value mod 3), with bit 7 whether large bodies go through the direct path
 * (pyc_zmtp_dec_body/commit) as read_all does, and with bit 6 whether the decoder expects CURVE (fixed keys, no HELLO
 * sent: no box of the input opens, so what is fuzzed is the handshake's parsing up to WELCOME); byte 1 seeds the chunk
 * sizes; the rest is the peer's byte stream, greeting first.  The stream is decoded twice, in one piece and in pieces
 * of 1 to 64 bytes, and both runs must give the same events and the same refusal (a digest of each is compared).  Every
 * message must respect the caps (64 KB, 16 frames); a refused decoder must refuse again with the same sentence.  Every
 * message decoded is then encoded again with pyc_zmtp_frame_header and decoded after our own greeting and READY: the
 * round trip must give it back.  The harness aborts on any broken invariant.
 *
 * The seed corpus (corpus/zmtp) doubles as a refusal table: beside each input the decoder must refuse is a
 * NAME.err whose first line is part of the sentence it is refused with, checked by test_zmtp_codec with the
 * caps used here.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zmtp.h"
#include "zmtp_curve.h"

#define MAX_MSG 65536
#define MAX_FRAMES 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct run {
    uint64_t digest;             /* FNV-1a over the events */
    uint64_t msgs;               /* FNV-1a over the messages alone */
    int failed;
    pyc_error_t err;
    unsigned char *again;        /* the messages re-encoded, for the round trip */
    size_t again_len;
    size_t nmsgs;
} run_t;

static void
mix(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        *h = (*h ^ c[i]) * 1099511628211ull;
}

static void
append(run_t *r, const void *p, size_t n)
{
    unsigned char *b = realloc(r->again, r->again_len + n + 1);
    if (b == NULL)
        abort();
    r->again = b;
    memcpy(b + r->again_len, p, n);
    r->again_len += n;
}

static void
on_event(run_t *r, pyc_zmtp_event_t *ev, int keep)
{
    int t = ev->type;
    if (t == PYC_ZMTP_EV_NONE)
        return;                  /* how often nothing is complete depends on the chunking */
    mix(&r->digest, &t, sizeof t);
    if (ev->type == PYC_ZMTP_EV_PING) {
        if (ev->ping_len > sizeof ev->ping_ctx)
            abort();
        mix(&r->digest, ev->ping_ctx, ev->ping_len);
    }
    if (ev->type != PYC_ZMTP_EV_MSG)
        return;
    pyc_zmtp_msg_t *m = ev->msg;
    if (m == NULL || m->n == 0 || m->n > MAX_FRAMES)
        abort();
    size_t total = 0;
    for (size_t i = 0; i < m->n; i++) {
        if (m->frames[i].data == NULL)
            abort();
        total += m->frames[i].size;
        mix(&r->digest, &m->frames[i].size, sizeof m->frames[i].size);
        mix(&r->digest, m->frames[i].data, m->frames[i].size);
        mix(&r->msgs, &m->frames[i].size, sizeof m->frames[i].size);
        mix(&r->msgs, m->frames[i].data, m->frames[i].size);
        if (keep) {
            unsigned char hdr[9];
            size_t h = pyc_zmtp_frame_header(hdr, m->frames[i].size, i + 1 < m->n, false);
            append(r, hdr, h);
            append(r, m->frames[i].data, m->frames[i].size);
        }
    }
    if (total > MAX_MSG)
        abort();
    r->nmsgs++;
    pyc_zmtp_msg_destroy(&ev->msg);
}

/* Decodes p[0..n) in pieces (chunk 0: all at once), optionally reading bodies through the direct path. */
static void
decode(int type, const uint8_t *p, size_t n, unsigned seed, int direct, int keep, run_t *r, int curve)
{
    static const unsigned char key[32] = {9};
    pyc_zmtp_dec_t *dec = pyc_zmtp_dec_new(type, MAX_MSG, MAX_FRAMES, NULL);
    pyc_zmtp_curve_t *cv = curve ? pyc_zmtp_curve_new(key, key, key, NULL) : NULL;
    if (curve && cv == NULL)
        abort();
    if (dec != NULL)
        pyc_zmtp_dec_set_curve(dec, cv);
    pyc_zmtp_event_t ev;
    size_t off = 0;
    if (dec == NULL)
        abort();
    memset(r, 0, sizeof *r);
    r->digest = r->msgs = 14695981039346656037ull;
    while (off < n) {
        size_t chunk = n - off;
        if (seed != 0) {
            seed = seed * 1103515245u + 12345u;
            size_t c = 1 + (seed >> 16) % 64;
            chunk = c < chunk ? c : chunk;
        }
        void *dst;
        size_t want = direct ? pyc_zmtp_dec_body(dec, &dst) : 0;
        int rc;
        size_t used;
        if (want > 0) {
            used = chunk < want ? chunk : want;
            memcpy(dst, p + off, used);
            rc = pyc_zmtp_dec_commit(dec, used, &ev, &r->err);
        } else {
            rc = pyc_zmtp_dec_feed(dec, p + off, chunk, &used, &ev, &r->err);
            if (used > chunk || (rc == PYC_ZMTP_EV_NONE && used != chunk))
                abort();
        }
        if (rc < 0) {
            pyc_error_t again;
            size_t u = 1;
            if (r->err.text[0] == '\0' || pyc_zmtp_dec_feed(dec, p, n, &u, &ev, &again) != -1 || u != 0 ||
                strcmp(again.text, r->err.text) != 0)
                abort();
            r->failed = 1;
            mix(&r->digest, r->err.text, strlen(r->err.text));
            break;
        }
        off += used;
        on_event(r, &ev, keep);
    }
    pyc_zmtp_dec_destroy(&dec);
    pyc_zmtp_curve_destroy(&cv);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int type = data[0] % 3, direct = (data[0] & 0x80) != 0, curve = (data[0] & 0x40) != 0;
    unsigned seed = data[1] | 0x100u;
    run_t whole, pieces, trip;
    decode(type, data + 2, size - 2, 0, 0, 1, &whole, curve);
    decode(type, data + 2, size - 2, seed, direct, 0, &pieces, curve);
    if (whole.digest != pieces.digest || whole.failed != pieces.failed || whole.nmsgs != pieces.nmsgs)
        abort();
    free(pieces.again);

    /* The round trip: our greeting and a DEALER's READY (a DEALER may talk to a DEALER), then the messages. */
    if (whole.nmsgs > 0) {
        unsigned char hs[PYC_ZMTP_GREETING_LEN + 400];
        pyc_zmtp_greeting(hs, false);
        int r = pyc_zmtp_ready(hs + PYC_ZMTP_GREETING_LEN, 400, PYC_ZMTP_DEALER, "fuzz", 4);
        if (r < 0)
            abort();
        size_t hl = PYC_ZMTP_GREETING_LEN + (size_t)r;
        unsigned char *s = malloc(hl + whole.again_len);
        if (s == NULL)
            abort();
        memcpy(s, hs, hl);
        memcpy(s + hl, whole.again, whole.again_len);
        decode(PYC_ZMTP_DEALER, s, hl + whole.again_len, seed, direct, 0, &trip, 0);
        if (trip.failed || trip.nmsgs != whole.nmsgs || trip.msgs != whole.msgs)
            abort();
        free(s);
        free(trip.again);
    }
    free(whole.again);
    return 0;
}
