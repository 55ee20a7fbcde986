/*
 * lastline.c -- see lastline.h.  One pass over the text answers both questions, never reading past
 * code[len - 1]: a cell of 10 kB takes about 10 µs, a one-line cell well under 0.1 µs, against the ~7 µs that
 * building and compiling the AST of `x = 1` costs more than compiling its source.
 */
#include "lastline.h"

#include <string.h>

/* What the scan knows of the statement it is in: nothing yet, an expression maybe, or a statement. */
typedef enum { SEG_EMPTY, SEG_MAYBE, SEG_STATEMENT } seg_t;

static bool
is_word_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c >= 0x80;
}

/* True for a keyword that can only begin a statement (or a clause of one): a logical line or a ';'-separated
 * part that starts with it is not an expression statement.  Soft keywords (match, case, type) and the
 * keywords that begin expressions (await, lambda, not, None, True, False) are not in the list. */
static bool
is_statement_keyword(const char *w, size_t n)
{
    static const char *const kw[] = {"def",    "class",  "import", "from",   "for",    "while",   "if",
                                     "elif",   "else",   "with",   "try",    "except", "finally", "return",
                                     "pass",   "del",    "raise",  "global", "nonlocal", "assert", "break",
                                     "continue", "async", NULL};
    for (const char *const *k = kw; *k != NULL; k++) {
        if (strlen(*k) == n && memcmp(*k, w, n) == 0)
            return true;
    }
    return false;
}

/* True when w[0..n) is a string prefix (r, b, u, f and their two-letter combinations, any case). */
static bool
is_string_prefix(const char *w, size_t n, bool *fstring)
{
    *fstring = false;
    if (n == 0 || n > 2)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (strchr("rRbBuUfF", w[i]) == NULL)
            return false;
        if (w[i] == 'f' || w[i] == 'F')
            *fstring = true;
    }
    return true;
}

/* Skips the string literal whose opening quote is at s[i]; returns the index just after its closing quote,
 * or 0 when it is not terminated within the text (or a one-quote string meets the end of its line). */
static size_t
skip_string(const char *s, size_t n, size_t i)
{
    char q = s[i];
    bool triple = i + 2 < n && s[i + 1] == q && s[i + 2] == q;
    size_t j = i + (triple ? 3 : 1);
    while (j < n) {
        char c = s[j];
        if (c == '\\') {
            j += 2;              /* also in raw strings, where the backslash stays but still hides the quote */
            continue;
        }
        if (!triple && (c == '\n' || c == '\r'))
            return 0;
        if (c == q) {
            if (!triple)
                return j + 1;
            if (j + 2 < n && s[j + 1] == q && s[j + 2] == q)
                return j + 3;
        }
        j++;
    }
    return 0;
}

/* True when the '=' at s[i] (outside brackets and strings, not followed by '=') assigns: it is not the end
 * of '!=', '<=', '>=' or ':='.  '<<=' and '>>=' are augmented assignments. */
static bool
equals_assigns(const char *s, size_t i)
{
    if (i == 0)
        return true;
    char p = s[i - 1];
    if (p == '!' || p == ':' || p == '=')
        return false;
    if (p == '<' || p == '>')
        return i >= 2 && s[i - 2] == p;
    return true;
}

/* What one scan of a text found: the kind of its last statement, and whether its last token (comments,
 * blank lines and line ends aside) is a ';' outside brackets. */
typedef struct {
    seg_t last;
    bool semicolon;
} scan_t;

/* Scans the text once (see lastline.h).  Returns 0 with *out filled in, or -1 when the scan does not
 * understand the text (an unterminated string or bracket, a stray backslash, an f-string that may nest
 * quotes under PYC_LASTLINE_NESTED_FSTRINGS). */
static int
scan(const char *s, size_t n, unsigned flags, scan_t *out)
{
    int depth = 0;
    bool in_line = false;        /* a logical line has started and not ended */
    bool indented = false;       /* the current logical line starts after whitespace */
    size_t line_begin = 0;       /* where the current physical line starts */
    seg_t seg = SEG_EMPTY;       /* the current ';'-separated part of the logical line */
    bool lambda = false;         /* a `lambda` came earlier in it, so an '=' may be a default value */
    seg_t last = SEG_EMPTY;      /* the last part that held something */
    bool semicolon = false;      /* the last token seen is a ';' at the top level */
    size_t i = 0;

    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c == ' ' || c == '\t' || c == '\f') {
            i++;
            continue;
        }
        if (c == '#') {
            while (i < n && s[i] != '\n' && s[i] != '\r')
                i++;
            continue;
        }
        if (c == '\\') {
            /* A continuation joins the next line to this one.  Before any code of a line it would make the
             * next line's indentation meaningless; the scan does not try to follow that. */
            if (!in_line && depth == 0)
                return -1;
            if (i + 1 < n && s[i + 1] == '\n')
                i += 2;
            else if (i + 1 < n && s[i + 1] == '\r')
                i += i + 2 < n && s[i + 2] == '\n' ? 3 : 2;
            else
                return -1;    /* a backslash outside a string elsewhere: not Python */
            continue;
        }
        if (c == '\n' || c == '\r') {
            i += c == '\r' && i + 1 < n && s[i + 1] == '\n' ? 2 : 1;
            line_begin = i;
            if (depth == 0 && in_line) {
                if (seg != SEG_EMPTY)
                    last = indented ? SEG_STATEMENT : seg;
                in_line = false;
                seg = SEG_EMPTY;
            }
            continue;
        }
        if (!in_line) {
            in_line = true;
            indented = i != line_begin;
            seg = SEG_EMPTY;
            lambda = false;
        }
        semicolon = c == ';' && depth == 0;
        bool first = depth == 0 && seg == SEG_EMPTY;
        if (first)
            seg = SEG_MAYBE;
        if (is_word_char(c)) {
            size_t w = i;
            while (i < n && is_word_char((unsigned char)s[i]))
                i++;
            bool fstring;
            if (i < n && (s[i] == '\'' || s[i] == '"') && is_string_prefix(s + w, i - w, &fstring)) {
                if (fstring && (flags & PYC_LASTLINE_NESTED_FSTRINGS))
                    return -1;
                if ((i = skip_string(s, n, i)) == 0)
                    return -1;
                continue;
            }
            if (first && is_statement_keyword(s + w, i - w))
                seg = SEG_STATEMENT;
            if (depth == 0 && i - w == 6 && memcmp(s + w, "lambda", 6) == 0)
                lambda = true;
            continue;
        }
        switch (c) {
        case '\'':
        case '"':
            if ((i = skip_string(s, n, i)) == 0)
                return -1;
            continue;
        case '(':
        case '[':
        case '{':
            depth++;
            break;
        case ')':
        case ']':
        case '}':
            if (--depth < 0)
                return -1;
            break;
        case '@':
            if (first)
                seg = SEG_STATEMENT;    /* a decorator */
            break;
        case ';':
            if (depth == 0) {
                if (seg != SEG_EMPTY)
                    last = indented ? SEG_STATEMENT : seg;
                seg = SEG_EMPTY;
                lambda = false;
            }
            break;
        case '=':
            if (i + 1 < n && s[i + 1] == '=') {
                i += 2;               /* '==' */
                continue;
            }
            if (depth == 0 && !lambda && equals_assigns(s, i))
                seg = SEG_STATEMENT;
            break;
        default:
            break;
        }
        i++;
    }
    if (depth != 0)
        return -1;
    if (in_line && seg != SEG_EMPTY)
        last = indented ? SEG_STATEMENT : seg;
    out->last = last;
    out->semicolon = semicolon;
    return 0;
}

void
pyc_lastline_judge(const char *s, size_t n, unsigned flags, pyc_lastline_t *out)
{
    scan_t r;
    bool understood = scan(s, n, flags, &r) == 0;
    out->not_expression = understood && r.last != SEG_MAYBE;
    out->semicolon = !understood ? -1 : r.semicolon ? 1 : 0;
}

bool
pyc_lastline_not_expression(const char *s, size_t n, unsigned flags)
{
    pyc_lastline_t j;
    pyc_lastline_judge(s, n, flags, &j);
    return j.not_expression;
}

int
pyc_lastline_semicolon(const char *s, size_t n, unsigned flags)
{
    pyc_lastline_t j;
    pyc_lastline_judge(s, n, flags, &j);
    return j.semicolon;
}
