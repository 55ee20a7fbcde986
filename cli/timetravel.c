/*
 * timetravel.c -- `pyc snapshot`, `pyc snapshots` and `pyc undo` (README, "Time travel"): the comm target
 * pyc.snapshot of a session's kernel, as pyc_client.snapshot, snapshots and restore use it.
 *
 * An undo hands the kernel over to the snapshot's process, which serves the same ports: the connection this
 * command made is dropped by the old process, so the command connects again until the kernel that answers
 * is the restored one (its pid is in the restore's answer), and only then returns, so that the next pyc run
 * sees the restored state.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proc.h"

#define UNDO_WAIT_S 30.0         /* how long an undo waits for the restored kernel to answer */

/* The number of threads of process pid (0 when it is gone). */
static int
threads_of(long pid)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    if (pyc_proc_read_small(path, buf, sizeof buf) <= 0)
        return 0;
    const char *t = strstr(buf, "\nThreads:");
    return t != NULL ? (int)strtol(t + 9, NULL, 10) : 0;
}

/* Sends data to pyc.snapshot of session name and returns the answer's data (a new reference), or NULL with
 * *rc set (printed).  Requests wait for a running cell as long as the kernel lives (timeout 0). */
static json_t *
snapshot_request(const char *name, json_t *data, double timeout, int *rc)
{
    pyc_session_file_t sf;
    pyc_client_t *cl = cli_connect(name, &sf, true, false, rc);
    if (cl == NULL)
        return NULL;
    pyc_msg_t *answer = cli_comm_request(cl, name, "pyc.snapshot", data, NULL, 0, timeout, rc);
    json_t *out = answer != NULL && *rc == PYC_EXIT_OK ? json_incref(json_object_get(answer->content, "data")) : NULL;
    pyc_msg_destroy(&answer);
    pyc_client_destroy(&cl);
    pyc_session_file_clear(&sf);
    return out;
}

static void
print_size(unsigned long long n)
{
    if (n < 1024)
        printf("%llu B", n);
    else if (n < (1ull << 20))
        printf("%.1f KiB", (double)n / 1024);
    else if (n < (1ull << 30))
        printf("%.1f MiB", (double)n / (1 << 20));
    else
        printf("%.2f GiB", (double)n / (1 << 30));
}

int
cli_snapshot(const cli_args_t *a)
{
    int rc;
    cli_catch_sigint();
    json_t *data = json_pack("{s:s}", "op", "take");
    if (a->npos > 1)
        json_object_set_new(data, "name", json_string(a->pos[1]));
    json_t *answer = snapshot_request(a->pos[0], data, 0, &rc);
    json_decref(data);
    if (answer == NULL)
        return rc;
    json_t *snap = json_object_get(answer, "snapshot");
    if (a->value[CLI_SNAP_JSON] != NULL)
        cli_print_json_line(snap);
    else
        puts(json_string_value(json_object_get(snap, "name")) != NULL ? json_string_value(json_object_get(snap, "name"))
                                                                      : "?");
    json_decref(answer);
    return PYC_EXIT_OK;
}

int
cli_snapshots(const cli_args_t *a)
{
    int rc;
    cli_catch_sigint();
    json_t *data = json_pack("{s:s}", "op", "list");
    json_t *answer = snapshot_request(a->pos[0], data, 0, &rc);
    json_decref(data);
    if (answer == NULL)
        return rc;
    if (a->value[CLI_SNAP_JSON] != NULL) {
        cli_print_json_line(answer);
        json_decref(answer);
        return PYC_EXIT_OK;
    }
    json_t *list = json_object_get(answer, "snapshots");
    size_t n = json_array_size(list), i;
    json_t *s;
    time_t now = time(NULL);
    json_array_foreach(list, i, s) {
        json_t *bytes = json_object_get(s, "bytes");
        printf("%-20s -%-3zu In[%lld]  %4.0f s ago  ", json_string_value(json_object_get(s, "name")), n - i,
               (long long)json_integer_value(json_object_get(s, "execution_count")),
               difftime(now, (time_t)json_number_value(json_object_get(s, "taken"))));
        if (json_is_integer(bytes))
            print_size((unsigned long long)json_integer_value(bytes));
        else
            printf("?");
        printf("%s\n", json_is_true(json_object_get(s, "automatic")) ? "  (automatic)" : "");
        size_t j;
        json_t *lost;
        json_array_foreach(json_object_get(s, "not_carried"), j, lost)
            printf("%-20s not in it: %s\n", "", json_string_value(lost));
    }
    if (n == 0)
        printf("no snapshots (pyc snapshot %s takes one)\n", a->pos[0]);
    json_decref(answer);
    return PYC_EXIT_OK;
}

int
cli_undo(const cli_args_t *a)
{
    int rc;
    char which[256];
    const char *arg = a->npos > 1 ? a->pos[1] : "1";
    char *end = NULL;
    long back = strtol(arg, &end, 10);
    if (end != NULL && *end == '\0' && end != arg) {
        if (back < 1) {
            cli_err("undo: N counts back from the newest snapshot, from 1");
            return PYC_EXIT_USAGE;
        }
        snprintf(which, sizeof which, "-%ld", back);
    } else {
        snprintf(which, sizeof which, "%s", arg);
    }
    cli_catch_sigint();
    json_t *data = json_pack("{s:s, s:s}", "op", "restore", "name", which);
    json_t *answer = snapshot_request(a->pos[0], data, 0, &rc);
    json_decref(data);
    if (answer == NULL)
        return rc;
    json_int_t pid = json_integer_value(json_object_get(answer, "pid"));
    /* A parked snapshot has one thread; the restored kernel starts its own once it serves the ports (which
     * the old one has let go by then): this command then asks it, to be sure it answers. */
    double deadline = pyc_now_s() + UNDO_WAIT_S;
    bool done = false;
    while (!done && pyc_now_s() < deadline && cli_sigint_count == 0) {
        if (threads_of((long)pid) > 1) {
            json_t *list = json_pack("{s:s}", "op", "list");
            json_t *got = snapshot_request(a->pos[0], list, UNDO_WAIT_S, &rc);
            json_decref(list);
            done = got != NULL && json_integer_value(json_object_get(got, "pid")) == pid;
            json_decref(got);
            break;
        }
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (a->value[CLI_SNAP_JSON] != NULL) {
        cli_print_json_line(answer);
    } else {
        printf("%s: back to %s (the state after In[%lld])\n", a->pos[0],
               json_string_value(json_object_get(answer, "restoring")),
               (long long)json_integer_value(json_object_get(answer, "execution_count")));
        size_t j;
        json_t *lost;
        json_array_foreach(json_object_get(answer, "not_carried"), j, lost)
            printf("  not in the snapshot: %s\n", json_string_value(lost));
    }
    json_decref(answer);
    return PYC_EXIT_OK;
}
