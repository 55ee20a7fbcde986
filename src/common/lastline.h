/*
 * lastline.h -- two questions about the end of a cell's Python text, answered by one scan of the text alone
 * (no tokenizer, no Python): whether its last statement can be an expression statement, so that a cell whose
 * result cannot be displayed is compiled straight from its source instead of through an AST (cell.c's fast
 * path); and whether its last token is a ';', IPython's sign that the result is not to be shown.
 *
 * The scan follows what Python's tokenizer does to find logical lines: strings (with prefixes, escapes and
 * triple quotes), comments, brackets and backslash continuations.  It looks at the last logical line of the
 * text and, in it, at the last statement after a ';' at the top level.  That statement cannot be an
 * expression when
 *   1) the logical line is indented: it is inside a block, so the cell's last statement is that compound
 *      statement (a cell's first line cannot be indented, or it would not compile);
 *   2) it starts with a keyword that only begins statements (def, class, if, for, import, return, ... '@');
 *   3) it holds an '=' outside brackets that is not part of '==', '!=', '<=', '>=' or ':=' and comes before
 *      any `lambda` (an assignment, augmented or annotated).
 * Every other case, and every text the scan does not understand (an unterminated string, unbalanced
 * brackets), answers "maybe", and the caller parses the text.  The answer "not an expression" is therefore
 * only given when a text that compiles has a last statement that is not an expression statement; a text that
 * does not compile may get either answer (the caller then takes the slow path to report the error).
 *
 * Up to Python 3.11 an f-string is tokenized as one string.  From 3.12 on, its replacement fields may hold
 * the same quotes again; with PYC_LASTLINE_NESTED_FSTRINGS the scan answers "maybe" for any text that holds
 * an f-string rather than misread it.
 */
#ifndef PYC_LASTLINE_H
#define PYC_LASTLINE_H

#include <stdbool.h>
#include <stddef.h>

/* The text is for a Python whose f-strings may nest quotes (3.12 and later). */
#define PYC_LASTLINE_NESTED_FSTRINGS 1u

/* True when the last statement of the Python text code[0..len) is certainly not an expression statement
 * (see above), false when it may be one.  code need not be NUL-terminated and may hold any bytes; an empty
 * text, or one of only comments and blank lines, has no statement and answers true. */
bool pyc_lastline_not_expression(const char *code, size_t len, unsigned flags);

/* 1 when the last token of the text is a ';' outside brackets, strings and comments, 0 when it is another
 * token (or the text has none), -1 when the scan does not understand the text (as above: an unterminated
 * string or bracket, a nested f-string under PYC_LASTLINE_NESTED_FSTRINGS).  Comments, blank lines and line
 * ends do not count, as IPython's displayhook decides from the cell's tokens: `plot(x);  # blue` and a ';'
 * line followed by a comment line both end with the ';'. */
int pyc_lastline_semicolon(const char *code, size_t len, unsigned flags);

/* Both answers from one scan, for a caller that needs both (a cell about to be compiled). */
typedef struct {
    bool not_expression;         /* pyc_lastline_not_expression's answer */
    int semicolon;               /* pyc_lastline_semicolon's answer */
} pyc_lastline_t;
void pyc_lastline_judge(const char *code, size_t len, unsigned flags, pyc_lastline_t *out);

#endif
