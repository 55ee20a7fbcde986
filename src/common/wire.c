/*
 * wire.c -- decoding of Jupyter wire frames into messages, and the signature of outgoing ones.
 *
 * Order of checks, cheapest and most trust-preserving first: frame count, delimiter, signature length and
 * value (auth.c), replay (auth.c), then JSON parsing of the four dicts and the header's required fields.
 */
#include "wire.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static int
is_delim(const pyc_frame_t *f)
{
    return f->size == PYC_WIRE_DELIM_LEN && memcmp(f->data, PYC_WIRE_DELIM, PYC_WIRE_DELIM_LEN) == 0;
}

/* Parses one dict frame; the result must be a JSON object. */
static json_t *
parse_dict(const pyc_frame_t *f, const char *what, pyc_error_t *err)
{
    json_error_t jerr;
    json_t *v = json_loadb(f->data, f->size, 0, &jerr);
    if (v == NULL) {
        pyc_error_set(err, "%s is not valid JSON: %s (at byte %d)", what, jerr.text, jerr.position);
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        pyc_error_set(err, "%s is not a JSON object", what);
        return NULL;
    }
    return v;
}

static const char *
header_string(json_t *header, const char *key)
{
    json_t *v = json_object_get(header, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Decodes; with lenient, a signed message whose header is good but whose parent_header, metadata or content
 * is not a JSON object is kept (with {} in their place) and marked invalid, so that the kernel can answer it
 * with an error instead of leaving its client waiting. */
static int
decode(const pyc_frame_t *frames, size_t n, pyc_auth_t *auth, bool lenient, pyc_msg_t **out, pyc_error_t *err)
{
    pyc_msg_t *msg = NULL;
    size_t d;

    *out = NULL;
    if (n > PYC_WIRE_MAX_FRAMES)
        return pyc_error_set(err, "message has %zu frames, more than the limit of %d", n, PYC_WIRE_MAX_FRAMES);
    for (d = 0; d < n && !is_delim(&frames[d]); d++)
        ;
    if (d == n)
        return pyc_error_set(err, "no <IDS|MSG> delimiter among %zu frames", n);
    if (n - d < 6)
        return pyc_error_set(err, "message has %zu frames after the delimiter, expected at least 6", n - d);

    const pyc_frame_t *dicts = &frames[d + 2];
    if (auth != NULL && pyc_auth_verify(auth, dicts, 4, frames[d + 1].data, frames[d + 1].size, err) < 0)
        return -1;

    msg = malloc(sizeof *msg);   /* not calloc, which bypasses glibc's per-thread cache (see buf.c) */
    if (msg != NULL)
        memset(msg, 0, sizeof *msg);
    pyc_frame_t *copy = malloc(n * sizeof *copy);
    if (msg == NULL || copy == NULL) {
        free(msg);
        free(copy);
        return pyc_error_code(err, PYC_ENOMEM, "out of memory");
    }
    memcpy(copy, frames, n * sizeof *copy);
    msg->frames_copy = copy;
    msg->idents = copy;
    msg->n_idents = d;
    msg->buffers = &copy[d + 6];
    msg->n_buffers = n - d - 6;

    if ((msg->header = parse_dict(&dicts[0], "header", err)) == NULL)
        goto fail;
    json_t **rest[3] = {&msg->parent_header, &msg->metadata, &msg->content};
    static const char *const rest_names[3] = {"parent_header", "metadata", "content"};
    for (int i = 0; i < 3; i++) {
        pyc_error_t perr;
        if ((*rest[i] = parse_dict(&dicts[1 + i], rest_names[i], &perr)) != NULL)
            continue;
        if (!lenient) {
            if (err != NULL)
                *err = perr;
            goto fail;
        }
        if (msg->invalid == NULL && (msg->invalid = strdup(perr.text)) == NULL) {
            pyc_error_code(err, PYC_ENOMEM, "out of memory");
            goto fail;
        }
        *rest[i] = json_object();
    }

    msg->msg_id = header_string(msg->header, "msg_id");
    msg->msg_type = header_string(msg->header, "msg_type");
    msg->session = header_string(msg->header, "session");
    if (msg->msg_id == NULL || msg->msg_type == NULL || msg->session == NULL) {
        pyc_error_set(err, "header lacks a string '%s'",
                      msg->msg_id == NULL ? "msg_id" : msg->msg_type == NULL ? "msg_type" : "session");
        goto fail;
    }
    if (msg->msg_type[0] == '\0') {
        pyc_error_set(err, "header has an empty msg_type");
        goto fail;
    }
    *out = msg;
    return 0;

fail:
    pyc_msg_destroy(&msg);
    return -1;
}

int
pyc_wire_decode(const pyc_frame_t *frames, size_t n, pyc_auth_t *auth, pyc_msg_t **out, pyc_error_t *err)
{
    return decode(frames, n, auth, false, out, err);
}

int
pyc_wire_decode_request(const pyc_frame_t *frames, size_t n, pyc_auth_t *auth, pyc_msg_t **out,
                        pyc_error_t *err)
{
    return decode(frames, n, auth, true, out, err);
}

int
pyc_wire_sign(const pyc_auth_t *auth, const pyc_frame_t dicts[4], char *sig_out)
{
    return pyc_auth_sign(auth, dicts, 4, sig_out);
}
