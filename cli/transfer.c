/*
 * transfer.c -- `pyc cp` (comm target pyc.pickle), and the comm request that it and `pyc fork` (forkcmd.c)
 * make.
 *
 * Both speak the protocol of the Python client (cli/python/pyc_client): one comm_open on shell whose data is
 * the request and whose extra frames are the pickle of a put; the kernel answers with one comm_msg on that
 * comm on iopub (with the pickle's frames for a get), then comm_close.  A comm_close or the request's idle
 * status before any answer means the kernel has no such target.
 *
 * `cp` never unpickles: session to session forwards the frames as they came (the destination kernel checks
 * their SHA-256 digests against the signed content); session to file checks the digests here and writes one
 * in-band pickle (pickle.h); file to session sends the file as the main pickle, without out-of-band buffers.
 * A file is read with mmap(2) when it can be, so a large pickle is neither copied nor read twice.
 *
 * Exit codes: a `cp` whose request got no answer within --timeout exits PYC_EXIT_CONNECTION (the kernel
 * did not answer); PYC_EXIT_TIMEOUT is the cell's own deadline only.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "hmac.h"
#include "paths.h"
#include "pickle.h"

#define DEFAULT_TIMEOUT 600.0
#define BUSY_NOTE_S 2.0          /* a fork without an answer this long says why it waits */
#define MAX_STDIN_PICKLE ((size_t)1 << 36)

/* The frames that carry bufs in a put: views of bufs (nothing is copied), a buffer over PYC_PICKLE_FRAME_MAX
 * (or this process's PYC_MAX_MESSAGE_BYTES, when smaller) cut into consecutive frames of that size, and
 * "frames" (the count per buffer) added to data when any buffer took more than one.  Returns the array (the
 * caller frees it; its views live as long as bufs) with its length in *nframes, or NULL when out of memory. */
static pyc_frame_t *
split_frames(const pyc_frame_t *bufs, size_t nbufs, json_t *data, size_t *nframes)
{
    /* Less when PYC_MAX_MESSAGE_BYTES says the kernels take less (they would drop the connection). */
    size_t max = PYC_PICKLE_FRAME_MAX, n = 0;
    const char *v = getenv("PYC_MAX_MESSAGE_BYTES");
    if (v != NULL && strtoull(v, NULL, 10) >= ((size_t)1 << 20) && strtoull(v, NULL, 10) < max)
        max = (size_t)strtoull(v, NULL, 10);
    for (size_t i = 0; i < nbufs; i++)
        n += bufs[i].size <= max ? 1 : (bufs[i].size + max - 1) / max;
    pyc_frame_t *frames = malloc((n > 0 ? n : 1) * sizeof *frames);
    json_t *counts = n > nbufs ? json_array() : NULL;
    if (frames == NULL || (n > nbufs && counts == NULL)) {
        free(frames);
        json_decref(counts);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < nbufs; i++) {
        size_t at = 0, took = 0;
        do {
            size_t len = bufs[i].size - at < max ? bufs[i].size - at : max;
            frames[k++] = (pyc_frame_t){(const char *)bufs[i].data + at, len};
            at += len;
            took++;
        } while (at < bufs[i].size);
        if (counts != NULL && json_array_append_new(counts, json_integer((json_int_t)took)) < 0) {
            free(frames);
            json_decref(counts);
            return NULL;
        }
    }
    if (counts != NULL && json_object_set_new(data, "frames", counts) < 0) {
        free(frames);
        return NULL;
    }
    *nframes = k;
    return frames;
}

pyc_msg_t *
cli_comm_request(pyc_client_t *cl, const char *session, const char *target, json_t *data, const pyc_frame_t *bufs,
                 size_t nbufs, double timeout_s, int *rc)
{
    pyc_error_t err;
    char id[PYC_MSG_ID_LEN + 1], comm_id[PYC_MSG_ID_LEN + 1];
    pyc_buf_t said;
    pyc_msg_t *answer = NULL;

    pyc_msg_new_id(comm_id);
    json_t *content = json_pack("{s:s, s:s, s:O}", "comm_id", comm_id, "target_name", target, "data", data);
    *rc = PYC_EXIT_CONNECTION;
    if (content == NULL) {
        cli_err("out of memory");
        return NULL;
    }
    int sent = pyc_client_send(cl, PYC_CHAN_SHELL, "comm_open", content, NULL, NULL, bufs, nbufs, id, &err);
    json_decref(content);
    if (sent < 0) {
        cli_err("%s: %s", session, err.text);
        return NULL;
    }
    pyc_buf_init(&said, 1 << 16);
    double t0 = pyc_now_s(), deadline = t0 + timeout_s;
    bool noted = timeout_s > 0;
    while (answer == NULL) {
        double left = timeout_s > 0 ? deadline - pyc_now_s() : t0 + BUSY_NOTE_S - pyc_now_s();
        if (timeout_s > 0 && left <= 0) {
            cli_err("%s: no answer to the %s request within %g s (is a long cell running? pyc status %s says)",
                    session, target, timeout_s, session);
            *rc = PYC_EXIT_CONNECTION;
            break;
        }
        if (!noted && left <= 0) {
            cli_err("%s: waiting for the kernel to get to the %s request (it is probably running a cell; "
                    "Ctrl-C stops waiting)", session, target);
            noted = true;
        }
        pyc_msg_t *m;
        int chan;
        int r = pyc_client_recv(cl, noted && timeout_s <= 0 ? -1 : (int)(left * 1000) + 1, &m, &chan, &err);
        if (r == PYC_RECV_SIGNAL) {
            if (cli_sigint_count == 0)
                continue;
            if (strcmp(target, "pyc.fork") == 0)
                cli_err("interrupted; the fork request stays queued in %s's kernel, which may still fork: its "
                        "children would then appear as %s-fork-PID sessions (pyc ls; pyc kill ends them)",
                        session, session);
            else
                cli_err("interrupted");
            *rc = PYC_EXIT_INTERRUPTED;
            break;
        }
        if (r == PYC_RECV_ERROR) {
            cli_err("%s: %s", session, err.text);
            if (err.code == PYC_EGONE)
                *rc = PYC_EXIT_LOST;
            break;
        }
        if (r != PYC_RECV_MSG)
            continue;
        const char *cid = json_string_value(json_object_get(m->content, "comm_id"));
        bool ours = chan == PYC_CHAN_IOPUB && cid != NULL && strcmp(cid, comm_id) == 0;
        if (ours && strcmp(m->msg_type, "comm_msg") == 0) {
            answer = m;
            continue;
        }
        bool child = chan == PYC_CHAN_IOPUB && pyc_client_is_child_of(m, id);
        const char *st = json_string_value(json_object_get(m->content, "execution_state"));
        if (child && strcmp(m->msg_type, "stream") == 0 && json_is_string(json_object_get(m->content, "text")))
            pyc_buf_adds(&said, json_string_value(json_object_get(m->content, "text")));
        if ((ours && strcmp(m->msg_type, "comm_close") == 0) ||
            (child && strcmp(m->msg_type, "status") == 0 && st != NULL && strcmp(st, "idle") == 0)) {
            cli_err("%s: the kernel closed the comm without an answer: it has no '%s' comm target (is it a pyc "
                    "kernel?)%s%s", session, target, said.len > 0 ? "\n" : "", said.len > 0 ? said.data : "");
            *rc = PYC_EXIT_REFUSED;
            pyc_msg_destroy(&m);
            break;
        }
        pyc_msg_destroy(&m);
    }
    pyc_buf_free(&said);
    if (answer == NULL)
        return NULL;
    json_t *reply = json_object_get(answer->content, "data");
    const char *status = json_string_value(json_object_get(reply, "status"));
    if (status == NULL || strcmp(status, "ok") != 0) {
        cli_err("%s: %s: %s", session, json_string_value(json_object_get(reply, "ename")) ?: "Error",
                json_string_value(json_object_get(reply, "evalue")) ?: "the kernel's answer is not ok");
        *rc = PYC_EXIT_REFUSED;
        /* The caller may still need the answer (fork's children made before a failure): keep it readable. */
        return answer;
    }
    *rc = PYC_EXIT_OK;
    return answer;
}

/* ---- cp -------------------------------------------------------------------------------------------------- */

/* A pickle read from a file or stdin: mapped, or in a buffer. */
typedef struct loaded {
    void *map;
    size_t map_len;
    char *data;
    size_t len;
} loaded_t;

static void
loaded_free(loaded_t *l)
{
    if (l->map != NULL)
        munmap(l->map, l->map_len);
    free(l->data);
    memset(l, 0, sizeof *l);
}

/* Reads the pickle of a file side (path NULL: stdin) into l.  Prints and returns -1 on failure. */
static int
load_pickle(const char *path, loaded_t *l, pyc_frame_t *frame)
{
    int fd = path != NULL ? open(path, O_RDONLY | O_CLOEXEC) : 0;
    const char *what = path != NULL ? path : "stdin";
    struct stat st;
    memset(l, 0, sizeof *l);
    if (fd < 0) {
        cli_err("cannot open %s: %s", what, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            l->map = p;
            l->map_len = (size_t)st.st_size;
            frame->data = p;
            frame->size = l->map_len;
            if (path != NULL)
                close(fd);
            return 0;
        }
    }
    pyc_buf_t b;
    pyc_buf_init(&b, MAX_STDIN_PICKLE);
    for (;;) {
        if (pyc_buf_reserve(&b, 1 << 20) < 0) {
            cli_err("%s: too large or out of memory", what);
            break;
        }
        size_t room = b.alloc - b.len - 1;
        if (room > b.max - b.len)
            room = b.max - b.len;      /* never past the cap, whatever the allocation grew to */
        ssize_t r = read(fd, b.data + b.len, room);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            cli_err("cannot read %s: %s", what, strerror(errno));
            break;
        }
        if (r == 0) {
            if (path != NULL)
                close(fd);
            if (b.len == 0) {
                cli_err("%s is empty: not a pickle", what);
                pyc_buf_free(&b);
                return -1;
            }
            l->len = b.len;
            l->data = pyc_buf_detach(&b, NULL);
            frame->data = l->data;
            frame->size = l->len;
            return 0;
        }
        b.len += (size_t)r;
        b.data[b.len] = '\0';
    }
    if (path != NULL)
        close(fd);
    pyc_buf_free(&b);
    return -1;
}

static int
write_fd(void *ctx, const void *p, size_t n)
{
    return pyc_write_all(*(int *)ctx, p, n);
}

/* Writes the answer of a get (main pickle and out-of-band buffers) as one in-band pickle to path (NULL:
 * stdout), after checking each frame against its SHA-256 digest.  Prints and returns -1 on failure. */
static int
save_pickle(const char *path, const pyc_msg_t *answer)
{
    json_t *digests = json_object_get(json_object_get(answer->content, "data"), "sha256");
    pyc_error_t err;
    if (answer->n_buffers == 0 || !json_is_array(digests) || json_array_size(digests) != answer->n_buffers) {
        cli_err("the kernel's answer has %zu frames and %zu digests", answer->n_buffers,
                json_is_array(digests) ? json_array_size(digests) : 0);
        return -1;
    }
    for (size_t i = 0; i < answer->n_buffers; i++) {
        char hex[65];
        const char *want = json_string_value(json_array_get(digests, i));
        pyc_sha256_hex(answer->buffers[i].data, answer->buffers[i].size, hex);
        if (want == NULL || strcasecmp(hex, want) != 0) {
            cli_err("frame %zu of the kernel's answer does not match its SHA-256 digest; nothing written", i);
            return -1;
        }
    }
    char tmp[4096];
    int fd = 1;
    if (path != NULL) {
        /* Beside the target, under a random name created exclusively (the directory may be /tmp). */
        fd = pyc_open_tmp(path, ".pyc-tmp", 0666, tmp, sizeof tmp);
        if (fd < 0) {
            if (errno == ENAMETOOLONG)
                cli_err("%s: path too long", path);
            else
                cli_err("cannot create a temporary file beside %s: %s", path, strerror(errno));
            return -1;
        }
    }
    int r = pyc_pickle_inband(&answer->buffers[0], answer->buffers + 1, answer->n_buffers - 1, write_fd, &fd, &err);
    if (r < 0)
        cli_err("%s: %s", path != NULL ? path : "stdout", err.text);
    if (path != NULL) {
        if (close(fd) < 0 && r == 0) {
            cli_err("cannot write %s: %s", tmp, strerror(errno));
            r = -1;
        }
        if (r == 0 && rename(tmp, path) < 0) {
            cli_err("cannot rename %s to %s: %s", tmp, path, strerror(errno));
            r = -1;
        }
        if (r != 0)
            unlink(tmp);
    }
    return r == 0 ? 0 : -1;
}

/* Prints every name a get of several names left out, with why: those that cannot be pickled ("skipped",
 * with the kernel's reason) and, for a whole namespace, those bound to modules ("modules"), which are never
 * sent (the other side re-imports them).  Names starting with "_" and the kernel's own (In, Out, ...) are
 * left out by design and not listed.  Nothing is printed when nothing was left out. */
static void
report_skipped(const char *session, const pyc_msg_t *answer)
{
    json_t *data = json_object_get(answer->content, "data");
    json_t *skipped = json_object_get(data, "skipped"), *modules = json_object_get(data, "modules");
    size_t ns = json_is_object(skipped) ? json_object_size(skipped) : 0;
    size_t nm = json_is_array(modules) ? json_array_size(modules) : 0;
    const char *k;
    json_t *v;
    size_t i;
    if (ns + nm == 0)
        return;
    cli_err("%s: %zu name%s not copied:", session, ns + nm, ns + nm == 1 ? "" : "s");
    json_object_foreach(skipped, k, v) {
        fprintf(stderr, "  %s: cannot be pickled: %s\n", k, json_is_string(v) ? json_string_value(v) : "?");
    }
    json_array_foreach(modules, i, v) {
        if (json_is_string(v))
            fprintf(stderr, "  %s: module: re-import it\n", json_string_value(v));
    }
}

int
cli_cp(const cli_args_t *a)
{
    pyc_error_t err;
    pyc_side_t src, dst;
    double timeout = DEFAULT_TIMEOUT;
    int rc = PYC_EXIT_OK;

    if (a->value[CLI_CP_TIMEOUT] != NULL && cli_seconds("--timeout", a->value[CLI_CP_TIMEOUT], &timeout) < 0)
        return PYC_EXIT_USAGE;
    if (pyc_side_parse(a->pos[0], &src, &err) < 0 || pyc_side_parse(a->pos[1], &dst, &err) < 0) {
        cli_err("cp: %s", err.text);
        return PYC_EXIT_USAGE;
    }
    if (src.kind != PYC_SIDE_SESSION && dst.kind != PYC_SIDE_SESSION) {
        cli_err("cp: one side must be a session (SESSION:VAR or SESSION:)");
        return PYC_EXIT_USAGE;
    }
    cli_catch_sigint();

    pyc_session_file_t ssf, dsf;
    pyc_client_t *scl = NULL, *dcl = NULL;
    pyc_msg_t *got = NULL, *put = NULL;
    loaded_t file = {0};
    pyc_frame_t one;
    const pyc_frame_t *bufs = NULL;
    pyc_frame_t *frames = NULL;
    size_t nbufs = 0, nframes = 0;
    json_t *digests = NULL, *data = NULL;
    json_int_t nbytes = 0;
    memset(&ssf, 0, sizeof ssf);
    memset(&dsf, 0, sizeof dsf);

    /* The source: a get, or the file. */
    if (src.kind == PYC_SIDE_SESSION) {
        if ((scl = cli_connect(src.session, &ssf, true, false, &rc)) == NULL)
            goto out;
        data = src.var[0] != '\0' ? json_pack("{s:s, s:s}", "op", "get", "name", src.var)
                                  : json_pack("{s:s, s:n}", "op", "get", "names");
        got = data != NULL ? cli_comm_request(scl, src.session, "pyc.pickle", data, NULL, 0, timeout, &rc) : NULL;
        json_decref(data);
        data = NULL;
        if (rc != PYC_EXIT_OK)
            goto out;
        report_skipped(src.session, got);
        json_t *gd = json_object_get(got->content, "data");
        digests = json_object_get(gd, "sha256");
        json_t *nb = json_object_get(gd, "nbytes");
        nbytes = json_is_integer(nb) ? json_integer_value(nb) : 0;
        bufs = got->buffers;
        nbufs = got->n_buffers;
        if (nbufs == 0) {
            cli_err("%s: the kernel's answer holds no pickle", src.session);
            rc = PYC_EXIT_PROTOCOL;
            goto out;
        }
        json_incref(digests);
    } else {
        if (load_pickle(src.kind == PYC_SIDE_FILE ? src.path : NULL, &file, &one) < 0) {
            rc = PYC_EXIT_NOINPUT;
            goto out;
        }
        char hex[65];
        pyc_sha256_hex(one.data, one.size, hex);
        digests = json_pack("[s]", hex);
        bufs = &one;
        nbufs = 1;
        nbytes = (json_int_t)one.size;
    }

    /* The destination: the file, or a put. */
    if (dst.kind != PYC_SIDE_SESSION) {
        if (save_pickle(dst.kind == PYC_SIDE_FILE ? dst.path : NULL, got) < 0)
            rc = PYC_EXIT_IOERR;
        goto out;
    }
    if ((dcl = cli_connect(dst.session, &dsf, true, false, &rc)) == NULL)
        goto out;
    /* The name it gets: DST's variable, else SRC's; none for a whole namespace. */
    const char *name = dst.var[0] != '\0' ? dst.var : NULL;
    if (name == NULL && src.kind == PYC_SIDE_SESSION && src.var[0] != '\0')
        name = src.var;
    data = name != NULL
               ? json_pack("{s:s, s:s, s:O, s:I}", "op", "put", "name", name, "sha256", digests, "nbytes", nbytes)
               : json_pack("{s:s, s:n, s:O, s:I}", "op", "put", "names", "sha256", digests, "nbytes", nbytes);
    if (data == NULL) {
        cli_err("out of memory");
        rc = PYC_EXIT_OSERR;
        goto out;
    }
    if ((frames = split_frames(bufs, nbufs, data, &nframes)) == NULL) {
        cli_err("out of memory");
        rc = PYC_EXIT_OSERR;
        goto out;
    }
    put = cli_comm_request(dcl, dst.session, "pyc.pickle", data, frames, nframes, timeout, &rc);
out:
    /* The clients go first: their connections write the frames and the file from where they are (client.h),
     * and may still hold views of them until they are closed. */
    pyc_client_destroy(&scl);
    pyc_client_destroy(&dcl);
    json_decref(data);
    json_decref(digests);
    pyc_msg_destroy(&got);
    pyc_msg_destroy(&put);
    free(frames);
    loaded_free(&file);
    pyc_session_file_clear(&ssf);
    pyc_session_file_clear(&dsf);
    return rc;
}
