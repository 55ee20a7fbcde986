/*
 * args.h -- the one command-line parser of both programs (pyc-kernel, `pyc-kernel install`, and every `pyc`
 * subcommand), in the GNU style their users expect:
 *
 *   --name VALUE, --name=VALUE    an option with a value (specs[k].has_arg)
 *   --name                        a flag
 *   --name, --name=VALUE          an option whose value is optional (has_arg PYC_ARG_OPTIONAL): only the
 *                                 `=` form gives it one, so that the next word stays positional
 *   --name, --name=VALUE,         an option whose value is optional and may be the next word (has_arg
 *   --name WORD                   PYC_ARG_OPTIONAL_WORD): a next word that does not start with '-' is its
 *                                 value, which a command short of positional words takes back
 *                                 (pyc_args_give_back: `pyc new --replay NAME` is NAME with --replay bare)
 *   -c VALUE, -c                  the same by a one-letter alias (specs[k].short_name), e.g. pyc-kernel's -f;
 *                                 a "-c" that no spec claims is a positional word ("-1" is code or a number)
 *   -h, --help                    asks for help (reported, never an error)
 *   --                            ends the options: every later word is positional, "-" and "--x" too
 *   anything else                 a positional word ("-" included)
 *
 * Options may come anywhere among the positional words.  Refusals are one sentence in err, naming the option
 * as typed, so that each program prefixes it the way it prints its errors.
 */
#ifndef PYC_ARGS_H
#define PYC_ARGS_H

#include <stdbool.h>

#include "error.h"

typedef struct pyc_argspec {
    const char *name;            /* without the leading "--" */
    int has_arg;                 /* 0 (false): a flag; 1 (true): it takes a value; PYC_ARG_OPTIONAL */
    char short_name;             /* '\0': none */
} pyc_argspec_t;

/* has_arg of an option whose value is optional: "--name" gives "", "--name=VALUE" gives VALUE. */
#define PYC_ARG_OPTIONAL 2

/* has_arg of an option whose value is optional and may be the next word: "--name" (last, or before a word
 * starting with '-') gives "", "--name=VALUE" and "--name WORD" give the value. */
#define PYC_ARG_OPTIONAL_WORD 3

/* What pyc_args_next found. */
enum {
    PYC_ARG_END = -1,            /* no more words */
    PYC_ARG_POSITIONAL = -2,     /* *value is the word */
    PYC_ARG_HELP = -3,           /* -h or --help */
    PYC_ARG_ERROR = -4,          /* err says what is wrong */
};

/* An iteration over argv[0..argc): zero it, or use pyc_args_begin. */
typedef struct pyc_argiter {
    int argc;
    char **argv;
    const pyc_argspec_t *specs;
    int nspecs;
    int i;
    bool no_more_options;
    bool took_word;              /* the last option's value was the next word (PYC_ARG_OPTIONAL_WORD) */
} pyc_argiter_t;

void pyc_args_begin(pyc_argiter_t *it, int argc, char **argv, const pyc_argspec_t *specs, int nspecs);

/* The next word: the index of an option's spec with *value its argument ("" for a flag), or one of PYC_ARG_*.
 * Repeated options come once per occurrence (`pyc-kernel install --env A=1 --env B=2`). */
int pyc_args_next(pyc_argiter_t *it, const char **value, pyc_error_t *err);

#define PYC_ARGS_MAX_OPTS 32
#define PYC_ARGS_MAX_POS 64

/* The words of a whole command line, for commands whose options do not repeat. */
typedef struct pyc_args {
    const char *value[PYC_ARGS_MAX_OPTS];  /* per spec: its argument, "" for a flag given, NULL if absent */
    const char *pos[PYC_ARGS_MAX_POS];
    int npos;
    bool help;
    bool took_word[PYC_ARGS_MAX_OPTS];   /* value[k] was the word after a PYC_ARG_OPTIONAL_WORD option */
} pyc_args_t;

/* Parses every word into out (a repeated option keeps its last value).  Returns 0, or -1 with err on an
 * unknown option, a missing or unexpected argument, more than PYC_ARGS_MAX_POS positional words, or more than
 * PYC_ARGS_MAX_OPTS specs. */
int pyc_args_parse(int argc, char **argv, const pyc_argspec_t *specs, int nspecs, pyc_args_t *out,
                   pyc_error_t *err);

/* Gives the words that PYC_ARG_OPTIONAL_WORD options took back to the positional words (after them, and the
 * option then has no value: "") while there are fewer than min_pos of those, so that a word meant as a
 * positional one is not lost to the option before it. */
void pyc_args_give_back(pyc_args_t *a, int min_pos);

#endif
