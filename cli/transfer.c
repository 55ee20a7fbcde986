/*
 * transfer.c -- `pyc fork` (comm target pyc.fork) and `pyc cp` (comm target pyc.pickle).
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
 * `fork` asks for children that outlive their parent (so `pyc kill` of the parent leaves them be), then makes
 * each a named session: pyc-NEW.json is the child's connection with its pid, and the file the child wrote
 * itself (pyc-NAME-fork-PID.json) is removed, so that the child is listed once, under its new name.  The
 * request queues behind a running cell, so `fork` waits for its answer as long as the kernel lives, as `run`
 * does: a deadline would leave children that nobody adopts when the kernel gets to the request later.
 * Ctrl-C stops the wait, and says that children may still appear (they list themselves as
 * NAME-fork-PID sessions).
 *
 * Exit codes: a `cp` whose request got no answer within --timeout exits PYC_EXIT_CONNECTION (the kernel
 * did not answer); PYC_EXIT_TIMEOUT is the cell's own deadline only.
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include "buf.h"
#include "hmac.h"
#include "paths.h"
#include "pickle.h"

#define DEFAULT_TIMEOUT 600.0
#define BUSY_NOTE_S 2.0          /* a fork without an answer this long says why it waits */
#define PID_START_WAIT_MS 1000   /* how long a child's /proc entry may take to read */
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

/* ---- fork ------------------------------------------------------------------------------------------------ */

/* Makes child (an element of the fork answer's "children") the session `name`.  Returns 0, or -1 (printed). */
static int
adopt_child(const char *name, json_t *child, const char *runtime_dir)
{
    pyc_error_t err;
    pyc_session_file_t sf;
    char path[4096];
    json_t *conn = json_object_get(child, "connection");
    json_t *pid = json_object_get(child, "pid");
    char *text = json_is_object(conn) ? json_dumps(conn, JSON_COMPACT) : NULL;
    int rc = -1;

    if (text == NULL || !json_is_integer(pid)) {
        cli_err("fork: the kernel's report of a child has no connection or pid");
        free(text);
        return -1;
    }
    if (pyc_session_file_parse(text, strlen(text), &sf, &err) < 0) {
        cli_err("fork: the child's connection: %s", err.text);
        free(text);
        return -1;
    }
    sf.pid = (long)json_integer_value(pid);
    /* pid_start 0 would make any process that gets the pid later pass for the child (and be killed by `pyc
     * kill`): a child whose start cannot be read is not adopted. */
    sf.pid_start = 0;
    for (int waited = 0; sf.pid > 1 && (sf.pid_start = pyc_proc_start(sf.pid)) == 0 && waited < PID_START_WAIT_MS;
         waited += 10)
        usleep(10000);
    sf.created = pyc_wall_s();
    if (sf.pid_start == 0) {
        cli_err("fork: the child for %s (pid %ld) is gone, or its /proc entry cannot be read; not adopted", name,
                sf.pid);
    } else if (cli_session_path(path, sizeof path, name, ".json") == 0) {
        if (pyc_session_file_write(path, &sf, &err) < 0)
            cli_err("%s", err.text);
        else
            rc = 0;
    }
    /* The child's own file, in the runtime dir beside its parent's: the session file replaces it. */
    const char *own = json_string_value(json_object_get(child, "connection_file"));
    if (rc == 0 && own != NULL) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", own);
        if (strcmp(dirname(dir), runtime_dir) == 0)
            unlink(own);
    }
    pyc_session_file_clear(&sf);
    free(text);
    return rc;
}

/* Kills the children of a fork answer (made before a failure, or left without a name). */
static void
kill_children(json_t *children, size_t from)
{
    size_t i;
    json_t *child;
    json_array_foreach(children, i, child) {
        json_t *pid = json_object_get(child, "pid");
        const char *own = json_string_value(json_object_get(child, "connection_file"));
        if (i < from || !json_is_integer(pid) || json_integer_value(pid) <= 1)
            continue;
        kill((pid_t)json_integer_value(pid), SIGKILL);
        if (own != NULL)
            unlink(own);
    }
}

/* A client for the live warm template SOURCE (README, "Kernels from a warm template"): its record
 * pyc-template-SOURCE-FINGERPRINT.json in the runtime dir whose process is alive, the most recently used when
 * there are several (the template provisioner touches a record at each fork).  NULL, with *rc
 * PYC_EXIT_NOSESSION and nothing printed, when there is none. */
static pyc_client_t *
template_client(const char *source, const char *dir, pyc_session_file_t *sf, int *rc)
{
    char prefix[256], best[4400] = "";
    double newest = -1;
    snprintf(prefix, sizeof prefix, "pyc-template-%s-", source);
    *rc = PYC_EXIT_NOSESSION;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name), p = strlen(prefix);
        struct stat st;
        char path[4400];
        if (n != p + 16 + 5 || strncmp(e->d_name, prefix, p) != 0 || strcmp(e->d_name + n - 5, ".json") != 0 ||
            strspn(e->d_name + p, "0123456789abcdef") != 16)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0 && st.st_mtime > newest) {
            json_t *rec = json_load_file(path, 0, NULL);
            json_int_t pid = json_integer_value(json_object_get(rec, "pid"));
            if (pid > 1 && pyc_proc_start((pid_t)pid) != 0) {
                newest = (double)st.st_mtime;
                snprintf(best, sizeof best, "%s", path);
            }
            json_decref(rec);
        }
    }
    if (d != NULL)
        closedir(d);
    if (best[0] == '\0')
        return NULL;
    json_t *rec = json_load_file(best, 0, NULL);
    char *text = json_dumps(json_object_get(rec, "connection"), JSON_COMPACT);
    pyc_error_t err;
    int parsed = text != NULL ? pyc_session_file_parse(text, strlen(text), sf, &err) : -1;
    free(text);
    if (parsed < 0) {
        cli_err("template %s: its record %s does not hold a connection", source, best);
        json_decref(rec);
        *rc = PYC_EXIT_CONNECTION;
        return NULL;
    }
    sf->pid = (long)json_integer_value(json_object_get(rec, "pid"));
    sf->pid_start = pyc_proc_start((pid_t)sf->pid);
    json_decref(rec);
    utime(best, NULL);           /* used now: not taken for an unused template */
    return cli_client_for(source, sf, true, false, rc);
}

/* Forks source (a live session, or, for `new --from` (as_new), a live warm template) into the new sessions
 * given[0..n) (in that order).  A live name is refused, or ended first when replace.  --json prints fork's
 * list, or for new --from new's object. */
static int
fork_sessions(const char *source, const char *const *given, int n, bool as_json, bool replace, bool as_new)
{
    pyc_error_t err;
    int rc = PYC_EXIT_OK, locks[CLI_MAX_POS];
    char dir[4096];

    const char *names[CLI_MAX_POS];
    memcpy(names, given, (size_t)n * sizeof *names);
    if (pyc_session_name_check(source, &err) < 0) {
        cli_err("%s", err.text);
        return PYC_EXIT_USAGE;
    }
    for (int i = 0; i < n; i++) {
        if (pyc_session_name_check(given[i], &err) < 0) {
            cli_err("%s", err.text);
            return PYC_EXIT_USAGE;
        }
        for (int j = 0; j < i; j++) {
            if (strcmp(given[i], given[j]) == 0) {
                cli_err("fork: %s is named twice", given[i]);
                return PYC_EXIT_USAGE;
            }
        }
        if (strcmp(given[i], source) == 0) {
            cli_err("fork: %s is both the session forked and a new one", source);
            return PYC_EXIT_USAGE;
        }
    }
    if (cli_runtime_dir(dir, sizeof dir) < 0)
        return PYC_EXIT_CONNECTION;
    cli_catch_sigint();

    /* Locks in name order, so that two forks that share names cannot wait for each other. */
    for (int i = 1; i < n; i++) {
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    }
    int nlocked = 0;
    for (; nlocked < n; nlocked++) {
        if ((rc = cli_lock(names[nlocked], CLI_LOCK_WAIT_MS, "fork", &locks[nlocked])) != 0)
            goto unlock;
        pyc_session_file_t old;
        cli_state_t st = cli_session_state(names[nlocked], &old, 1000, &err);
        if ((st == CLI_LIVE || st == CLI_UNRESPONSIVE) && !replace) {
            cli_err("session %s already exists (kernel pid %ld%s); nothing was forked", names[nlocked], old.pid,
                    st == CLI_UNRESPONSIVE ? ", not answering its heartbeat" : "");
            pyc_session_file_clear(&old);
            rc = PYC_EXIT_EXISTS;
            nlocked++;
            goto unlock;
        }
        if (cli_sigint_count > 0) {
            cli_err("interrupted; nothing was forked");
            pyc_session_file_clear(&old);
            rc = PYC_EXIT_INTERRUPTED;
            nlocked++;
            goto unlock;
        }
        if (st != CLI_MISSING && cli_session_end(names[nlocked], &old, st, 1000) < 0) {
            pyc_session_file_clear(&old);
            rc = PYC_EXIT_CONNECTION;
            nlocked++;
            goto unlock;
        }
        pyc_session_file_clear(&old);
    }

    pyc_session_file_t sf;
    pyc_client_t *cl = NULL;
    bool from_template = false;
    if (as_new) {
        pyc_session_file_t probe;
        if (cli_session_state(source, &probe, 0, &err) == CLI_MISSING) {
            cl = template_client(source, dir, &sf, &rc);
            from_template = true;
            if (cl == NULL && rc == PYC_EXIT_NOSESSION)
                cli_err("no session and no live template named %s (pyc ls lists sessions; a template starts with "
                        "the first kernel of its kernelspec, pyc-kernel install --template %s)", source, source);
            if (cl == NULL)
                goto unlock;
        } else {
            pyc_session_file_clear(&probe);
        }
    }
    if (cl == NULL && (cl = cli_connect(source, &sf, true, false, &rc)) == NULL)
        goto unlock;
    if (cli_sigint_count > 0) {
        cli_err("interrupted; nothing was forked");
        rc = PYC_EXIT_INTERRUPTED;
        pyc_client_destroy(&cl);
        pyc_session_file_clear(&sf);
        goto unlock;
    }
    /* The children's names go with the request, so that each writes the event log under its own.  A
     * template's children are sessions of their own: what the template lacks (it runs no threads of a
     * user's) is not looked for. */
    json_t *cnames = json_array();
    for (int i = 0; i < n && cnames != NULL; i++)
        json_array_append_new(cnames, json_string(given[i]));
    json_t *data = cnames != NULL ? json_pack("{s:i, s:b, s:o}", "n", n, "outlive", 1, "names", cnames) : NULL;
    if (data != NULL && from_template)
        json_object_set_new(data, "not_carried", json_false());
    pyc_msg_t *answer = data != NULL ? cli_comm_request(cl, source, "pyc.fork", data, NULL, 0, 0, &rc) : NULL;
    json_decref(data);
    json_t *children = answer != NULL ? json_object_get(json_object_get(answer->content, "data"), "children") : NULL;
    if (rc != PYC_EXIT_OK) {
        kill_children(children, 0);
    } else if (!json_is_array(children) || json_array_size(children) != (size_t)n) {
        cli_err("fork: the kernel reported %zu children, not %d",
                json_is_array(children) ? json_array_size(children) : 0, n);
        kill_children(children, 0);
        rc = PYC_EXIT_PROTOCOL;
    } else {
        json_t *list = json_array();
        json_t *lost = json_object_get(json_object_get(answer->content, "data"), "not_carried");
        /* Child i becomes the i-th name as given (names[] is the sorted copy used for locking). */
        for (int i = 0; i < n && rc == PYC_EXIT_OK; i++) {
            const char *nm = given[i];
            char path[4096];
            if (adopt_child(nm, json_array_get(children, (size_t)i), dir) < 0) {
                kill_children(children, (size_t)i);
                rc = PYC_EXIT_IOERR;
                break;
            }
            if (cli_session_path(path, sizeof path, nm, ".json") < 0)
                continue;
            if (as_json)
                json_array_append_new(list, json_pack("{s:s, s:O, s:s, s:O}", "name", nm, "pid",
                                                      json_object_get(json_array_get(children, (size_t)i), "pid"),
                                                      "connection_file", path, "not_carried",
                                                      json_is_array(lost) ? lost : json_array()));
            else
                puts(path);
        }
        if (as_json && rc == PYC_EXIT_OK && as_new) {
            json_object_del(json_array_get(list, 0), "not_carried");
            cli_print_json_line(json_array_get(list, 0));
        } else if (as_json && rc == PYC_EXIT_OK) {
            cli_print_json_line(list);
        }
        json_decref(list);
        /* What the children lack of the parent (its threads, connections, GPU contexts), as snapshot says it. */
        size_t j;
        json_t *one;
        if (!as_json && rc == PYC_EXIT_OK) {
            json_array_foreach(lost, j, one)
                cli_err("%s", json_string_value(one) ?: "?");   /* each says "not in the forked sessions" */
        }
    }
    pyc_msg_destroy(&answer);
    pyc_client_destroy(&cl);
    pyc_session_file_clear(&sf);
unlock:
    for (int i = 0; i < nlocked; i++)
        cli_unlock(names[i], locks[i], false);
    return rc;
}

int
cli_fork(const cli_args_t *a)
{
    return fork_sessions(a->pos[0], (const char *const *)&a->pos[1], a->npos - 1, a->value[CLI_FORK_JSON] != NULL,
                         false, false);
}

int
cli_new_from(const char *source, const char *name, bool replace, bool as_json)
{
    return fork_sessions(source, &name, 1, as_json, replace, true);
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
