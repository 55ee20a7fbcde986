/*
 * commands.c -- the command table of `pyc`, in the manner of redis's: one entry per subcommand, with its
 * synopsis, its help and its options, from which main.c makes `pyc --help`, `pyc CMD --help`, the parsing of
 * the words after CMD and the usage error when their number is wrong.  Each usage line is written here once.
 *
 * A command's options are indexed by the enum of its name in cli.h (CLI_RUN_TIMEOUT is --timeout of `run`):
 * the specs below are designated initializers of those indexes, so that the order of the table and the
 * names the commands read (a->value[CLI_RUN_TIMEOUT]) cannot drift apart.
 *
 * A synopsis lists the positional words, then the options in brackets; main.c's overview shows it up to its
 * first " [", so each option is described once, by `pyc CMD --help`.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const cli_optspec_t new_opts[CLI_NEW_NOPTS] = {
    [CLI_NEW_REPLACE] = {"replace", false, 0},
    [CLI_NEW_KERNEL] = {"kernel", true, 0},
    [CLI_NEW_JSON] = {"json", false, 0},
    [CLI_NEW_TIMEOUT] = {"timeout", true, 0},
    [CLI_NEW_CURVE] = {"curve", false, 0},
    [CLI_NEW_PYTHON] = {"python", true, 0},
    [CLI_NEW_NO_ENV] = {"no-env", false, 0},
    [CLI_NEW_IDLE] = {"idle", true, 0},
    [CLI_NEW_LIFETIME] = {"lifetime", true, 0},
    [CLI_NEW_CELL_TIMEOUT] = {"cell-timeout", true, 0},
    [CLI_NEW_OUTPUT_LIMIT] = {"output-limit", true, 0},
    [CLI_NEW_MEMORY] = {"memory", true, 0},
    [CLI_NEW_REPLAY] = {"replay", PYC_ARG_OPTIONAL_WORD, 0},
    [CLI_NEW_EVENT_OUTPUT] = {"event-output", true, 0},
    [CLI_NEW_CELL_CPU] = {"cell-cpu", true, 0},
    [CLI_NEW_OPEN_FILES] = {"open-files", true, 0},
    [CLI_NEW_FROM] = {"from", true, 0},
};

static const cli_optspec_t run_opts[CLI_RUN_NOPTS] = {
    [CLI_RUN_JSON] = {"json", false, 0},
    [CLI_RUN_TIMEOUT] = {"timeout", true, 0},
    [CLI_RUN_ISOLATE] = {"isolate", false, 0},
};

static const cli_optspec_t ls_opts[CLI_LS_NOPTS] = {
    [CLI_LS_JSON] = {"json", false, 0},
};

static const cli_optspec_t complete_opts[CLI_COMPLETE_NOPTS] = {
    [CLI_COMPLETE_JSON] = {"json", false, 0},
};

static const cli_optspec_t kill_opts[CLI_KILL_NOPTS] = {
    [CLI_KILL_ALL] = {"all", false, 0},
};

static const cli_optspec_t fork_opts[CLI_FORK_NOPTS] = {
    [CLI_FORK_JSON] = {"json", false, 0},
};

static const cli_optspec_t snap_opts[CLI_SNAP_NOPTS] = {
    [CLI_SNAP_JSON] = {"json", false, 0},
};

static const cli_optspec_t cp_opts[CLI_CP_NOPTS] = {
    [CLI_CP_TIMEOUT] = {"timeout", true, 0},
};

static const cli_optspec_t fire_opts[CLI_FIRE_NOPTS] = {
    [CLI_FIRE_JSON] = {"json", false, 0},
    [CLI_FIRE_TIMEOUT] = {"timeout", true, 0},
    [CLI_FIRE_ISOLATE] = {"isolate", false, 0},
};

static const cli_optspec_t poll_opts[CLI_POLL_NOPTS] = {
    [CLI_POLL_JSON] = {"json", false, 0},
    [CLI_POLL_WAIT] = {"wait", PYC_ARG_OPTIONAL, 0},
};

static const cli_optspec_t events_opts[CLI_EVENTS_NOPTS] = {
    [CLI_EVENTS_FOLLOW] = {"follow", false, 0},
    [CLI_EVENTS_SINCE] = {"since", true, 0},
    [CLI_EVENTS_JSON] = {"json", false, 0},
};

#define OPTS(a) (a), (int)(sizeof(a) / sizeof(a)[0])
#define NO_OPTS NULL, 0

const cli_command_t cli_commands[] = {
    {"new", cli_new,
     "new NAME [--replace] [--kernel PATH|SPEC] [--timeout S] [--curve] [--python PATH | --no-env] [--json]"
     " [--idle S] [--lifetime S] [--cell-timeout S] [--cell-cpu S] [--output-limit BYTES] [--memory BYTES]"
     " [--open-files N] [--replay [FILE]] [--event-output BYTES] [--from SOURCE]",
     "start a detached kernel as session NAME",
     "Starts a detached pyc kernel as session NAME and prints its connection file.\n"
     "A live or unresponsive NAME is refused (exit 73) unless --replace; a stale one is cleaned first.\n"
     "Limits, kept by the kernel (S: seconds or 250ms, 30s, 5m, 2h; BYTES: or 512K, 100M, 2G; 0: none):\n"
     "  --idle S          end the session after S without a request (default 24h, or $PYC_IDLE_TIMEOUT)\n"
     "  --lifetime S      end it S after its start (default 168h, or $PYC_LIFETIME)\n"
     "  --cell-timeout S  stop a cell that runs longer than S (CellTimeout; the session goes on; default 1h,\n"
     "                    or $PYC_CELL_TIMEOUT)\n"
     "  --cell-cpu S      stop a cell that spends S of CPU time (CellCPUTimeout; the session goes on)\n"
     "  --output-limit BYTES  drop a cell's output past BYTES (default 32M, or $PYC_OUTPUT_LIMIT)\n"
     "  --memory BYTES    let the session allocate at most BYTES more than at its start (MemoryError)\n"
     "  --open-files N    let the session open at most N files beyond the kernel's own (OSError EMFILE)\n"
     "--replay FILE runs a checkpoint's cells (pyc status shows a session's checkpoint) before the session\n"
     "answers; it counts against --timeout (default 60 s).  --replay without FILE takes the newest checkpoint\n"
     "of NAME that holds a cell (named on stderr).\n"
     "--event-output BYTES puts the first BYTES (at most 4096) of each cell's output into its cell_done event.\n"
     "--curve gives the session CURVE keys: its traffic is encrypted, and clients must know its public key.\n"
     "--kernel names the pyc-kernel program, or a kernelspec (its program and its env).\n"
     "The kernel runs in the active Python environment ($VIRTUAL_ENV, $CONDA_PREFIX, a venv's python3 on\n"
     "PATH), or the one --python names (a folder, or an interpreter in it); --no-env: in none.\n"
     "--from SOURCE makes NAME a fork of SOURCE instead of a new kernel: of the live session SOURCE, or of the\n"
     "warm template SOURCE (a kernelspec installed with pyc-kernel install --template SOURCE, once a kernel\n"
     "of it has started), with its imports done; NAME has SOURCE's environment and limits, so --from takes\n"
     "only --replace and --json.",
     OPTS(new_opts), 1, 1, false},
    {"run", cli_run, "run NAME CODE|@FILE|- [--json] [--timeout S] [--isolate]",
     "run one cell and print what it produces",
     "Runs one cell in session NAME: stdout to stdout, stderr and tracebacks to stderr (in color only on a\n"
     "terminal, and without NO_COLOR), results as text.  --isolate runs it in a forked child of the kernel\n"
     "and lists on stderr the names it bound that could not be merged back.\n"
     "Exit 0, 1 when the cell raised, n when it raised SystemExit(n) (no traceback): the cell's own status,\n"
     "as a script's.  pyc's own outcomes are 64-77 and 124 (pyc --help lists them): 66 when @FILE or stdin\n"
     "could not be read, 67 no such session, 124 when the cell passed --timeout and was stopped (the session\n"
     "is intact), 69 when the kernel does not answer (stopped, stuck; or --timeout S and no reply S + 5 +\n"
     "max(5, S/10) s after sending), 76 when it ignores our key, 70 when the session was lost\n"
     "(the kernel ended during the cell: a crash, and the error says why), 130 when interrupted with\n"
     "Ctrl-C, 141 when stdout's reader went away (the cell goes on).  --json ends with one outcome line,\n"
     "{\"type\": \"outcome\", \"outcome\": WORD, \"exit\": N, \"by\": \"cell\"|\"pyc\", \"message\"}, which\n"
     "says whose the exit code is without relying on the number.",
     OPTS(run_opts), 2, 2, true},
    {"fire", cli_fire, "fire NAME CODE|@FILE|- [--json] [--timeout S] [--isolate]",
     "start a cell and print its id at once (pyc poll follows it)",
     "Queues one cell in session NAME and prints its id (the execute_request's msg_id) as soon as the\n"
     "kernel has it; the cell runs whether or not anything waits for it.  --json prints {id, session, state}.\n"
     "--timeout and --isolate are run's.  pyc poll NAME ID tells what became of it.",
     OPTS(fire_opts), 2, 2, false},
    {"poll", cli_poll, "poll NAME [ID] [--wait[=S]] [--json]",
     "a fired (or any) cell's state, and once done its output",
     "Asks session NAME's journal about cell ID (a fire's id, or any execute_request's msg_id): queued or\n"
     "running (printed; exit 75), or done: its output and exit code as pyc run would have given them.\n"
     "--wait waits until it is done (--wait=S: at most S seconds).  Without ID: the journal, one cell a\n"
     "line (id, state, status, execution count).  A cell the journal no longer holds is exit 67.  --json\n"
     "of one cell ends with run's outcome line.",
     OPTS(poll_opts), 1, 2, true},
    {"ls", cli_ls, "ls [--json]",
     "list sessions: name, pid, state (live/unresponsive/stale), age",
     "Lists the sessions: NAME PID STATE AGE CHECKPOINT.  STATE is live (the heartbeat answers within 1 s),\n"
     "unresponsive (the kernel's process is alive but its heartbeat is silent: stopped, or stuck),\n"
     "stale (its kernel is gone; what ended it when the event log says: crashed (SIGSEGV), ended (idle\n"
     "timeout), ...; --json adds \"reason\"), starting (a pyc new or fork is making it), ending (a pyc kill\n"
     "is ending it), or busy (another pyc holds its lock).  CHECKPOINT, for a stale session, is the file of\n"
     "its cells (pyc new NAME --replay brings them back), else -; --json: \"checkpoint\" (null: none).",
     OPTS(ls_opts), 0, 0, false},
    {"status", cli_status, "status NAME",
     "JSON: pid, uptime, execution count, memory, busy/idle",
     "Prints a JSON object: name, pid, state (idle or busy), execution_count (null when busy and the\n"
     "kernel has no usage_request), uptime (s), memory {rss, pss, kernel_memory} in bytes,\n"
     "connection_file, limits {idle_timeout, lifetime, cell_timeout, cell_cpu (s), output_limit,\n"
     "memory_limit (bytes), open_files: null when off, and any other the kernel keeps}, checkpoint\n"
     "(the file pyc new --replay takes; null when off), and usage (the kernel's usage_reply, when it has\n"
     "one).  A kernel whose heartbeat is silent (stopped, or stuck) has state unresponsive, and the exit\n"
     "code is 69.  A session whose kernel is gone (or that is gone, with a checkpoint of its name left)\n"
     "exits 67 and prints {name, pid, state: stale or none, reason, checkpoint, replay: the command that\n"
     "brings it back}.",
     NO_OPTS, 1, 1, false},
    {"vars", cli_vars, "vars NAME",
     "JSON list of the user's names and types",
     "Prints the session's user namespace as a JSON list of {\"name\", \"type\"}, sorted by name.  Names\n"
     "starting with '_' and In, Out, get_ipython, exit, quit are left out; modules have type \"module\".",
     NO_OPTS, 1, 1, false},
    {"complete", cli_complete, "complete NAME TEXT [--json]",
     "the kernel's completions of TEXT",
     "Prints the kernel's completions of TEXT (cursor at its end), one per line; --json prints the\n"
     "complete_reply's content (matches, cursor_start, cursor_end, metadata).",
     OPTS(complete_opts), 2, 2, false},
    {"int", cli_int, "int NAME",
     "interrupt the running cell",
     "Interrupts the running cell of session NAME (interrupt_request on the control channel); the cell\n"
     "gets KeyboardInterrupt.  Does nothing to an idle kernel.",
     NO_OPTS, 1, 1, false},
    {"kill", cli_kill, "kill NAME... | --all",
     "shut down and remove (cleans stale sessions too)",
     "Shuts the sessions' kernels down (SIGKILL after 5 s; at once for an unresponsive one) and removes\n"
     "their files; cleans stale ones, and the log a failed pyc new left.",
     OPTS(kill_opts), 0, -1, false},
    {"fork", cli_fork, "fork NAME NEWNAME... [--json]",
     "new sessions from forked copies of NAME",
     "Forks session NAME's kernel into one child per NEWNAME, each a session of its own with a copy of\n"
     "NAME's state (copy-on-write).  The children outlive NAME.  Prints their connection files.\n"
     "A NEWNAME that is live (or unresponsive) is refused (exit 73).  The request waits for a running cell\n"
     "to end, as long as the kernel lives; Ctrl-C stops waiting (exit 130).",
     OPTS(fork_opts), 2, -1, false},
    {"snapshot", cli_snapshot, "snapshot NAME [SNAP] [--json]",
     "a snapshot of NAME's state, to go back to with pyc undo",
     "Takes a snapshot of session NAME's kernel (README, \"Time travel\"): a parked copy-on-write fork that\n"
     "holds the state after the last finished cell and costs only the pages the kernel writes from then\n"
     "on.  SNAP names it (default snapshot-N); a name taken again is the newer state.  Prints the name;\n"
     "--json the snapshot's record.  It waits for a running cell to end.",
     OPTS(snap_opts), 1, 2, false},
    {"snapshots", cli_snapshots, "snapshots NAME [--json]",
     "NAME's snapshots: name, cells held, age, memory",
     "Lists session NAME's snapshots, oldest first: NAME, -N (what pyc undo NAME N takes), the execution\n"
     "count they hold, when taken, and the memory each really holds (the pages written since on either\n"
     "side), then what each does not hold (threads, network connections, GPU contexts).  --json prints\n"
     "the kernel's answer.",
     OPTS(snap_opts), 1, 1, false},
    {"undo", cli_undo, "undo NAME [N|SNAP] [--json]",
     "take NAME back to a snapshot (default: the newest)",
     "Restores session NAME's kernel to its Nth newest snapshot (default 1) or to the snapshot SNAP, and\n"
     "returns once the restored kernel answers.  It stays the same session: same pid, ports and key; the\n"
     "execution count goes on.  The snapshot stays, for another undo.  It waits for a running cell to end.",
     OPTS(snap_opts), 1, 2, false},
    {"cp", cli_cp, "cp SRC DST [--timeout S]",
     "copy objects: SESSION:VAR, SESSION:, FILE.pkl, -",
     "Copies objects as pickles.  A side is SESSION:VAR (a variable), SESSION: (every picklable user\n"
     "name, as one dict), a pickle file path, or - (stdin/stdout).  Names left out are listed on stderr\n"
     "with why: those that cannot be pickled, and (for SESSION:) modules, to re-import.\n"
     "Examples: pyc cp work:df df.pkl; pyc cp df.pkl gpu:df; pyc cp work: other:\n"
     "--timeout S (default 600): a kernel that does not answer a request in time (it is running a long\n"
     "cell) ends the copy with exit 69.",
     OPTS(cp_opts), 2, 2, false},
    {"events", cli_events, "events [NAME...] [--follow] [--since SEQ] [--json]",
     "the sessions' event log: ready, cells, how each ended",
     "Prints the event log of all sessions (or of the NAMEs), one event a line: SEQ TIME SESSION PID EVENT\n"
     "and details; --json prints each event's JSON object {\"seq\", \"time\", \"session\", \"pid\",\n"
     "\"event\", ...}.  Events: ready, cell_started and cell_done (id: the execute_request's msg_id,\n"
     "outcome), closed (reason: shutdown, killed, replaced, idle_timeout, lifetime, crashed with signal and\n"
     "traceback, out_of_memory, stuck, parent_gone, terminated (SIGTERM), or vanished: gone without a word).\n"
     "--since SEQ prints only the events after SEQ (a seq printed before: the cursor to resume from); events\n"
     "the log dropped since (it rotates) come first as one gap event {from, to, lost}, and a SEQ past the\n"
     "newest event is exit 64.  cell_done has output_bytes, output_messages and, with pyc new --event-output,\n"
     "output_head; ready and closed name the session's checkpoint.\n"
     "--follow keeps printing new events until Ctrl-C (exit 130) or until stdout's reader goes away.",
     OPTS(events_opts), 0, -1, false},
    {"attach", cli_attach, "attach NAME",
     "a REPL into NAME (Ctrl-D detaches)",
     "A line REPL into session NAME: each complete block is one cell; Tab completes through the kernel;\n"
     "Ctrl-C interrupts the running cell (or drops the block being typed); Ctrl-D detaches and leaves\n"
     "the session running.",
     NO_OPTS, 1, 1, false},
};

const size_t cli_ncommands = sizeof cli_commands / sizeof cli_commands[0];

const cli_command_t *
cli_command_find(const char *name)
{
    for (size_t i = 0; i < cli_ncommands; i++) {
        if (strcmp(cli_commands[i].name, name) == 0)
            return &cli_commands[i];
    }
    return NULL;
}

void
cli_command_help(const cli_command_t *cmd)
{
    printf("usage: pyc %s\n%s\n", cmd->synopsis, cmd->help);
}

int
cli_usage_error(const char *name)
{
    const cli_command_t *cmd = cli_command_find(name);
    if (cmd != NULL)
        cli_err("%s: usage: pyc %s", name, cmd->synopsis);
    return PYC_EXIT_USAGE;
}
