/*
 * lineedit.c -- reading lines from the terminal for `pyc attach`: its prompts, and the answers to input() in
 * its cells; see cli.h ("reading lines").
 *
 * With GNU readline (configure finds it by pkg-config) lines are edited, Tab asks the caller's completer,
 * and lines are kept in a history file of at most HISTORY_LINES lines.  Readline reads its keys through
 * getc_interruptible, so that Ctrl-C abandons the line being typed (readline's own key reader waits again
 * after a signal).  A continuation line comes pre-filled with the indent the caller gives, except when more
 * input is already waiting (FIONREAD on stdin): that is pasted text, which brings its own indentation.
 * Without readline, lines are read with getline(3), with neither completion nor history.
 *
 * Readline is not linked into `pyc` but loaded with dlopen(3) when a line is first read, by the SONAME
 * configure found (READLINE_SONAME): loading libreadline and libtinfo cost every pyc command about 0.3 ms of
 * its 2.5, for the one that reads lines.  If it cannot be loaded then, lines are read as in a build without
 * it.  Below, the readline names used are macros over the loaded pointers.
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

#include "config.h"

#ifdef HAVE_READLINE
#include <readline/history.h>
#include <readline/readline.h>
#ifdef READLINE_SONAME
#include <dlfcn.h>
#endif
#endif

#define HISTORY_LINES 1000

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
            return CLI_LINE_CANCEL;
        }
        return CLI_LINE_EOF;
    }
    if (n > 0 && buf[n - 1] == '\n')
        buf[n - 1] = '\0';
    *line = buf;
    return CLI_LINE_OK;
}


#ifdef HAVE_READLINE

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

/* The caller's completer, and the history file (NULL: none) of the REPL that cli_line_begin set up. */
static cli_complete_fn the_completer;
static const char *the_history;

/* Readline's completion hook: the caller's completer on the whole line, never readline's file names. */
static char **
complete_hook(const char *text, int start, int end)
{
    (void)text;
    (void)end;
    rl_attempted_completion_over = 1;
    return the_completer(rl_line_buffer, start, rl_point);
}

bool
cli_line_editing(void)
{
    return rl_loaded();
}

void
cli_line_begin(cli_complete_fn complete, const char *history)
{
    if (!rl_loaded())
        return;
    the_completer = complete;
    rl_readline_name = "pyc";
    rl_catch_signals = 0;
    rl_attempted_completion_function = complete_hook;
    rl_completer_word_break_characters = (char *)" \t\n\"\\'`@$><=;|&{(";
    rl_completion_append_character = '\0';
    rl_pre_input_hook = insert_indent;
    rl_getc_function = getc_interruptible;
    the_history = history;
    using_history();
    stifle_history(HISTORY_LINES);
    if (history != NULL)
        read_history(history);
}

void
cli_line_remember(const char *line)
{
    if (rl_loaded())
        add_history(line);
}

void
cli_line_end(void)
{
    if (!rl_loaded())
        return;
    if (the_history != NULL)
        write_history(the_history);
    clear_history();
    the_history = NULL;
}


/* True when input is already waiting on stdin: lines pasted (or typed ahead) after this one. */
static bool
input_waiting(void)
{
    int n = 0;
    return ioctl(0, FIONREAD, &n) == 0 && n > 0;
}

int
cli_line_read(const char *prompt, const char *indent, char **line)
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
        return CLI_LINE_CANCEL;
    }
    if (got == NULL)
        return CLI_LINE_EOF;
    *line = got;
    return CLI_LINE_OK;
}

char *
cli_read_input(const char *prompt, bool password)
{
    if (!password && !rl_loaded()) {
        char *line = NULL;
        return plain_read_line(prompt, &line) == CLI_LINE_OK ? line : NULL;
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

bool
cli_line_editing(void)
{
    return false;
}

void
cli_line_begin(cli_complete_fn complete, const char *history)
{
    (void)complete;
    (void)history;
}

void
cli_line_remember(const char *line)
{
    (void)line;
}

void
cli_line_end(void)
{
}

int
cli_line_read(const char *prompt, const char *indent, char **line)
{
    (void)indent;
    return plain_read_line(prompt, line);
}

char *
cli_read_input(const char *prompt, bool password)
{
    char *line = NULL;
    (void)password;
    return plain_read_line(prompt, &line) == CLI_LINE_OK ? line : NULL;
}

#endif
