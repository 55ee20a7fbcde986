/*
 * attach.c -- `pyc attach NAME`: a line REPL into a live session.
 *
 * Each line is added to the block being typed; the kernel's is_complete_request says whether the block is a
 * whole cell ("complete" or "invalid": run it, the kernel reports the syntax error), or needs more lines
 * ("incomplete": a continuation prompt, pre-filled with the indent the kernel suggests).  The pre-fill is
 * left out when more input is already waiting (FIONREAD on stdin): that is pasted text, which brings its own
 * indentation.  An empty line ends a block, as at Python's prompt, except inside an open bracket or
 * triple-quoted string (block_open), where it is part of the block.  Tab asks the kernel
 * (complete_request) about the whole block up to the cursor.  Ctrl-C at the prompt, or while waiting for
 * is_complete's answer, drops the block; while a cell runs it sends interrupt_request.  When is_complete
 * gets no answer within CLI_CONNECT_MS (the kernel is running another client's cell), the block is not run:
 * the prompt goes on without asking again, and an empty line sends the block, which then waits for the kernel
 * like any cell.  Ctrl-D (end of input) detaches: the session keeps running.  input() in a cell reads a
 * line from here.
 *
 * With GNU readline (configure finds it by pkg-config) lines are edited and kept in a history file,
 * <Jupyter data dir>/pyc/attach_history.  Readline reads its keys through getc_interruptible, so that
 * Ctrl-C abandons the line being typed (readline's own key reader waits again after a signal).  Without
 * readline, lines are read with getline(3) and there is no completion.
 *
 * Readline is not linked into `pyc` but loaded with dlopen(3) when a line is first read (attach, or input()
 * in `pyc run`), by the SONAME configure found (READLINE_SONAME): loading libreadline and libtinfo cost every
 * pyc command about 0.3 ms of its 2.5, for the two that read lines.  If it cannot be loaded then, lines are
 * read as in a build without it.  Below, the readline names used are macros over the loaded pointers.
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
#ifdef READLINE_SONAME
#include <dlfcn.h>
#endif
#endif

#define PS1 ">>> "
#define PS2 "... "
#define COMPLETE_WAIT_MS 5000
#define HISTORY_LINES 1000

enum { LINE_OK, LINE_EOF, LINE_CANCEL };

/* The connection and the block typed so far, for the completion callback (readline passes no context). */
static pyc_client_t *the_client;
static pyc_buf_t the_block;

/* Waits for the reply to request `id` on shell, up to ms; NULL when none came (or a signal came: the caller
 * looks at cli_sigint_count). */
static pyc_msg_t *
shell_reply(const char *id, int ms)
{
    pyc_error_t err;
    double deadline = pyc_now_s() + ms / 1000.0;
    for (;;) {
        double left = deadline - pyc_now_s();
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

/* ---- loading readline ------------------------------------------------------------------------------------ */

#if defined(HAVE_READLINE) && defined(READLINE_SONAME)

/* Every function and variable of readline used here, loaded by rl_loaded. */
static struct {
    char *(*f_readline)(const char *);
    int (*f_insert_text)(const char *);
    void (*f_redisplay)(void);
    void (*f_using_history)(void);
    void (*f_stifle_history)(int);
    int (*f_read_history)(const char *);
    int (*f_write_history)(const char *);
    void (*f_add_history)(const char *);
    void (*f_clear_history)(void);
    int *v_done, *v_point, *v_attempted_completion_over, *v_catch_signals, *v_completion_append_character;
    char **v_line_buffer;
    const char **v_readline_name;
    rl_completion_func_t **v_attempted_completion_function;
    char **v_completer_word_break_characters;
    rl_hook_func_t **v_pre_input_hook;
    rl_getc_func_t **v_getc_function;
} rl_api;

#define RL_SYM(name, field) {name, offsetof(__typeof__(rl_api), field)}
static const struct {
    const char *name;
    size_t offset;
} rl_syms[] = {
    RL_SYM("readline", f_readline),
    RL_SYM("rl_insert_text", f_insert_text),
    RL_SYM("rl_redisplay", f_redisplay),
    RL_SYM("using_history", f_using_history),
    RL_SYM("stifle_history", f_stifle_history),
    RL_SYM("read_history", f_read_history),
    RL_SYM("write_history", f_write_history),
    RL_SYM("add_history", f_add_history),
    RL_SYM("clear_history", f_clear_history),
    RL_SYM("rl_done", v_done),
    RL_SYM("rl_point", v_point),
    RL_SYM("rl_attempted_completion_over", v_attempted_completion_over),
    RL_SYM("rl_catch_signals", v_catch_signals),
    RL_SYM("rl_completion_append_character", v_completion_append_character),
    RL_SYM("rl_line_buffer", v_line_buffer),
    RL_SYM("rl_readline_name", v_readline_name),
    RL_SYM("rl_attempted_completion_function", v_attempted_completion_function),
    RL_SYM("rl_completer_word_break_characters", v_completer_word_break_characters),
    RL_SYM("rl_pre_input_hook", v_pre_input_hook),
    RL_SYM("rl_getc_function", v_getc_function),
};

#define readline (*rl_api.f_readline)
#define rl_insert_text (*rl_api.f_insert_text)
#define rl_redisplay (*rl_api.f_redisplay)
#define using_history (*rl_api.f_using_history)
#define stifle_history (*rl_api.f_stifle_history)
#define read_history (*rl_api.f_read_history)
#define write_history (*rl_api.f_write_history)
#define add_history (*rl_api.f_add_history)
#define clear_history (*rl_api.f_clear_history)
#define rl_done (*rl_api.v_done)
#define rl_point (*rl_api.v_point)
#define rl_attempted_completion_over (*rl_api.v_attempted_completion_over)
#define rl_catch_signals (*rl_api.v_catch_signals)
#define rl_completion_append_character (*rl_api.v_completion_append_character)
#define rl_line_buffer (*rl_api.v_line_buffer)
#define rl_readline_name (*rl_api.v_readline_name)
#define rl_attempted_completion_function (*rl_api.v_attempted_completion_function)
#define rl_completer_word_break_characters (*rl_api.v_completer_word_break_characters)
#define rl_pre_input_hook (*rl_api.v_pre_input_hook)
#define rl_getc_function (*rl_api.v_getc_function)

/* Loads readline the first time; true when it is there.  The library stays loaded until exit. */
static bool
rl_loaded(void)
{
    static int state;            /* 0 not tried, 1 loaded, -1 not available */
    if (state != 0)
        return state > 0;
    state = -1;
    void *h = dlopen(READLINE_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return false;
    for (size_t i = 0; i < sizeof rl_syms / sizeof rl_syms[0]; i++) {
        void *p = dlsym(h, rl_syms[i].name);
        if (p == NULL) {
            dlclose(h);
            return false;
        }
        /* POSIX: a data or function address from dlsym fits a pointer of either kind. */
        memcpy((char *)&rl_api + rl_syms[i].offset, &p, sizeof p);
    }
    state = 1;
    return true;
}

#elif defined(HAVE_READLINE)

static bool
rl_loaded(void)
{
    return true;                 /* linked */
}

#endif

/* ---- reading lines --------------------------------------------------------------------------------------- */

/* Without line editing: a prompt and getline(3), which SIGINT (no SA_RESTART) interrupts. */
static int
plain_read_line(const char *prompt, char **line)
{
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

/* True when input is already waiting on stdin: lines pasted (or typed ahead) after this one. */
static bool
input_waiting(void)
{
    int n = 0;
    return ioctl(0, FIONREAD, &n) == 0 && n > 0;
}

static int
read_line(const char *prompt, const char *indent, char **line)
{
    if (!rl_loaded())
        return plain_read_line(prompt, line);
    cli_sigint_count = 0;
    line_base = 0;
    line_cancelled = false;
    /* Checked before the prompt is shown, so that a line typed after seeing it always gets the indent. */
    line_indent = input_waiting() ? NULL : indent;
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
    if (!password && !rl_loaded()) {
        char *line = NULL;
        return plain_read_line(prompt, &line) == LINE_OK ? line : NULL;
    }
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
    return plain_read_line(prompt, line);
}

char *
cli_read_input(const char *prompt, bool password)
{
    char *line = NULL;
    (void)password;
    return plain_read_line(prompt, &line) == LINE_OK ? line : NULL;
}

#endif

/* ---- the REPL -------------------------------------------------------------------------------------------- */

enum { BLOCK_RUN, BLOCK_MORE, BLOCK_CANCEL, BLOCK_NO_ANSWER };

/* Asks the kernel whether the block is a whole cell: BLOCK_RUN; BLOCK_MORE when it needs more lines, with
 * the suggested indent (malloc'd) in *indent; BLOCK_CANCEL when Ctrl-C came during the wait; BLOCK_NO_ANSWER
 * when no answer came within CLI_CONNECT_MS (or the request could not be sent: printed). */
static int
ask_complete(const char *block, char **indent)
{
    char id[PYC_MSG_ID_LEN + 1];
    pyc_error_t err;
    int verdict = BLOCK_RUN;
    *indent = NULL;
    /* The block as typed, without the newline after its last line, as terminal frontends send it (pyc's
     * is_complete suggests no indent after a trailing newline). */
    json_t *req = json_pack("{s:s%}", "code", block, strlen(block) - (strlen(block) > 0 && block[strlen(block) - 1] == '\n'));
    if (req == NULL || pyc_client_send(the_client, PYC_CHAN_SHELL, "is_complete_request", req, NULL, NULL, NULL, 0, id, &err) < 0) {
        cli_err("cannot ask whether the block is complete: %s", req == NULL ? "out of memory" : err.text);
        json_decref(req);
        return BLOCK_NO_ANSWER;
    }
    json_decref(req);
    pyc_msg_t *reply = shell_reply(id, CLI_CONNECT_MS);
    if (reply == NULL)
        return cli_sigint_count > 0 ? BLOCK_CANCEL : BLOCK_NO_ANSWER;
    const char *status = json_string_value(json_object_get(reply->content, "status"));
    if (status != NULL && strcmp(status, "incomplete") == 0) {
        verdict = BLOCK_MORE;
        const char *ind = json_string_value(json_object_get(reply->content, "indent"));
        *indent = strdup(ind != NULL ? ind : "");
    }
    pyc_msg_destroy(&reply);
    return verdict;
}

/* True when the block ends inside a bracket or a triple-quoted string that is still open: an empty line there
 * belongs to the block.  A lexer of Python's brackets, strings (with backslash escapes; a one-quote string
 * ends at the end of its line) and comments; anything else is left to the kernel. */
static bool
block_open(const char *s)
{
    int depth = 0;
    char quote = 0;              /* the quote character of the string the scan is in, 0 outside */
    bool triple = false;
    for (const char *p = s; *p != '\0'; p++) {
        if (quote != 0) {
            if (*p == '\\' && p[1] != '\0') {
                p++;
            } else if (*p == '\n' && !triple) {
                quote = 0;       /* never closed: a syntax error for the kernel, not an open block */
            } else if (*p == quote && (!triple || (p[1] == quote && p[2] == quote))) {
                p += triple ? 2 : 0;
                quote = 0;
            }
            continue;
        }
        switch (*p) {
        case '#': {
            const char *nl = strchr(p, '\n');
            if (nl == NULL)
                return depth > 0;
            p = nl;
            break;
        }
        case '\'':
        case '"':
            quote = *p;
            triple = p[1] == quote && p[2] == quote;
            p += triple ? 2 : 0;
            break;
        case '(':
        case '[':
        case '{':
            depth++;
            break;
        case ')':
        case ']':
        case '}':
            if (depth > 0)
                depth--;
            break;
        default:
            break;
        }
    }
    return depth > 0 || (quote != 0 && triple);
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
cli_attach(const cli_args_t *a)
{
    int rc;
    const char *name = a->pos[0];
    cli_catch_sigint();
    pyc_session_file_t sf;
    the_client = cli_connect(name, &sf, true, true, &rc);
    if (the_client == NULL)
        return rc;
    pyc_buf_init(&the_block, 64u << 20);

#ifdef HAVE_READLINE
    char hist[4096];
    bool have_hist = false, editing = rl_loaded();
    if (editing) {
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
    }
#endif
    fprintf(stderr, "pyc: attached to session %s (kernel pid %ld). Ctrl-D detaches, the session keeps running; "
                    "Ctrl-C interrupts.\n", name, sf.pid);

    char *indent = NULL;
    bool ask = true;             /* false once is_complete went unanswered for this block */
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
            ask = true;
            continue;
        }
        /* An empty line ends a block (at the first prompt it does nothing), unless the block waits for a
         * closing bracket or quote: then the line is part of it. */
        bool empty = blank(line);
        bool keep = !empty || (the_block.len > 0 && block_open(the_block.data));
        bool run = empty && !keep && the_block.len > 0;
#ifdef HAVE_READLINE
        if (editing && !empty)
            add_history(line);
#endif
        if (keep && (pyc_buf_adds(&the_block, line) < 0 || pyc_buf_add(&the_block, "\n", 1) < 0)) {
            cli_err("the block is too long; dropped");
            pyc_buf_reset(&the_block);
            ask = true;
            free(line);
            continue;
        }
        free(line);
        if (keep && !empty && ask) {
            switch (ask_complete(the_block.data, &indent)) {
            case BLOCK_RUN:
                run = true;
                break;
            case BLOCK_MORE:
                break;
            case BLOCK_CANCEL:
                /* Ctrl-C while the kernel was asked: the block is dropped, never run half-typed. */
                fputs("^C\n", stdout);
                fflush(stdout);
                pyc_buf_reset(&the_block);
                continue;
            case BLOCK_NO_ANSWER:
                cli_err("the kernel did not say within %d s whether the block is complete (is another client's "
                        "cell running?); go on typing: an empty line sends the block, Ctrl-C drops it",
                        CLI_CONNECT_MS / 1000);
                ask = false;
                break;
            }
        }
        if (!run)
            continue;
        ask = true;
        o.wrote_nl = true;
        int er = cli_execute(the_client, the_block.data, NULL, true, &o, NULL);
        if (!o.wrote_nl)
            fputc('\n', stdout);
        fflush(stdout);
        pyc_buf_reset(&the_block);
        free(indent);
        indent = NULL;
        if (er == PYC_EXIT_CONNECTION || er == PYC_EXIT_PIPE) {
            rc = er;             /* the kernel is gone, or nobody reads our output any more */
            break;
        }
    }
    free(indent);
#ifdef HAVE_READLINE
    if (have_hist)
        write_history(hist);
    if (editing)
        clear_history();
#endif
    pyc_buf_free(&the_block);
    pyc_client_destroy(&the_client);
    pyc_session_file_clear(&sf);
    return rc;
}
