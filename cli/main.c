/*
 * main.c -- the `pyc` program: persistent named Python sessions (pyc kernels) from any shell.
 *
 *   pyc new NAME                      start a detached kernel named NAME
 *   pyc run NAME CODE|@FILE|-         run one cell, print what it produced
 *   pyc ls | status | vars | complete | int | kill | fork | cp | attach | events
 *
 * This file only dispatches: the commands, their synopses, help and options are the table of commands.c, and
 * cli.h says which file holds each command.
 *
 * The client is C all the way and links only jansson and libc, so a `pyc run` costs a few milliseconds from
 * exec to exit: it speaks ZMTP 3.0 itself (src/client/zmtp*.c) instead of linking libzmq, signs and checks
 * messages with its own SHA-256 (hmac.h's builtin backend, src/crypto/hmac_builtin.c) instead of loading
 * libcrypto, and starts no Python.  Exit codes are in cli.h and in the help text.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "config.h"

/* `pyc --help`: the overview, one line per command of the table (its synopsis up to the options). */
static void
usage(FILE *f)
{
    fprintf(f, "usage: pyc COMMAND [ARGS]   (pyc COMMAND --help for more)\n"
               "Persistent named Python sessions (pyc kernels) for shells and agents.\n\n");
    for (size_t i = 0; i < cli_ncommands; i++) {
        const char *syn = cli_commands[i].synopsis, *opts = strstr(syn, " [");
        int len = opts != NULL ? (int)(opts - syn) : (int)strlen(syn);
        fprintf(f, "  pyc %-*.*s  %s\n", 22, len, syn, cli_commands[i].summary);
    }
    fprintf(f, "\nNames: a-z, 0-9, '_', '-', 1 to 80 characters.  Sessions live in Jupyter's runtime dir as\n"
               "pyc-NAME.json, so `jupyter console --existing pyc-NAME.json` reaches them too.\n\n"
               "Exit codes: 0 ok; 1 the cell raised; n the cell's SystemExit(n) (run, poll).  pyc's own\n"
               "outcomes use the sysexits range, which cells do not use by convention: 64 usage; 65 the kernel\n"
               "refused the request; 66 a local file or stdin could not be read; 67 no such session, or stale;\n"
               "69 the kernel did not start or answer (stopped, stuck); 70 the session was lost: the kernel\n"
               "ended during the request (a crash, a stuck cell, its lifetime, memory); 71 memory or a system\n"
               "call failed; 73 name already taken; 74 a file or stdout could not be written; 75 pyc poll:\n"
               "not done yet; 76 the kernel's messages do not verify (another key) or make no sense; 77 the\n"
               "runtime dir is unusable; 124 the cell passed --timeout and was stopped, the session is intact;\n"
               "130 interrupted by Ctrl-C; 141 stdout's reader went away (pyc run ... | head).  With --json,\n"
               "run and poll end with {\"type\": \"outcome\", \"outcome\", \"exit\", \"by\": \"cell\"|\"pyc\"}.\n"
               "A wait on a kernel whose heartbeat is silent for 3 s (PYC_CLI_HB_MS) ends with exit 69.\n");
}

/* True when the words after the subcommand hold word, or alt when not NULL (before any "--"), whether or not
 * they parse: --help is answered, and the outcome line of a command whose words were refused is still asked
 * for by --json. */
static bool
has_word(int argc, char **argv, const char *word, const char *alt)
{
    for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], word) == 0 || (alt != NULL && strcmp(argv[i], alt) == 0))
            return true;
    }
    return false;
}

static bool
wants_help(int argc, char **argv)
{
    return has_word(argc, argv, "--help", "-h");
}

/* Runs cmd with the words after its name, in this order: the runtime dir (every command works there, so an
 * unusable one is refused once, here, with PYC_EXIT_NOPERM, though not for --help), the options
 * (PYC_EXIT_USAGE), --help (exit 0), the number of positional words (PYC_EXIT_USAGE), then the command.
 * *one_cell: false when the words were read and are fewer than the command's most (`poll NAME` lists the
 * journal and gets no outcome line; `poll NAME ID` does). */
static int
run_command(const cli_command_t *cmd, int argc, char **argv, bool *one_cell)
{
    char dir[4096];
    cli_args_t a;
    *one_cell = true;            /* until the words are known: a refused command still gets its line */
    if (!wants_help(argc, argv) && cli_runtime_dir(dir, sizeof dir) < 0)
        return PYC_EXIT_NOPERM;
    if (cli_parse(cmd->name, argc, argv, cmd->specs, cmd->nspecs, &a) < 0)
        return PYC_EXIT_USAGE;
    if (a.help) {
        cli_command_help(cmd);
        return PYC_EXIT_OK;
    }
    pyc_args_give_back(&a, cmd->min_pos);   /* `pyc new --replay NAME`: NAME is the session's */
    if (a.npos < cmd->min_pos || (cmd->max_pos >= 0 && a.npos > cmd->max_pos))
        return cli_usage_error(cmd->name);
    *one_cell = a.npos == cmd->max_pos;
    int rc = cmd->fn(&a);
    return rc == CLI_BAD_USAGE ? cli_usage_error(cmd->name) : rc;
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
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        const cli_command_t *cmd = argc >= 3 && strcmp(name, "help") == 0 ? cli_command_find(argv[2]) : NULL;
        if (cmd != NULL)
            cli_command_help(cmd);
        else
            usage(stdout);
        return cli_stdout_finish(PYC_EXIT_OK);
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("pyc %s\n", PACKAGE_VERSION);
        return cli_stdout_finish(PYC_EXIT_OK);
    }
    const cli_command_t *cmd = cli_command_find(name);
    if (cmd == NULL) {
        cli_err("unknown command '%s'", name);
        usage(stderr);
        return PYC_EXIT_USAGE;
    }
    bool one_cell;
    int rc = run_command(cmd, argc - 2, argv + 2, &one_cell);
    if (cmd->outcome_line && one_cell && has_word(argc - 2, argv + 2, "--json", NULL) &&
        !wants_help(argc - 2, argv + 2))
        cli_outcome_line(rc);
    return cli_stdout_finish(rc);
}
