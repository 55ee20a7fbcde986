/*
 * session.c -- names, connection files with pyc's extra members, process identity and `cp` sides; see
 * session.h.
 *
 * The connection itself is read and turned into JSON by connfile.c; this file only adds and reads the three
 * extra members, so a session file stays a connection file any Jupyter client can use.
 */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"

#define MAX_FILE (1 << 20)

int
pyc_session_name_check(const char *name, pyc_error_t *err)
{
    size_t n = strlen(name);
    if (n == 0)
        return pyc_error_set(err, "a session name cannot be empty");
    if (n > PYC_SESSION_NAME_MAX)
        return pyc_error_set(err, "session name is %zu characters long; the limit is %d", n, PYC_SESSION_NAME_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) {
            if (c >= 0x20 && c < 0x7f)
                return pyc_error_set(err, "session name '%s' has '%c': names are made of a-z, 0-9, '_' and '-'",
                                     name, c);
            return pyc_error_set(err, "session name has byte 0x%02x: names are made of a-z, 0-9, '_' and '-'", c);
        }
    }
    return 0;
}

int
pyc_session_path(char *out, size_t cap, const char *dir, const char *name, const char *suffix)
{
    int n = snprintf(out, cap, "%s/pyc-%s%s", dir, name, suffix);
    if (n < 0 || (size_t)n >= cap) {
        if (cap > 0)
            out[0] = '\0';
        return -1;
    }
    return 0;
}

bool
pyc_session_name_of_file(const char *file_name, char *name_out)
{
    size_t n = strlen(file_name);
    if (n <= 9 || strncmp(file_name, "pyc-", 4) != 0 || strcmp(file_name + n - 5, ".json") != 0)
        return false;
    size_t len = n - 9;
    if (len > PYC_SESSION_NAME_MAX)
        return false;
    memcpy(name_out, file_name + 4, len);
    name_out[len] = '\0';
    return pyc_session_name_check(name_out, NULL) == 0;
}

/* ---- connection files ------------------------------------------------------------------------------------ */

int
pyc_session_file_parse(const char *text, size_t len, pyc_session_file_t *out, pyc_error_t *err)
{
    memset(out, 0, sizeof *out);
    if (pyc_connfile_parse(text, len, &out->cf, err) < 0)
        return -1;
    /* connfile_parse accepted the text, so it is a JSON object. */
    json_t *root = json_loadb(text, len, 0, NULL);
    if (root == NULL) {
        pyc_connfile_clear(&out->cf);
        return pyc_error_code(err, PYC_ENOMEM, "out of memory");
    }
    json_t *v = json_object_get(root, "pid");
    if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) <= 0x7fffffff)
        out->pid = (long)json_integer_value(v);
    v = json_object_get(root, "pid_start");
    if (json_is_integer(v) && json_integer_value(v) > 0)
        out->pid_start = (unsigned long long)json_integer_value(v);
    v = json_object_get(root, "created");
    if (json_is_number(v) && json_number_value(v) > 0)
        out->created = json_number_value(v);
    json_decref(root);
    return 0;
}

int
pyc_session_file_load(const char *path, pyc_session_file_t *out, pyc_error_t *err)
{
    memset(out, 0, sizeof *out);
    /* Only a regular file is read: O_NOFOLLOW refuses a symbolic link, and O_NONBLOCK keeps a FIFO planted
     * under the name from blocking the open (it is then refused by fstat). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        if (errno == ENOENT)
            return pyc_error_code(err, PYC_ENOENT, "%s does not exist", path);
        if (errno == ELOOP)
            return pyc_error_code(err, PYC_EINVAL, "%s is a symbolic link, not a session file", path);
        return pyc_error_set(err, "cannot open %s: %s", path, strerror(errno));
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return pyc_error_code(err, PYC_EINVAL, "%s is not a regular file", path);
    }
    pyc_buf_t b;
    pyc_buf_init(&b, MAX_FILE);
    char chunk[4096];
    int rc = -1;
    for (;;) {
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            pyc_error_set(err, "cannot read %s: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0)
            break;
        if (pyc_buf_add(&b, chunk, (size_t)r) < 0) {
            pyc_error_code(err, PYC_EINVAL, "%s is larger than 1 MiB", path);
            goto out;
        }
    }
    rc = pyc_session_file_parse(b.data != NULL ? b.data : "", b.len, out, err);
out:
    close(fd);
    pyc_buf_free(&b);
    return rc;
}

int
pyc_session_file_write(const char *path, const pyc_session_file_t *sf, pyc_error_t *err)
{
    json_t *root = pyc_connfile_to_json(&sf->cf);
    int rc = -1;
    if (root == NULL) {
        pyc_error_set(err, "cannot encode the connection (is the key valid UTF-8?)");
    } else if ((sf->pid > 0 && json_object_set_new(root, "pid", json_integer(sf->pid)) < 0) ||
               (sf->pid_start > 0 &&
                json_object_set_new(root, "pid_start", json_integer((json_int_t)sf->pid_start)) < 0) ||
               (sf->created > 0 && json_object_set_new(root, "created", json_real(sf->created)) < 0)) {
        pyc_error_code(err, PYC_ENOMEM, "out of memory");
    } else {
        rc = pyc_connfile_write_json(path, root, err);
    }
    json_decref(root);
    return rc;
}

void
pyc_session_file_clear(pyc_session_file_t *sf)
{
    pyc_connfile_clear(&sf->cf);
}

/* ---- cp sides -------------------------------------------------------------------------------------------- */

static bool
identifier_like(const char *s)
{
    if (*s == '\0' || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c >= 0x80))
            return false;
    }
    return true;
}

int
pyc_side_parse(const char *arg, pyc_side_t *out, pyc_error_t *err)
{
    memset(out, 0, sizeof *out);
    if (arg[0] == '\0')
        return pyc_error_set(err, "an empty argument is neither a file nor a session");
    if (strcmp(arg, "-") == 0) {
        out->kind = PYC_SIDE_STDIO;
        return 0;
    }
    const char *colon = strchr(arg, ':');
    const char *slash = strchr(arg, '/');
    if (colon == NULL || (slash != NULL && slash < colon)) {
        out->kind = PYC_SIDE_FILE;
        out->path = arg;
        return 0;
    }
    size_t n = (size_t)(colon - arg);
    if (n == 0 || n > PYC_SESSION_NAME_MAX)
        return pyc_error_set(err, "'%s': '%.*s' is not a session name (for a file, write ./%s)", arg, (int)n, arg,
                             arg);
    memcpy(out->session, arg, n);
    out->session[n] = '\0';
    if (pyc_session_name_check(out->session, NULL) < 0)
        return pyc_error_set(err, "'%s': '%s' is not a session name (for a file, write ./%s)", arg, out->session,
                             arg);
    const char *var = colon + 1;
    if (strlen(var) >= sizeof out->var)
        return pyc_error_set(err, "session %s: the variable name is longer than %zu characters", out->session,
                             sizeof out->var - 1);
    if (var[0] != '\0' && !identifier_like(var))
        return pyc_error_set(err, "'%s': '%s' is not a Python name", arg, var);
    memcpy(out->var, var, strlen(var) + 1);
    out->kind = PYC_SIDE_SESSION;
    return 0;
}
