/*
 * msg.c -- decoded messages and the holds on their storage; message ids, ISO 8601 dates and header text.
 *
 * Ids come from a per-thread xoshiro256** generator seeded with 32 bytes of getrandom(2): a kernel sends up
 * to hundreds of thousands of messages a second, and a system call per id would be a visible cost.
 */
#include "msg.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "random.h"

static _Thread_local uint64_t rng_state[4];
static _Thread_local int rng_seeded;

static uint64_t
rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t
rng_next(void)
{
    if (!rng_seeded) {
        if (pyc_random_bytes(rng_state, sizeof rng_state, NULL) < 0) {
            /* getrandom cannot fail for 32 bytes once the pool is ready.  Ids need to be unique, not secret:
             * time, pid and an address keep them apart if it ever does. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            rng_state[0] = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ULL;
            rng_state[1] = (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 32);
            rng_state[2] = (uint64_t)(uintptr_t)&rng_state;
            rng_state[3] = 0x2545F4914F6CDD1DULL;
        }
        rng_seeded = 1;
    }
    uint64_t *s = rng_state;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

void
pyc_msg_new_id(char *out)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char r[16];
    uint64_t a = rng_next(), b = rng_next();
    memcpy(r, &a, 8);
    memcpy(r + 8, &b, 8);
    r[6] = (unsigned char)((r[6] & 0x0F) | 0x40);  /* version 4 */
    r[8] = (unsigned char)((r[8] & 0x3F) | 0x80);  /* RFC 4122 variant */
    char *p = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        *p++ = hex[r[i] >> 4];
        *p++ = hex[r[i] & 15];
    }
    *p = '\0';
}

void
pyc_msg_reseed(void)
{
    rng_seeded = 0;
}

void
pyc_msg_now(char *out)
{
    /* The date and time to the second are formatted once a second per thread (strftime was 0.8% of a
     * pipelined request's CPU: five headers a request); the microseconds are written digit by digit. */
    static _Thread_local time_t cached_sec = (time_t)-1;
    static _Thread_local char cached[20];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (ts.tv_sec != cached_sec) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        if (strftime(cached, sizeof cached, "%Y-%m-%dT%H:%M:%S", &tm) != 19)
            memcpy(cached, "1970-01-01T00:00:00", 20);
        cached_sec = ts.tv_sec;
    }
    memcpy(out, cached, 19);
    out[19] = '.';
    unsigned us = (unsigned)(ts.tv_nsec / 1000) % 1000000u;
    for (int i = 25; i >= 20; i--) {
        out[i] = (char)('0' + us % 10);
        us /= 10;
    }
    out[26] = 'Z';
    out[27] = '\0';
}

int
pyc_msg_header(pyc_buf_t *out, const char *msg_type, const char *session, const char *username_json,
               char *msg_id_out)
{
    char id[PYC_MSG_ID_LEN + 1], date[PYC_MSG_DATE_LEN + 1];
    pyc_msg_new_id(id);
    pyc_msg_now(date);
    if (msg_id_out != NULL)
        memcpy(msg_id_out, id, sizeof id);
    /* Pieces appended in turn, not one formatted print: the header is built for every message sent.  The
     * room for all of them is made first, so that the header is added whole or not at all. */
    static const char p1[] = "{\"msg_id\":\"", p2[] = "\",\"msg_type\":\"", p3[] = "\",\"session\":\"",
                      p4[] = "\",\"username\":", p5[] = ",\"date\":\"",
                      p6[] = "\",\"version\":\"" PYC_PROTOCOL_VERSION "\"}";
    size_t lt = strlen(msg_type), ls = strlen(session), lu = strlen(username_json);
    if (pyc_buf_reserve(out, sizeof p1 + sizeof p2 + sizeof p3 + sizeof p4 + sizeof p5 + sizeof p6 - 6 +
                                 PYC_MSG_ID_LEN + lt + ls + lu + PYC_MSG_DATE_LEN) < 0)
        return -1;
    pyc_buf_add(out, p1, sizeof p1 - 1);
    pyc_buf_add(out, id, PYC_MSG_ID_LEN);
    pyc_buf_add(out, p2, sizeof p2 - 1);
    pyc_buf_add(out, msg_type, lt);
    pyc_buf_add(out, p3, sizeof p3 - 1);
    pyc_buf_add(out, session, ls);
    pyc_buf_add(out, p4, sizeof p4 - 1);
    pyc_buf_add(out, username_json, lu);
    pyc_buf_add(out, p5, sizeof p5 - 1);
    pyc_buf_add(out, date, PYC_MSG_DATE_LEN);
    pyc_buf_add(out, p6, sizeof p6 - 1);
    return 0;
}

/* ---- decoded messages ------------------------------------------------------------------------------- */

/* The message's owner once a hold was taken: the message counts as one reference, each hold as another.
 * With frame_free, each frame also has its own count: 1 for the message until it is destroyed, plus one for
 * each hold of that frame; the frame is freed when its count reaches 0, the owner when refs does. */
struct pyc_msg_hold {
    atomic_size_t refs;
    void *owner;
    void (*owner_free)(void *owner);
    void (*frame_free)(void *owner, size_t i);
    size_t n;                    /* frames of the message when frame_free is set, else 0 */
    atomic_size_t frame_refs[];
};

void
pyc_msg_set_owner(pyc_msg_t *msg, void *owner, void (*owner_free)(void *owner))
{
    msg->owner = owner;
    msg->owner_free = owner_free;
}

void
pyc_msg_set_frame_free(pyc_msg_t *msg, void (*frame_free)(void *owner, size_t i))
{
    msg->frame_free = frame_free;
}

/* Drops one reference to the owner: the last frees it. */
static void
owner_unref(pyc_msg_hold_t *hold)
{
    if (atomic_fetch_sub(&hold->refs, 1) == 1) {
        hold->owner_free(hold->owner);
        free(hold);
    }
}

static void
frame_unref(pyc_msg_hold_t *hold, size_t i)
{
    if (atomic_fetch_sub(&hold->frame_refs[i], 1) == 1)
        hold->frame_free(hold->owner, i);
}

static void
frames_unref(pyc_msg_hold_t *hold)
{
    for (size_t i = 0; i < hold->n; i++)
        frame_unref(hold, i);
}

void
pyc_msg_hold_release(pyc_msg_hold_t *hold)
{
    if (hold == NULL)
        return;
    frames_unref(hold);
    owner_unref(hold);
}

void
pyc_msg_hold_release_frame(pyc_msg_hold_t *hold, size_t index)
{
    if (hold == NULL)
        return;
    if (index >= hold->n) {
        pyc_msg_hold_release(hold);        /* it held every frame */
        return;
    }
    frame_unref(hold, index);
    owner_unref(hold);
}

/* owner_free of a message whose storage is held: drops the message's own references. */
static void
hold_unref(void *p)
{
    pyc_msg_hold_release(p);
}

/* The hold of msg's storage, made on the first call (the message then counts as one reference), with one
 * more reference to the owner; frame counts are the caller's to raise. */
static pyc_msg_hold_t *
hold_get(const pyc_msg_t *cmsg)
{
    /* The message is not const to its owner; the hold replaces only its owner fields, never its frames. */
    pyc_msg_t *msg = (pyc_msg_t *)cmsg;
    if (msg->owner_free == NULL)
        return NULL;
    if (msg->owner_free != hold_unref) {
        size_t n = msg->frame_free != NULL && msg->frames_copy != NULL ? msg->n_idents + 6 + msg->n_buffers : 0;
        pyc_msg_hold_t *h = malloc(sizeof *h + n * sizeof h->frame_refs[0]);
        if (h == NULL)
            return NULL;
        atomic_init(&h->refs, 1);
        h->owner = msg->owner;
        h->owner_free = msg->owner_free;
        h->frame_free = msg->frame_free;
        h->n = n;
        for (size_t i = 0; i < n; i++)
            atomic_init(&h->frame_refs[i], 1);
        msg->owner = h;
        msg->owner_free = hold_unref;
    }
    pyc_msg_hold_t *h = msg->owner;
    atomic_fetch_add(&h->refs, 1);
    return h;
}

pyc_msg_hold_t *
pyc_msg_hold(const pyc_msg_t *msg)
{
    pyc_msg_hold_t *h = hold_get(msg);
    for (size_t i = 0; h != NULL && i < h->n; i++)
        atomic_fetch_add(&h->frame_refs[i], 1);
    return h;
}

pyc_msg_hold_t *
pyc_msg_hold_frame(const pyc_msg_t *msg, const pyc_frame_t *frame, size_t *index)
{
    pyc_msg_hold_t *h = hold_get(msg);
    *index = SIZE_MAX;
    if (h == NULL)
        return NULL;
    if (h->n > 0 && frame >= msg->frames_copy && frame < msg->frames_copy + h->n) {
        *index = (size_t)(frame - msg->frames_copy);
        atomic_fetch_add(&h->frame_refs[*index], 1);
    } else {
        for (size_t i = 0; i < h->n; i++)  /* not one of its frames: a hold of every frame */
            atomic_fetch_add(&h->frame_refs[i], 1);
    }
    return h;
}

void
pyc_msg_destroy(pyc_msg_t **msg_p)
{
    if (msg_p == NULL || *msg_p == NULL)
        return;
    pyc_msg_t *msg = *msg_p;
    json_decref(msg->header);
    json_decref(msg->parent_header);
    json_decref(msg->metadata);
    json_decref(msg->content);
    if (msg->owner_free != NULL)
        msg->owner_free(msg->owner);
    free(msg->frames_copy);
    free(msg->invalid);
    free(msg);
    *msg_p = NULL;
}
