/*
 * connfile.c -- reading and writing Jupyter connection files.
 *
 * Parsing is strict about types (a port that is a string is an error, not a zero) because a kernel that
 * binds the wrong port hangs its client without a word; it is lenient about unknown members.  CURVE keys are
 * checked here, once, for both programs: a key that is not 40 characters of Z85 is an error that names the
 * member, since libzmq would otherwise refuse it later with a bare EINVAL.
 */
#include "connfile.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "paths.h"

#define MAX_FILE (1 << 20)

/* The most keys an allow-list holds (a file of 64 K keys is 2.6 MB of text). */
#define MAX_ALLOWED 65536

const char *const pyc_connfile_port_names[PYC_CHAN_COUNT] = {
    "shell_port", "iopub_port", "stdin_port", "control_port", "hb_port",
};

/* Copies the string member `name` into dst (cap bytes).  A missing member leaves dflt. */
static int
get_string(json_t *root, const char *name, char *dst, size_t cap, const char *dflt, pyc_error_t *err)
{
    json_t *v = json_object_get(root, name);
    const char *s;
    if (v == NULL) {
        if (dflt == NULL)
            return pyc_error_set(err, "connection file lacks \"%s\"", name);
        s = dflt;
    } else if (!json_is_string(v)) {
        return pyc_error_set(err, "connection file: \"%s\" is not a string", name);
    } else {
        s = json_string_value(v);
    }
    if (strlen(s) >= cap)
        return pyc_error_set(err, "connection file: \"%s\" is longer than %zu characters", name, cap - 1);
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

/* The CURVE members: the key pair (both or neither) and the allow-list.  Returns 0 or -1 with err. */
static int
parse_curve(json_t *root, pyc_connfile_t *out, pyc_error_t *err)
{
    static const char *const names[2] = {"curve_publickey", "curve_secretkey"};
    char *dst[2] = {out->curve_publickey, out->curve_secretkey};
    unsigned char bin[PYC_CURVE_KEY_BYTES];
    int present = 0;
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(root, names[i]);
        if (v == NULL || json_is_null(v))
            continue;
        if (!json_is_string(v))
            return pyc_error_code(err, PYC_EINVAL, "connection file: \"%s\" is not a string", names[i]);
        if (pyc_z85_key(json_string_value(v), json_string_length(v), bin, names[i], err) < 0)
            return -1;
        memcpy(dst[i], json_string_value(v), PYC_CURVE_KEY_TEXT + 1);
        present++;
    }
    if (present == 1)
        return pyc_error_code(err, PYC_EINVAL, "connection file: \"%s\" without \"%s\" (CURVE needs both keys)",
                              out->curve_publickey[0] ? names[0] : names[1],
                              out->curve_publickey[0] ? names[1] : names[0]);
    json_t *list = json_object_get(root, "curve_allowed_clients");
    if (list == NULL || json_is_null(list))
        return 0;
    if (!json_is_array(list))
        return pyc_error_code(err, PYC_EINVAL, "connection file: \"curve_allowed_clients\" is not a list");
    if (present == 0)
        return pyc_error_code(err, PYC_EINVAL, "connection file: \"curve_allowed_clients\" without the kernel's "
                              "CURVE keys (curve_publickey, curve_secretkey)");
    out->curve_restricted = true;
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
        char what[64];
        snprintf(what, sizeof what, "curve_allowed_clients[%zu]", i);
        if (!json_is_string(v))
            return pyc_error_code(err, PYC_EINVAL, "connection file: %s is not a string", what);
        if (pyc_z85_key(json_string_value(v), json_string_length(v), bin, what, err) < 0 ||
            pyc_connfile_allow(out, bin, err) < 0)
            return -1;
    }
    return 0;
}

/* A port given as a number or as a string of digits (xeus writes registration_port as a string). */
static int
port_value(json_t *v, bool allow_zero)
{
    long p = -1;
    if (json_is_integer(v)) {
        p = (long)json_integer_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        p = s[0] >= '0' && s[0] <= '9' ? strtol(s, &end, 10) : -1;
        if (p >= 0 && *end != '\0')
            p = -1;
    }
    return p > 65535 || p < (allow_zero ? 0 : 1) ? -1 : (int)p;
}

/* "port_range": [low, high] (optional).  Returns 0, or -1 with err. */
static int
parse_port_range(json_t *root, pyc_connfile_t *out, pyc_error_t *err)
{
    json_t *r = json_object_get(root, "port_range");
    if (r == NULL)
        return 0;
    int lo = json_array_size(r) == 2 ? port_value(json_array_get(r, 0), false) : -1;
    int hi = json_array_size(r) == 2 ? port_value(json_array_get(r, 1), false) : -1;
    if (lo < 0 || hi < lo)
        return pyc_error_set(err, "connection file: \"port_range\" is not [low, high] with 1 <= low <= high <= 65535");
    out->port_min = lo;
    out->port_max = hi;
    return 0;
}

/* A registration file (registration_port present): its members, and "ip" defaulting to registration_ip.
 * Returns 1 for a registration file, 0 for a connection file, -1 with err. */
static int
parse_registration(json_t *root, pyc_connfile_t *out, pyc_error_t *err)
{
    json_t *port = json_object_get(root, "registration_port");
    if (port == NULL)
        return 0;
    out->registration = true;
    out->registration_port = port_value(port, false);
    if (out->registration_port < 0)
        return pyc_error_set(err, "registration file: \"registration_port\" is not a port (1-65535, a number or "
                                  "a string of digits)");
    if (strcmp(out->transport, "tcp") != 0)
        return pyc_error_set(err, "registration file: transport \"%s\": the handshake is over tcp", out->transport);
    json_t *id = json_object_get(root, "kernel_id");
    if (!json_is_string(id) || json_string_length(id) == 0 || json_string_length(id) >= sizeof out->kernel_id)
        return pyc_error_set(err, "registration file: \"kernel_id\" is missing, empty or too long");
    snprintf(out->kernel_id, sizeof out->kernel_id, "%s", json_string_value(id));
    if (get_string(root, "registration_ip", out->registration_ip, sizeof out->registration_ip, "127.0.0.1",
                   err) < 0)
        return -1;
    if (out->registration_ip[0] == '\0')
        return pyc_error_set(err, "registration file: \"registration_ip\" is empty");
    if (json_object_get(root, "ip") == NULL)
        snprintf(out->ip, sizeof out->ip, "%s", out->registration_ip);
    return 1;
}

int
pyc_connfile_set_port_range(pyc_connfile_t *cf, const char *text, pyc_error_t *err)
{
    char *end;
    long lo = strtol(text, &end, 10), hi = -1;
    if (end != text && *end == '-')
        hi = strtol(end + 1, &end, 10);
    if (*end != '\0' || lo < 1 || hi < lo || hi > 65535)
        return pyc_error_set(err, "port range \"%s\" is not LOW-HIGH with 1 <= LOW <= HIGH <= 65535", text);
    cf->port_min = (int)lo;
    cf->port_max = (int)hi;
    return 0;
}

int
pyc_connfile_parse(const char *text, size_t len, pyc_connfile_t *out, pyc_error_t *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    int rc = -1;

    memset(out, 0, sizeof *out);
    if (root == NULL)
        return pyc_error_set(err, "connection file is not valid JSON: %s (line %d)", jerr.text, jerr.line);
    if (!json_is_object(root)) {
        pyc_error_set(err, "connection file is not a JSON object");
        goto out;
    }
    if (get_string(root, "transport", out->transport, sizeof out->transport, "tcp", err) < 0 ||
        get_string(root, "ip", out->ip, sizeof out->ip, "127.0.0.1", err) < 0 ||
        get_string(root, "signature_scheme", out->signature_scheme, sizeof out->signature_scheme,
                   "hmac-sha256", err) < 0 ||
        get_string(root, "kernel_name", out->kernel_name, sizeof out->kernel_name, "", err) < 0)
        goto out;
    if (strcmp(out->transport, "tcp") != 0 && strcmp(out->transport, "ipc") != 0) {
        pyc_error_set(err, "connection file: unknown transport \"%s\" (expected tcp or ipc)", out->transport);
        goto out;
    }
    if (out->ip[0] == '\0') {
        pyc_error_set(err, "connection file: \"ip\" is empty");
        goto out;
    }
    if (parse_port_range(root, out, err) < 0)
        goto out;
    int reg = parse_registration(root, out, err);
    if (reg < 0)
        goto out;
    for (int c = 0; reg == 0 && c < PYC_CHAN_COUNT; c++) {
        json_t *v = json_object_get(root, pyc_connfile_port_names[c]);
        if (v == NULL) {
            pyc_error_set(err, "connection file lacks \"%s\"", pyc_connfile_port_names[c]);
            goto out;
        }
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 65535) {
            pyc_error_set(err, "connection file: \"%s\" is not a port number (0-65535)",
                          pyc_connfile_port_names[c]);
            goto out;
        }
        out->ports[c] = (int)json_integer_value(v);
    }
    json_t *key = json_object_get(root, "key");
    if (key != NULL && !json_is_string(key)) {
        pyc_error_set(err, "connection file: \"key\" is not a string");
        goto out;
    }
    const char *k = key != NULL ? json_string_value(key) : "";
    out->keylen = key != NULL ? json_string_length(key) : 0;
    out->key = malloc(out->keylen + 1);
    if (out->key == NULL) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
        goto out;
    }
    memcpy(out->key, k, out->keylen);
    out->key[out->keylen] = '\0';
    if (parse_curve(root, out, err) < 0)
        goto out;
    rc = 0;
out:
    json_decref(root);
    if (rc < 0)
        pyc_connfile_clear(out);
    return rc;
}

int
pyc_connfile_load(const char *path, pyc_connfile_t *out, pyc_error_t *err)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return pyc_error_set(err, "cannot open connection file %s: %s", path, strerror(errno));
    char *text = malloc(MAX_FILE + 1);
    if (text == NULL) {
        fclose(f);
        return pyc_error_code(err, PYC_ENOMEM, "out of memory");
    }
    size_t n = fread(text, 1, MAX_FILE + 1, f);
    int rd_err = ferror(f);
    fclose(f);
    int rc;
    if (rd_err)
        rc = pyc_error_set(err, "cannot read connection file %s", path);
    else if (n > MAX_FILE)
        rc = pyc_error_set(err, "connection file %s is larger than 1 MiB", path);
    else
        rc = pyc_connfile_parse(text, n, out, err);
    free(text);
    return rc;
}

json_t *
pyc_connfile_to_json(const pyc_connfile_t *cf)
{
    json_t *root = json_object();
    if (root == NULL)
        return NULL;
    /* json_string returns NULL for text that is not UTF-8, and json_object_set_new then fails and drops the
     * member; a file written without its "key" would read back as an unsigned session, so any failure here
     * is an error. */
    int bad = json_object_set_new(root, "transport", json_string(cf->transport));
    bad |= json_object_set_new(root, "ip", json_string(cf->ip));
    for (int c = 0; c < PYC_CHAN_COUNT; c++)
        bad |= json_object_set_new(root, pyc_connfile_port_names[c], json_integer(cf->ports[c]));
    bad |= json_object_set_new(root, "key", json_stringn(cf->key != NULL ? cf->key : "", cf->keylen));
    bad |= json_object_set_new(root, "signature_scheme", json_string(cf->signature_scheme));
    bad |= json_object_set_new(root, "kernel_name", json_string(cf->kernel_name));
    if (pyc_connfile_curve(cf)) {
        bad |= json_object_set_new(root, "curve_publickey", json_string(cf->curve_publickey));
        bad |= json_object_set_new(root, "curve_secretkey", json_string(cf->curve_secretkey));
    }
    if (pyc_connfile_curve(cf) && cf->curve_restricted) {
        json_t *list = json_array();
        bad |= json_object_set_new(root, "curve_allowed_clients", list);
        for (size_t i = 0; list != NULL && i < cf->curve_nallowed; i++) {
            char z[PYC_CURVE_KEY_TEXT + 1];
            pyc_z85_encode(cf->curve_allowed[i], PYC_CURVE_KEY_BYTES, z);
            bad |= json_array_append_new(list, json_string(z));
        }
    }
    if (bad != 0) {
        json_decref(root);
        return NULL;
    }
    return root;
}

int
pyc_connfile_write_json(const char *path, json_t *root, pyc_error_t *err)
{
    char tmp[4096];
    int rc = -1, fd = -1;
    char *text = NULL;

    tmp[0] = '\0';
    text = root != NULL ? json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    if (text == NULL) {
        pyc_error_set(err, "cannot encode connection file (is the key valid UTF-8?)");
        goto out;
    }
    /* A fresh file of a random name, created exclusively: a file or symbolic link planted beside path can
     * never receive the key. */
    fd = pyc_open_tmp(path, ".tmp", 0600, tmp, sizeof tmp);
    if (fd < 0) {
        if (errno == ENAMETOOLONG)
            pyc_error_set(err, "connection file path is too long");
        else
            pyc_error_set(err, "cannot create a temporary file beside %s: %s", path, strerror(errno));
        goto out;
    }
    if (pyc_write_all(fd, text, strlen(text)) < 0 || pyc_write_all(fd, "\n", 1) < 0) {
        pyc_error_set(err, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    int c = close(fd);
    fd = -1;
    if (c < 0) {
        pyc_error_set(err, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    if (rename(tmp, path) < 0) {
        pyc_error_set(err, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    if (rc < 0 && tmp[0] != '\0')
        unlink(tmp);
    free(text);
    return rc;
}

int
pyc_connfile_write(const char *path, const pyc_connfile_t *cf, pyc_error_t *err)
{
    json_t *root = pyc_connfile_to_json(cf);
    int rc = pyc_connfile_write_json(path, root, err);
    json_decref(root);
    return rc;
}

int
pyc_connfile_endpoint(const pyc_connfile_t *cf, int chan, char *out, size_t cap)
{
    int n;
    if (strcmp(cf->transport, "ipc") == 0)
        n = snprintf(out, cap, "ipc://%s-%d", cf->ip, cf->ports[chan]);
    else if (cf->ports[chan] == 0)
        n = snprintf(out, cap, "tcp://%s:*", cf->ip);
    else
        n = snprintf(out, cap, "tcp://%s:%d", cf->ip, cf->ports[chan]);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

void
pyc_connfile_clear(pyc_connfile_t *cf)
{
    free(cf->key);
    cf->key = NULL;
    cf->keylen = 0;
    free(cf->curve_allowed);
    cf->curve_allowed = NULL;
    cf->curve_nallowed = 0;
}

int
pyc_connfile_allow(pyc_connfile_t *cf, const unsigned char key[PYC_CURVE_KEY_BYTES], pyc_error_t *err)
{
    cf->curve_restricted = true;
    for (size_t i = 0; i < cf->curve_nallowed; i++) {
        if (memcmp(cf->curve_allowed[i], key, PYC_CURVE_KEY_BYTES) == 0)
            return 0;
    }
    if (cf->curve_nallowed >= MAX_ALLOWED)
        return pyc_error_code(err, PYC_EINVAL, "more than %d allowed CURVE clients", MAX_ALLOWED);
    /* Grows by powers of two: n is one when n & (n - 1) is 0. */
    size_t n = cf->curve_nallowed;
    if ((n & (n - 1)) == 0) {
        void *bigger = realloc(cf->curve_allowed, (n > 0 ? 2 * n : 1) * PYC_CURVE_KEY_BYTES);
        if (bigger == NULL)
            return pyc_error_code(err, PYC_ENOMEM, "out of memory");
        cf->curve_allowed = bigger;
    }
    memcpy(cf->curve_allowed[n], key, PYC_CURVE_KEY_BYTES);
    cf->curve_nallowed = n + 1;
    return 0;
}

int
pyc_connfile_load_allowed(pyc_connfile_t *cf, const char *path, pyc_error_t *err)
{
    struct stat st;
    int count = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return pyc_error_code(err, errno == ENOENT ? PYC_ENOENT : PYC_EIO, "cannot open the allow-list %s: %s",
                              path, strerror(errno));
    if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return pyc_error_code(err, PYC_EINVAL, "the allow-list %s is not a regular file", path);
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        fclose(f);
        return pyc_error_code(err, PYC_EINVAL, "the allow-list %s may be written by group or others "
                              "(chmod go-w it): refused", path);
    }
    cf->curve_restricted = true;
    char line[1024];
    unsigned char bin[PYC_CURVE_KEY_BYTES];
    for (int lineno = 1; fgets(line, sizeof line, f) != NULL; lineno++) {
        /* The first word is the key; what follows it is a note.  '#' is a Z85 character, but no key starts
         * with one (a group of five that starts with '#' is above 2^32), so such a line is a comment. */
        char *p = line + strspn(line, " \t\r\n");
        size_t len = strcspn(p, " \t\r\n");
        if (len == 0 || p[0] == '#')
            continue;
        char what[64];
        snprintf(what, sizeof what, "line %d", lineno);
        pyc_error_t e;
        if (pyc_z85_key(p, len, bin, what, &e) < 0 || pyc_connfile_allow(cf, bin, &e) < 0) {
            fclose(f);
            return pyc_error_code(err, PYC_EINVAL, "allow-list %s: %s", path, e.text);
        }
        count++;
    }
    fclose(f);
    return count;
}

int
pyc_connfile_set_key(pyc_connfile_t *cf, const char *key, size_t len, pyc_error_t *err)
{
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return pyc_error_code(err, PYC_ENOMEM, "out of memory");
    memcpy(copy, key, len);
    copy[len] = '\0';
    free(cf->key);
    cf->key = copy;
    cf->keylen = len;
    return 0;
}

int
pyc_connfile_copy(pyc_connfile_t *dst, const pyc_connfile_t *src, pyc_error_t *err)
{
    *dst = *src;
    dst->key = NULL;
    dst->keylen = 0;
    dst->curve_allowed = NULL;
    dst->curve_nallowed = 0;
    for (size_t i = 0; i < src->curve_nallowed; i++) {
        if (pyc_connfile_allow(dst, src->curve_allowed[i], err) < 0) {
            pyc_connfile_clear(dst);
            return -1;
        }
    }
    if (src->key != NULL && pyc_connfile_set_key(dst, src->key, src->keylen, err) < 0) {
        pyc_connfile_clear(dst);
        return -1;
    }
    return 0;
}
