/*
 * forkcmd.c -- `pyc fork` and `pyc new NAME --from SOURCE` (comm target pyc.fork, through transfer.c's
 * cli_comm_request).
 *
 * `fork` asks for children that outlive their parent (so `pyc kill` of the parent leaves them be), then makes
 * each a named session: pyc-NEW.json is the child's connection with its pid, and the file the child wrote
 * itself (pyc-NAME-fork-PID.json) is removed, so that the child is listed once, under its new name.  The
 * request queues behind a running cell, so `fork` waits for its answer as long as the kernel lives, as `run`
 * does: a deadline would leave children that nobody adopts when the kernel gets to the request later.
 * Ctrl-C stops the wait, and says that children may still appear (they list themselves as
 * NAME-fork-PID sessions).
 *
 * `new --from` forks one child the same way, from a live session or, when no session has that name, from a
 * live warm template (README, "Kernels from a warm template"): the record pyctemplate-NAME-FINGERPRINT.json
 * that pyc_client's template provisioner keeps in the runtime dir names its pid and connection.
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include "proc.h"

#define PID_START_WAIT_MS 1000   /* how long a child's /proc entry may take to read */

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
 * pyctemplate-SOURCE-FINGERPRINT.json in the runtime dir whose process is alive (the one that started at
 * the recorded time: a pid may be another process's after a reboot), the most recently used when
 * there are several (the template provisioner touches a record at each fork).  NULL, with *rc
 * PYC_EXIT_NOSESSION and nothing printed, when there is none. */
static pyc_client_t *
template_client(const char *source, const char *dir, pyc_session_file_t *sf, int *rc)
{
    char prefix[256], best[4400] = "";
    json_t *rec = NULL;          /* best's record, read once */
    double newest = -1;
    snprintf(prefix, sizeof prefix, "pyctemplate-%s-", source);
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
            json_t *r = json_load_file(path, 0, NULL);
            json_int_t pid = json_integer_value(json_object_get(r, "pid"));
            json_int_t start = json_integer_value(json_object_get(r, "pid_start"));
            if (pid > 1 && start > 0 && pyc_proc_start((pid_t)pid) == (unsigned long long)start) {
                newest = (double)st.st_mtime;
                snprintf(best, sizeof best, "%s", path);
                json_decref(rec);
                rec = json_incref(r);
            }
            json_decref(r);
        }
    }
    if (d != NULL)
        closedir(d);
    if (rec == NULL)
        return NULL;
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
    sf->pid_start = (unsigned long long)json_integer_value(json_object_get(rec, "pid_start"));
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
                json_array_append_new(list, json_pack("{s:s, s:O, s:s, s:o}", "name", nm, "pid",
                                                      json_object_get(json_array_get(children, (size_t)i), "pid"),
                                                      "connection_file", path, "not_carried",
                                                      json_is_array(lost) ? json_incref(lost) : json_array()));
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

