/*
 * main.c -- the `pyc` program: persistent named Python sessions (pyc kernels) from any shell.
 *
 *   pyc new NAME                      start a detached kernel named NAME
 *   pyc run NAME CODE|@FILE|-         run one cell, print what it produced
 *   pyc ls | status | vars | complete | int | kill | fork | cp | attach
 *
 * The client is C all the way and links only jansson and libc, so a `pyc run` costs a few milliseconds from
 * exec to exit: it speaks ZMTP 3.0 itself (src/client/zmtp.c) instead of linking libzmq, signs and checks
 * messages with its own SHA-256 (hmac.h's builtin backend, src/crypto/hmac_builtin.c) instead of loading
 * libcrypto, and starts no Python.  Exit codes are in cli.h and in the help text.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "config.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *line;
} command_t;

static const command_t commands[] = {
    {"new", cli_new, "new NAME [--replace]        start a detached kernel as session NAME"},
    {"run", cli_run, "run NAME CODE|@FILE|-       run one cell [--json] [--timeout S] [--isolate]"},
    {"ls", cli_ls, "ls [--json]                 list sessions: name, pid, state (live/unresponsive/stale), age"},
    {"status", cli_status, "status NAME                 JSON: pid, uptime, execution count, memory, busy/idle"},
    {"vars", cli_vars, "vars NAME                   JSON list of the user's names and types"},
    {"complete", cli_complete, "complete NAME TEXT          the kernel's completions of TEXT"},
    {"int", cli_int, "int NAME                    interrupt the running cell"},
    {"kill", cli_kill, "kill NAME... | --all        shut down and remove (cleans stale sessions too)"},
    {"fork", cli_fork, "fork NAME NEWNAME...        new sessions from forked copies of NAME"},
    {"cp", cli_cp, "cp SRC DST                  copy objects: SESSION:VAR, SESSION:, FILE.pkl, -"},
    {"attach", cli_attach, "attach NAME                 a REPL into NAME (Ctrl-D detaches)"},
};

static void
usage(FILE *f)
{
    fprintf(f, "usage: pyc COMMAND [ARGS]   (pyc COMMAND --help for more)\n"
               "Persistent named Python sessions (pyc kernels) for shells and agents.\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  pyc %s\n", commands[i].line);
    fprintf(f, "\nNames: a-z, 0-9, '_', '-', 1 to 80 characters.  Sessions live in Jupyter's runtime dir as\n"
               "pyc-NAME.json, so `jupyter console --existing pyc-NAME.json` reaches them too.\n\n"
               "Exit codes: 0 ok; 1 the cell raised (or the kernel refused, or a file or stdout failed);\n"
               "2 usage; 3 no such session, or stale; 4 name already taken; 5 the cell passed --timeout;\n"
               "6 kernel did not start, answer, or died, or the runtime dir is unusable; 130 interrupted\n"
               "by Ctrl-C; 141 stdout's reader went away (pyc run ... | head).\n");
}

/* True when the words after the subcommand ask for its help (before any "--"). */
static bool
wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return true;
    }
    return false;
}

int
main(int argc, char **argv)
{
    /* Output may go to a pipe that closes early (`pyc run ... | head`): a failed write is seen by its return
     * value (EPIPE), not by a signal, so that the command ends cleanly (cli_stdout_finish: exit 141, quietly)
     * and a failure of another kind (a full disk) is reported. */
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        usage(stderr);
        return PYC_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        if (argc >= 3 && strcmp(cmd, "help") == 0) {
            for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
                if (strcmp(argv[2], commands[i].name) == 0) {
                    char *help[] = {(char *)"--help", NULL};
                    return cli_stdout_finish(commands[i].fn(1, help));
                }
            }
        }
        usage(stdout);
        return cli_stdout_finish(PYC_EXIT_OK);
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("pyc %s\n", PACKAGE_VERSION);
        return cli_stdout_finish(PYC_EXIT_OK);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(cmd, commands[i].name) == 0) {
            /* Every command works in the runtime dir: an unusable one is refused once, here. */
            char dir[4096];
            if (!wants_help(argc - 2, argv + 2) && cli_runtime_dir(dir, sizeof dir) < 0)
                return PYC_EXIT_CONNECTION;
            int rc = commands[i].fn(argc - 2, argv + 2);
            rc = cli_stdout_finish(rc);
            return rc;
        }
    }
    cli_err("unknown command '%s'", cmd);
    usage(stderr);
    return PYC_EXIT_USAGE;
}
