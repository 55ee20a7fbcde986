/*
 * sessions.c -- `pyc kill` and `pyc ls`: the sessions of the runtime dir, ended and listed.
 *
 * Both walk the runtime dir for pyc-NAME.json files (`kill --all` also for the pyc-NAME.log a failed `new`
 * left), sorted by name.  `kill` takes each name's lock, so that it never ends a session a `new` or `fork`
 * is still making; `ls` takes no lock but reads what a holder of one says it does (cli_locked), and asks the
 * heartbeats of all live sessions at once, so that listing 50 sessions costs one second at most, not 50.
 * A stale session's STATE says what ended it when the event log knows ("crashed (SIGSEGV)", "ended (idle
 * timeout)"; `--json` keeps state "stale" and adds "reason"), and `ls` records the ones it finds gone
 * without a word (events.c).
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- kill ------------------------------------------------------------------------------------------------ */

/* When file_name is "pyc-NAME.log" with a valid NAME, copies NAME into name_out. */
static bool
name_of_log(const char *file_name, char *name_out)
{
    size_t n = strlen(file_name);
    if (n <= 8 || n - 8 > PYC_SESSION_NAME_MAX || strncmp(file_name, "pyc-", 4) != 0 ||
        strcmp(file_name + n - 4, ".log") != 0)
        return false;
    memcpy(name_out, file_name + 4, n - 8);
    name_out[n - 8] = '\0';
    return pyc_session_name_check(name_out, NULL) == 0;
}

/* The session names in the runtime dir (with logs: also the names that only have a pyc-NAME.log), sorted and
 * without repeats; *n gets their count.  NULL (printed) on failure. */
static char **
list_names(size_t *n, bool logs)
{
    char dir[4096];
    *n = 0;
    if (cli_runtime_dir(dir, sizeof dir) < 0)
        return NULL;
    DIR *d = opendir(dir);
    if (d == NULL) {
        cli_err("cannot read %s: %s", dir, strerror(errno));
        return NULL;
    }
    char **names = NULL;
    size_t cap = 0;
    struct dirent *e;
    bool failed = false;
    while ((e = readdir(d)) != NULL) {
        char name[PYC_SESSION_NAME_MAX + 1];
        if (!pyc_session_name_of_file(e->d_name, name) && !(logs && name_of_log(e->d_name, name)))
            continue;
        if (*n == cap) {
            size_t c = cap ? cap * 2 : 16;
            char **g = realloc(names, c * sizeof *g);
            if (g == NULL) {
                failed = true;
                break;
            }
            names = g;
            cap = c;
        }
        if ((names[*n] = strdup(name)) == NULL) {
            failed = true;
            break;
        }
        (*n)++;
    }
    closedir(d);
    if (failed) {
        for (size_t i = 0; i < *n; i++)
            free(names[i]);
        free(names);
        cli_err("out of memory");
        *n = 0;
        return NULL;
    }
    if (names == NULL)
        names = malloc(sizeof *names);   /* an empty list, distinct from failure */
    if (names == NULL)
        cli_err("out of memory");
    for (size_t i = 1; i < *n; i++) {
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        if (k > 0 && strcmp(names[k - 1], names[i]) == 0)
            free(names[i]);
        else
            names[k++] = names[i];
    }
    *n = k;
    return names;
}

static void
free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static int
kill_one(const char *name)
{
    pyc_error_t err;
    pyc_session_file_t sf;
    char log[4096];
    int rc = PYC_EXIT_OK;
    if (pyc_session_name_check(name, &err) < 0) {
        cli_err("%s", err.text);
        return PYC_EXIT_USAGE;
    }
    int lock;
    if ((rc = cli_lock(name, CLI_LOCK_WAIT_MS, "kill", &lock)) != 0)
        return rc;
    cli_state_t st = cli_session_state(name, &sf, 1000, &err);
    switch (st) {
    case CLI_MISSING:
        /* The log a failed `new` kept is all there is: removing it is cleaning the name. */
        if (cli_session_path(log, sizeof log, name, ".log") == 0 && unlink(log) == 0) {
            cli_err("session %s had no kernel; its leftover log %s was removed", name, log);
        } else {
            cli_err("no session named %s", name);
            rc = PYC_EXIT_NOSESSION;
        }
        break;
    case CLI_UNRESPONSIVE:
        cli_err("session %s did not answer (kernel pid %ld alive but its heartbeat silent); killed", name, sf.pid);
        break;
    case CLI_BROKEN:
        cli_err("session %s: %s; removed", name, err.text);
        break;
    case CLI_STALE:
        cli_err("session %s was stale (kernel pid %ld gone); removed", name, sf.pid);
        break;
    case CLI_LIVE:
        break;
    }
    if (st != CLI_MISSING && cli_session_end(name, &sf, st, 5000) < 0)
        rc = PYC_EXIT_CONNECTION;
    pyc_session_file_clear(&sf);
    cli_unlock(name, lock, rc != PYC_EXIT_CONNECTION);
    return rc;
}

int
cli_kill(const cli_args_t *a)
{
    bool all = a->value[CLI_KILL_ALL] != NULL;
    if ((a->npos == 0) != all)
        return CLI_BAD_USAGE;           /* names, or --all: one of the two */
    int rc = PYC_EXIT_OK;
    if (all) {
        size_t n;
        char **names = list_names(&n, true);
        if (names == NULL)
            return PYC_EXIT_IOERR;
        for (size_t i = 0; i < n; i++) {
            int r = kill_one(names[i]);
            if (r != PYC_EXIT_OK && r != PYC_EXIT_NOSESSION)   /* gone meanwhile is fine */
                rc = r;
        }
        free_names(names, n);
        return rc;
    }
    for (int i = 0; i < a->npos; i++) {
        int r = kill_one(a->pos[i]);
        if (r != PYC_EXIT_OK)
            rc = r;
    }
    return rc;
}

/* ---- ls -------------------------------------------------------------------------------------------------- */

static void
format_age(double s, char *out, size_t cap)
{
    long t = s > 0 ? (long)s : 0;
    if (t < 60)
        snprintf(out, cap, "%lds", t);
    else if (t < 3600)
        snprintf(out, cap, "%ldm%02lds", t / 60, t % 60);
    else if (t < 86400)
        snprintf(out, cap, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
    else
        snprintf(out, cap, "%ldd%02ldh", t / 86400, (t % 86400) / 3600);
}

int
cli_ls(const cli_args_t *a)
{
    bool as_json = a->value[CLI_LS_JSON] != NULL;
    size_t n;
    char **names = list_names(&n, false);
    if (names == NULL)
        return PYC_EXIT_IOERR;
    pyc_session_file_t *sfs = calloc(n ? n : 1, sizeof *sfs);
    cli_state_t *st = calloc(n ? n : 1, sizeof *st);
    const pyc_connfile_t **cfs = calloc(n ? n : 1, sizeof *cfs);
    bool *alive = calloc(n ? n : 1, sizeof *alive);
    size_t *which = calloc(n ? n : 1, sizeof *which);
    json_t *list = json_array();
    int rc = PYC_EXIT_OSERR;
    pyc_error_t err;
    if (sfs == NULL || st == NULL || cfs == NULL || alive == NULL || which == NULL || list == NULL) {
        cli_err("out of memory");
        goto out;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        st[i] = cli_session_state(names[i], &sfs[i], 0, &err);
        if (st[i] == CLI_LIVE) {
            cfs[k] = &sfs[i].cf;
            which[k++] = i;
        }
    }
    if (pyc_client_heartbeat(cfs, k, 1000, alive, &err) < 0) {
        cli_err("%s", err.text);
        goto out;
    }
    for (size_t j = 0; j < k; j++) {
        if (!alive[j] && (st[which[j]] = cli_silent_state(&sfs[which[j]])) == CLI_STALE)
            cli_notice_gone(names[which[j]], &sfs[which[j]]);
    }
    if (!as_json && n > 0)
        printf("%-24s %8s  %-20s  %-6s  %s\n", "NAME", "PID", "STATE", "AGE", "CHECKPOINT");
    double now = pyc_wall_s();
    for (size_t i = 0; i < n; i++) {
        const char *state = st[i] == CLI_LIVE           ? "live"
                            : st[i] == CLI_UNRESPONSIVE ? "unresponsive"
                            : st[i] == CLI_MISSING      ? NULL
                                                        : "stale";
        char why[16], ended[64];
        json_t *closed = NULL;
        char *checkpoint = NULL;
        if (state == NULL)
            continue;            /* removed since the directory was read */
        /* A stale session's work is in its checkpoint: `pyc new NAME --replay` brings it back. */
        if (st[i] == CLI_STALE)
            checkpoint = cli_checkpoint_of(names[i], sfs[i].pid);
        /* A stale session says what ended it, when its kernel (or a pyc) recorded it in the event log. */
        if (st[i] == CLI_STALE && sfs[i].pid > 0 && (closed = cli_event_closing(names[i], sfs[i].pid)) != NULL) {
            cli_closed_state(closed, ended, sizeof ended);
            if (!as_json)
                state = ended;
        }
        /* Another pyc holds the name's lock: what it does says more than a heartbeat in the middle of it. */
        if (cli_locked(names[i], why, sizeof why)) {
            if (strcmp(why, "kill") == 0)
                state = "ending";
            else if (st[i] != CLI_LIVE)
                state = strcmp(why, "new") == 0 || strcmp(why, "fork") == 0 ? "starting" : "busy";
        }
        double created = sfs[i].created;
        if (created <= 0) {
            char path[4096];
            struct stat sb;
            if (cli_session_path(path, sizeof path, names[i], ".json") == 0 && stat(path, &sb) == 0)
                created = (double)sb.st_mtime;
        }
        double age = created > 0 ? now - created : 0;
        if (as_json) {
            char path[4096];
            if (cli_session_path(path, sizeof path, names[i], ".json") < 0) {
                json_decref(closed);
                free(checkpoint);
                goto out;
            }
            json_t *o = json_pack("{s:s, s:o, s:s, s:f, s:s}", "name", names[i], "pid",
                                  sfs[i].pid > 0 ? json_integer(sfs[i].pid) : json_null(), "state", state, "age",
                                  age, "connection_file", path);
            if (o != NULL && closed != NULL) {
                json_object_set(o, "reason", json_object_get(closed, "reason"));
                if (json_object_get(closed, "signal") != NULL)
                    json_object_set(o, "signal", json_object_get(closed, "signal"));
            }
            if (o != NULL && st[i] == CLI_STALE)
                json_object_set_new(o, "checkpoint", checkpoint != NULL ? json_string(checkpoint) : json_null());
            json_decref(closed);
            free(checkpoint);
            if (o == NULL || json_array_append_new(list, o) < 0) {
                cli_err("out of memory");
                goto out;
            }
        } else {
            char agetext[32], pid[24];
            format_age(age, agetext, sizeof agetext);
            if (sfs[i].pid > 0)
                snprintf(pid, sizeof pid, "%ld", sfs[i].pid);
            else
                snprintf(pid, sizeof pid, "-");
            /* The path is the last column: it may hold spaces, and the rest of the line is all of it. */
            printf("%-24s %8s  %-20s  %-6s  %s\n", names[i], pid, state, agetext,
                   checkpoint != NULL ? checkpoint : "-");
            json_decref(closed);
            free(checkpoint);
        }
    }
    if (as_json)
        cli_print_json_line(list);
    rc = PYC_EXIT_OK;
out:
    json_decref(list);
    if (sfs != NULL) {
        for (size_t i = 0; i < n; i++)
            pyc_session_file_clear(&sfs[i]);
    }
    free(sfs);
    free(st);
    free(cfs);
    free(alive);
    free(which);
    free_names(names, n);
    return rc;
}
