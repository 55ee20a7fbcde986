/*
 * attach.c -- `pyc attach NAME`: a line REPL into a live session.
 *
 * Each line is added to the block being typed; the kernel's is_complete_request says whether the block is a
 * whole cell ("complete" or "invalid": run it, the kernel reports the syntax error), or needs more lines
 * ("incomplete": a continuation prompt, pre-filled with the indent the kernel suggests).  An empty line
 * ends a block, as at Python's prompt.  Tab asks the kernel (complete_request) about the whole block up to
 * the cursor.  Ctrl-C at the prompt drops the block; while a cell runs it sends interrupt_request.  Ctrl-D
 * (end of input) detaches: the session keeps running.  input() in a cell reads a line from here.
 *
 * With GNU readline (configure finds it by pkg-config) lines are edited and kept in a history file,
 * <Jupyter data dir>/pyc/attach_history.  Readline reads its keys through getc_interruptible, so that
 * Ctrl-C abandons the line being typed (readline's own key reader waits again after a signal).  Without
 * readline, lines are read with getline(3) and there is no completion.
 */
#include "cli.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "buf.h"
#include "config.h"
#include "paths.h"

#ifdef HAVE_READLINE
#include <readline/history.h>
#include <readline/readline.h>
#endif

#define PS1 ">>> "
#define PS2 "... "
#define COMPLETE_WAIT_MS 5000
#define HISTORY_LINES 1000

enum { LINE_OK, LINE_EOF, LINE_CANCEL };

/* The connection and the block typed so far, for the completion callback (readline passes no context). */
static pyc_client_t *the_client;
static pyc_buf_t the_block;

/* Waits for the reply to request `id` on shell, up to ms; NULL when none came. */
static pyc_msg_t *
shell_reply(const char *id, int ms)
{
    pyc_error_t err;
    double deadline = cli_now() + ms / 1000.0;
    for (;;) {
        double left = deadline - cli_now();
        pyc_msg_t *m;
        int chan;
        if (left <= 0)
            return NULL;
        int r = pyc_client_recv(the_client, (int)(left * 1000) + 1, &m, &chan, &err);
        if (r == PYC_RECV_SIGNAL)
            return NULL;
        if (r == PYC_RECV_ERROR) {
            cli_err("%s", err.text);
            return NULL;
        }
        if (r != PYC_RECV_MSG)
            continue;
        if (chan == PYC_CHAN_SHELL && pyc_client_is_child_of(m, id))
            return m;
        pyc_msg_destroy(&m);
    }
}

/* Drops the iopub output of other clients that piled up while we waited at the prompt. */
static void
drain(void)
{
    pyc_error_t err;
    pyc_msg_t *m;
    int chan;
    while (pyc_client_recv(the_client, 0, &m, &chan, &err) == PYC_RECV_MSG)
        pyc_msg_destroy(&m);
}

/* ---- reading lines --------------------------------------------------------------------------------------- */

#ifdef HAVE_READLINE

static size_t
codepoints_n(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            k++;
    }
    return k;
}

/* Byte offset of code point cp in s (or its length). */
static size_t
offset_of(const char *s, size_t cp)
{
    size_t i = 0, k = 0;
    for (; s[i] != '\0'; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (k == cp)
                return i;
            k++;
        }
    }
    return i;
}

static const char *line_indent;
static volatile sig_atomic_t line_base;   /* cli_sigint_count when the line began */
static bool line_cancelled;

/* Readline's key source.  It waits in poll(2), where SIGINT (caught without SA_RESTART) interrupts it, and
 * ends the line on Ctrl-C: rl_done stops readline after this key, and key 0 (set-mark) changes nothing.
 * Readline's own rl_getc would instead wait again after the signal.  On a terminal, poll's answer is checked
 * with FIONREAD before read(2): ^C flushes the terminal's input, and a read of flushed input would wait for
 * the next key. */
static int
getc_interruptible(FILE *f)
{
    int fd = fileno(f);
    bool tty = isatty(fd);
    for (;;) {
        if (cli_sigint_count != line_base) {
            line_cancelled = true;
            rl_done = 1;
            return 0;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, 100);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return EOF;
        if (r == 0)
            continue;
        int avail = 1;
        if (tty && ioctl(fd, FIONREAD, &avail) == 0 && avail == 0) {
            if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
                return EOF;      /* the terminal is gone */
            continue;
        }
        unsigned char c;
        ssize_t n = read(fd, &c, 1);
        if (n == 1)
            return c;
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        return EOF;
    }
}

static int
insert_indent(void)
{
    if (line_indent != NULL && line_indent[0] != '\0') {
        rl_insert_text(line_indent);
        rl_redisplay();
    }
    return 0;
}

/* Completion: readline replaces the word from `start` to the cursor; the kernel replaces code points
 * [cursor_start, cursor_end) of the whole block.  Each match is turned into a replacement of readline's word:
 * text the kernel keeps before the word is added, text of the word the kernel replaces is checked and cut. */
static char **
complete(const char *text, int start, int end)
{
    (void)text;
    (void)end;
    rl_attempted_completion_over = 1;   /* never fall back to file names */
    pyc_buf_t code;
    pyc_buf_init(&code, 64u << 20);
    char **out = NULL;
    pyc_msg_t *reply = NULL;
    json_t *req = NULL;
    size_t base = codepoints_n(the_block.data != NULL ? the_block.data : "", the_block.len);
    if ((the_block.len > 0 && pyc_buf_add(&code, the_block.data, the_block.len) < 0) ||
        pyc_buf_add(&code, rl_line_buffer, (size_t)rl_point) < 0)
        goto out;
    size_t cursor = codepoints_n(code.data, code.len);
    if (pyc_buf_adds(&code, rl_line_buffer + rl_point) < 0)
        goto out;
    req = json_pack("{s:s, s:I}", "code", code.data, "cursor_pos", (json_int_t)cursor);
    char id[PYC_MSG_ID_LEN + 1];
    pyc_error_t err;
    if (req == NULL || pyc_client_send(the_client, PYC_CHAN_SHELL, "complete_request", req, NULL, NULL, NULL, 0, id, &err) < 0)
        goto out;
    if ((reply = shell_reply(id, COMPLETE_WAIT_MS)) == NULL)
        goto out;
    json_t *matches = json_object_get(reply->content, "matches");
    json_t *cs = json_object_get(reply->content, "cursor_start");
    if (!json_is_array(matches) || json_array_size(matches) == 0 || !json_is_integer(cs) ||
        json_integer_value(cs) < (json_int_t)base)
        goto out;
    size_t line_cs = (size_t)json_integer_value(cs) - base;        /* code points into the line */
    size_t start_cp = codepoints_n(rl_line_buffer, (size_t)start);
    size_t cs_byte = offset_of(rl_line_buffer, line_cs);
    size_t n = json_array_size(matches), k = 0;
    out = calloc(n + 2, sizeof *out);
    if (out == NULL)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const char *m = json_string_value(json_array_get(matches, i));
        char *c = NULL;
        if (m == NULL)
            continue;
        if (line_cs <= start_cp) {
            /* The kernel also replaces line[cs..start): the match must begin with it. */
            size_t keep = (size_t)start - cs_byte;
            if (strncmp(m, rl_line_buffer + cs_byte, keep) == 0)
                c = strdup(m + keep);
        } else {
            size_t pre = cs_byte - (size_t)start;
            c = malloc(pre + strlen(m) + 1);
            if (c != NULL) {
                memcpy(c, rl_line_buffer + start, pre);
                memcpy(c + pre, m, strlen(m) + 1);
            }
        }
        if (c != NULL)
            out[1 + k++] = c;
    }
    if (k == 0) {
        free(out);
        out = NULL;
        goto out;
    }
    /* out[0] is what replaces the word now: the longest common prefix of the candidates. */
    size_t common = strlen(out[1]);
    for (size_t i = 2; i <= k; i++) {
        size_t j = 0;
        while (j < common && out[i][j] == out[1][j])
            j++;
        common = j;
    }
    if (k == 1) {
        out[0] = out[1];
        out[1] = NULL;
    } else {
        out[0] = strndup(out[1], common);
        if (out[0] == NULL) {
            for (size_t i = 1; i <= k; i++)
                free(out[i]);
            free(out);
            out = NULL;
        }
    }
out:
    json_decref(req);
    pyc_msg_destroy(&reply);
    pyc_buf_free(&code);
    return out;
}

static int
read_line(const char *prompt, const char *indent, char **line)
{
    cli_sigint_count = 0;
    line_base = 0;
    line_cancelled = false;
    line_indent = indent;
    char *got = readline(prompt);
    line_indent = NULL;
    if (line_cancelled) {
        free(got);
        fputs("^C\n", stdout);
        fflush(stdout);
        return LINE_CANCEL;
    }
    if (got == NULL)
        return LINE_EOF;
    *line = got;
    return LINE_OK;
}

char *
cli_read_input(const char *prompt, bool password)
{
    if (!password) {
        /* Ctrl-C here ends the answer; cli_execute sees the count and interrupts the cell. */
        line_base = cli_sigint_count;
        line_cancelled = false;
        char *got = readline(prompt);
        if (line_cancelled) {
            free(got);
            fputc('\n', stdout);
            return NULL;
        }
        return got;
    }
    fputs(prompt, stdout);
    fflush(stdout);
    struct termios old, quiet;
    bool tty = tcgetattr(0, &old) == 0;
    if (tty) {
        quiet = old;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        tcsetattr(0, TCSANOW, &quiet);
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (tty) {
        tcsetattr(0, TCSANOW, &old);
        fputc('\n', stdout);
    }
    if (n < 0) {
        free(line);
        return NULL;
    }
    if (n > 0 && line[n - 1] == '\n')
        line[n - 1] = '\0';
    return line;
}

#else /* no readline */

static int
read_line(const char *prompt, const char *indent, char **line)
{
    (void)indent;
    fputs(prompt, stdout);
    fflush(stdout);
    char *buf = NULL;
    size_t cap = 0;
    errno = 0;
    ssize_t n = getline(&buf, &cap, stdin);
    if (n < 0) {
        free(buf);
        if (errno == EINTR && cli_sigint_count > 0) {
            cli_sigint_count = 0;
            clearerr(stdin);
            fputs("^C\n", stdout);
            return LINE_CANCEL;
        }
        return LINE_EOF;
    }
    if (n > 0 && buf[n - 1] == '\n')
        buf[n - 1] = '\0';
    *line = buf;
    return LINE_OK;
}

char *
cli_read_input(const char *prompt, bool password)
{
    char *line = NULL;
    (void)password;
    return read_line(prompt, NULL, &line) == LINE_OK ? line : NULL;
}

#endif

/* ---- the REPL -------------------------------------------------------------------------------------------- */

/* Asks the kernel whether the block is a whole cell.  Returns true when it needs more lines, with the
 * suggested indent (malloc'd) in *indent. */
static bool
incomplete(const char *block, char **indent)
{
    char id[PYC_MSG_ID_LEN + 1];
    pyc_error_t err;
    bool more = false;
    *indent = NULL;
    /* The block as typed, without the newline after its last line, as terminal frontends send it (pyc's
     * is_complete suggests no indent after a trailing newline). */
    json_t *req = json_pack("{s:s%}", "code", block, strlen(block) - (strlen(block) > 0 && block[strlen(block) - 1] == '\n'));
    if (req == NULL || pyc_client_send(the_client, PYC_CHAN_SHELL, "is_complete_request", req, NULL, NULL, NULL, 0, id, &err) < 0) {
        json_decref(req);
        return false;
    }
    json_decref(req);
    pyc_msg_t *reply = shell_reply(id, CLI_CONNECT_MS);
    if (reply == NULL)
        return false;
    const char *status = json_string_value(json_object_get(reply->content, "status"));
    if (status != NULL && strcmp(status, "incomplete") == 0) {
        more = true;
        const char *ind = json_string_value(json_object_get(reply->content, "indent"));
        *indent = strdup(ind != NULL ? ind : "");
    }
    pyc_msg_destroy(&reply);
    return more;
}

static bool
blank(const char *s)
{
    for (; *s != '\0'; s++) {
        if (*s != ' ' && *s != '\t')
            return false;
    }
    return true;
}

int
cli_attach(int argc, char **argv)
{
    cli_args_t a;
    int rc;
    if (cli_parse("attach", argc, argv, NULL, 0, &a) < 0)
        return PYC_EXIT_USAGE;
    if (a.help) {
        puts("usage: pyc attach NAME\n"
             "A line REPL into session NAME: each complete block is one cell; Tab completes through the kernel;\n"
             "Ctrl-C interrupts the running cell (or drops the block being typed); Ctrl-D detaches and leaves\n"
             "the session running.");
        return PYC_EXIT_OK;
    }
    if (a.npos != 1) {
        cli_err("attach: usage: pyc attach NAME");
        return PYC_EXIT_USAGE;
    }
    const char *name = a.pos[0];
    cli_catch_sigint();
    pyc_session_file_t sf;
    the_client = cli_connect(name, &sf, true, true, &rc);
    if (the_client == NULL)
        return rc;
    pyc_buf_init(&the_block, 64u << 20);

#ifdef HAVE_READLINE
    char hist[4096];
    bool have_hist = false;
    rl_readline_name = "pyc";
    rl_catch_signals = 0;
    rl_attempted_completion_function = complete;
    rl_completer_word_break_characters = (char *)" \t\n\"\\'`@$><=;|&{(";
    rl_completion_append_character = '\0';
    rl_pre_input_hook = insert_indent;
    rl_getc_function = getc_interruptible;
    char data[4000];
    if (pyc_jupyter_data_dir(data, sizeof data) == 0) {
        snprintf(hist, sizeof hist, "%s/pyc", data);
        if (pyc_mkdirs(hist, 0700) == 0) {
            snprintf(hist, sizeof hist, "%s/pyc/attach_history", data);
            have_hist = true;
            using_history();
            stifle_history(HISTORY_LINES);
            read_history(hist);
        }
    }
#endif
    fprintf(stderr, "pyc: attached to session %s (kernel pid %ld). Ctrl-D detaches, the session keeps running; "
                    "Ctrl-C interrupts.\n", name, sf.pid);

    char *indent = NULL;
    cli_output_t o = {.json = false, .wrote_nl = true};
    rc = PYC_EXIT_OK;
    for (;;) {
        char *line = NULL;
        drain();
        int r = read_line(the_block.len == 0 ? PS1 : PS2, indent, &line);
        free(indent);
        indent = NULL;
        if (r == LINE_EOF) {
            fputc('\n', stdout);
            break;
        }
        if (r == LINE_CANCEL) {
            pyc_buf_reset(&the_block);
            continue;
        }
        bool run;
        if (blank(line)) {
            run = the_block.len > 0;   /* an empty line ends a block; at the first prompt it does nothing */
        } else {
#ifdef HAVE_READLINE
            add_history(line);
#endif
            if (pyc_buf_adds(&the_block, line) < 0 || pyc_buf_add(&the_block, "\n", 1) < 0) {
                cli_err("the block is too long; dropped");
                pyc_buf_reset(&the_block);
                free(line);
                continue;
            }
            run = !incomplete(the_block.data, &indent);
        }
        free(line);
        if (!run)
            continue;
        o.wrote_nl = true;
        int er = cli_execute(the_client, the_block.data, NULL, true, &o, NULL);
        if (!o.wrote_nl)
            fputc('\n', stdout);
        fflush(stdout);
        pyc_buf_reset(&the_block);
        free(indent);
        indent = NULL;
        if (er == PYC_EXIT_CONNECTION) {
            rc = er;
            break;
        }
    }
    free(indent);
#ifdef HAVE_READLINE
    if (have_hist)
        write_history(hist);
    clear_history();
#endif
    pyc_buf_free(&the_block);
    pyc_client_destroy(&the_client);
    pyc_session_file_clear(&sf);
    return rc;
}
