/*
 * fuzz_wire.c -- libFuzzer target for pyc_wire_decode, the first code to see bytes from the network.
 *
 * Framing of an input: the bytes are split into frames at every '\n'; a '\n' at the very end closes the last
 * frame instead of opening an empty one, so a corpus file is a text file with one frame per line:
 *     <IDS|MSG>
 *     <hex signature>
 *     {"msg_id":...}        header
 *     {}                    parent_header
 *     {}                    metadata
 *     {...}                 content
 * Frames cannot contain '\n', which costs nothing: the dicts are compact JSON and buffers are opaque here.
 * At most PYC_WIRE_MAX_FRAMES + 1 frames are made (the last takes the rest), enough to reach the limit check.
 *
 * Each input is decoded three ways:
 *   1) with the hmac-sha256 signer for FUZZ_KEY, as the kernel does.  Random mutations never forge a
 *      signature, so this covers the layout and signature checks; the corpus holds one correctly signed
 *      message, accepted the first time and refused as a replay after.
 *   2) with auth NULL, which lets every input through to the JSON parser and the header checks.
 *   3) with the signer again after this harness has re-signed the four dicts, which drives verification to
 *      success and fills the replay window (kept small, so eviction runs all the time).  Here the
 *      signature must never be the reason for a refusal; the harness aborts if it is.
 * A decoded message is checked for consistency with the frames, given an owner whose release is counted,
 * and destroyed; the harness aborts unless the owner was released exactly once.
 *
 * The signed seed was made with /usr/bin/python3:
 *     hmac.new(b"pyc-fuzz-key", header + parent + metadata + content, hashlib.sha256).hexdigest()
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

#define FUZZ_KEY "pyc-fuzz-key"
#define FUZZ_REPLAY_WINDOW 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pyc_frame_t frames[PYC_WIRE_MAX_FRAMES + 1];
static pyc_auth_t *auth;         /* made on the first input and kept for the life of the process */

static void
count_release(void *owner)
{
    (*(int *)owner)++;
}

/* Splits data into frames as described above; returns the number of frames. */
static size_t
split(const uint8_t *data, size_t size)
{
    size_t n = 0, start = 0;
    if (size == 0)
        return 0;
    for (size_t i = 0; i < size && n < PYC_WIRE_MAX_FRAMES; i++) {
        if (data[i] == '\n') {
            frames[n++] = (pyc_frame_t){ data + start, i - start };
            start = i + 1;
        }
    }
    if (start < size)
        frames[n++] = (pyc_frame_t){ data + start, size - start };
    return n;
}

/* Checks a decoded message against the frames it came from, then releases it through its owner. */
static void
check_and_destroy(pyc_msg_t *msg, size_t n)
{
    if (msg->msg_id == NULL || msg->msg_type == NULL || msg->session == NULL || msg->msg_type[0] == '\0')
        abort();
    if (!json_is_object(msg->header) || !json_is_object(msg->parent_header) ||
        !json_is_object(msg->metadata) || !json_is_object(msg->content))
        abort();
    if (msg->n_idents + 6 + msg->n_buffers != n)
        abort();
    for (size_t i = 0; i < msg->n_idents; i++)
        if (msg->idents[i].data != frames[i].data || msg->idents[i].size != frames[i].size)
            abort();
    for (size_t i = 0; i < msg->n_buffers; i++) {
        const pyc_frame_t *b = &msg->buffers[i], *f = &frames[msg->n_idents + 6 + i];
        if (b->data != f->data || b->size != f->size)
            abort();
    }
    int released = 0;
    pyc_msg_set_owner(msg, &released, count_release);
    pyc_msg_destroy(&msg);
    if (msg != NULL || released != 1)
        abort();
}

/* Index of the first delimiter frame, or n. */
static size_t
find_delim(size_t n)
{
    for (size_t d = 0; d < n; d++)
        if (frames[d].size == PYC_WIRE_DELIM_LEN && memcmp(frames[d].data, PYC_WIRE_DELIM, PYC_WIRE_DELIM_LEN) == 0)
            return d;
    return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pyc_msg_t *msg = NULL;
    pyc_error_t err;

    if (auth == NULL) {
        auth = pyc_auth_new("hmac-sha256", FUZZ_KEY, strlen(FUZZ_KEY), FUZZ_REPLAY_WINDOW, NULL);
        if (auth == NULL)
            abort();
    }
    size_t n = split(data, size);

    /* 1) As the kernel decodes. */
    if (pyc_wire_decode(frames, n, auth, &msg, &err) == 0)
        check_and_destroy(msg, n);
    else if (msg != NULL)
        abort();

    /* 2) Without a signature check. */
    if (pyc_wire_decode(frames, n, NULL, &msg, &err) == 0)
        check_and_destroy(msg, n);
    else if (msg != NULL)
        abort();

    /* 3) Re-signed by the harness. */
    size_t d = find_delim(n);
    if (d < n && n - d >= 6) {
        char sig[PYC_AUTH_MAX_HEX + 1];
        if (pyc_wire_sign(auth, &frames[d + 2], sig) != 0)
            abort();
        frames[d + 1] = (pyc_frame_t){ sig, strlen(sig) };
        err.text[0] = '\0';
        if (pyc_wire_decode(frames, n, auth, &msg, &err) == 0)
            check_and_destroy(msg, n);
        else if (strncmp(err.text, "signature ", 10) == 0 || strcmp(err.text, "invalid signature") == 0 ||
                 strcmp(err.text, "could not compute HMAC") == 0)
            abort();             /* by prefix: a JSON refusal quotes the input, which may say anything */
    }
    return 0;
}
