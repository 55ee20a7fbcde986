/*
 * args.c -- see args.h.
 */
#include "args.h"

#include <string.h>

void
pyc_args_begin(pyc_argiter_t *it, int argc, char **argv, const pyc_argspec_t *specs, int nspecs)
{
    *it = (pyc_argiter_t){argc, argv, specs, nspecs, 0, false, false};
}

/* The spec of a long option name[0..len), or -1. */
static int
find_long(const pyc_argiter_t *it, const char *name, size_t len)
{
    for (int k = 0; k < it->nspecs; k++) {
        if (strlen(it->specs[k].name) == len && strncmp(it->specs[k].name, name, len) == 0)
            return k;
    }
    return -1;
}

static int
find_short(const pyc_argiter_t *it, char c)
{
    for (int k = 0; k < it->nspecs; k++) {
        if (it->specs[k].short_name != '\0' && it->specs[k].short_name == c)
            return k;
    }
    return -1;
}

int
pyc_args_next(pyc_argiter_t *it, const char **value, pyc_error_t *err)
{
    *value = NULL;
    it->took_word = false;
    if (it->i >= it->argc)
        return PYC_ARG_END;
    const char *a = it->argv[it->i++];
    if (!it->no_more_options && strcmp(a, "--") == 0) {
        it->no_more_options = true;
        return pyc_args_next(it, value, err);
    }
    bool is_long = a[0] == '-' && a[1] == '-' && a[2] != '\0';
    bool is_short = a[0] == '-' && a[1] != '-' && a[1] != '\0' && a[2] == '\0';
    if (it->no_more_options || !(is_long || is_short)) {
        *value = a;
        return PYC_ARG_POSITIONAL;
    }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
        return PYC_ARG_HELP;
    int k;
    const char *eq = NULL;
    if (is_long) {
        const char *name = a + 2;
        eq = strchr(name, '=');
        size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
        if ((k = find_long(it, name, len)) < 0) {
            pyc_error_set(err, "unknown option --%.*s", (int)(len < 64 ? len : 64), name);
            return PYC_ARG_ERROR;
        }
    } else if ((k = find_short(it, a[1])) < 0) {
        *value = a;              /* "-1" is a word (code, a number) unless a spec claims the letter */
        return PYC_ARG_POSITIONAL;
    }
    const pyc_argspec_t *s = &it->specs[k];
    if (s->has_arg == PYC_ARG_OPTIONAL) {
        *value = eq != NULL ? eq + 1 : "";
    } else if (s->has_arg == PYC_ARG_OPTIONAL_WORD) {
        const char *next = it->i < it->argc && !it->no_more_options ? it->argv[it->i] : NULL;
        if (eq != NULL) {
            *value = eq + 1;
        } else if (next != NULL && next[0] != '-') {
            *value = next;
            it->i++;
            it->took_word = true;
        } else {
            *value = "";
        }
    } else if (!s->has_arg) {
        if (eq != NULL) {
            pyc_error_set(err, "--%s takes no value", s->name);
            return PYC_ARG_ERROR;
        }
        *value = "";
    } else if (eq != NULL) {
        *value = eq + 1;
    } else if (it->i < it->argc) {
        *value = it->argv[it->i++];
    } else {
        pyc_error_set(err, "%s needs a value", a);
        return PYC_ARG_ERROR;
    }
    return k;
}

int
pyc_args_parse(int argc, char **argv, const pyc_argspec_t *specs, int nspecs, pyc_args_t *out,
               pyc_error_t *err)
{
    pyc_argiter_t it;
    memset(out, 0, sizeof *out);
    if (nspecs > PYC_ARGS_MAX_OPTS)
        return pyc_error_set(err, "%d options, more than the parser holds (%d)", nspecs, PYC_ARGS_MAX_OPTS);
    pyc_args_begin(&it, argc, argv, specs, nspecs);
    for (;;) {
        const char *v;
        int k = pyc_args_next(&it, &v, err);
        if (k == PYC_ARG_END)
            return 0;
        if (k == PYC_ARG_ERROR)
            return -1;
        if (k == PYC_ARG_HELP) {
            out->help = true;
        } else if (k == PYC_ARG_POSITIONAL) {
            if (out->npos == PYC_ARGS_MAX_POS)
                return pyc_error_set(err, "too many arguments");
            out->pos[out->npos++] = v;
        } else {
            out->value[k] = v;
            out->took_word[k] = it.took_word;
        }
    }
}

void
pyc_args_give_back(pyc_args_t *a, int min_pos)
{
    for (int k = 0; k < PYC_ARGS_MAX_OPTS && a->npos < min_pos && a->npos < PYC_ARGS_MAX_POS; k++) {
        if (a->took_word[k] && a->value[k] != NULL) {
            a->pos[a->npos++] = a->value[k];
            a->value[k] = "";
            a->took_word[k] = false;
        }
    }
}
