/*
 * ipyinput.c -- which cells go through IPython's input transforms (pyc._transform) before they are compiled,
 * although they may parse as Python.
 *
 * Most of IPython's input language (%magic, !cmd, obj?) is a syntax error to Python, so exec.c tries the
 * transforms only when a cell does not parse: plain cells never call into pyc._transform.  Two kinds of
 * cell do parse and still mean something else to IPython, and are recognised here from the text alone:
 *
 *   - pasted prompts, where the first line (blank lines aside) or the second starts with one: `>>> `, or
 *     IPython's `In [3]: ` (after `[nav] ` or `[ins] `) and `   ...: `.  `In [1]: b = 5` is an annotated
 *     assignment to Python, and `... ` an Ellipsis;
 *   - automagic: a one-line cell whose first word names a line magic or a shell alias (`ls -l`, `pwd`,
 *     `who`), not followed by '.', '*' (it is then another name to IPython), '=' or ',' (an assignment).
 *     The names are those of the set _pyc.automagic_names, which this file fills with the magics of pyc,
 *     of IPython 8 and of ipykernel; IPython's shell, once pyc hosts one, adds the magics registered
 *     there.  Whether a variable shadows the name, and whether the magic can run here, pyc._transform
 *     decides, with the namespace.
 *
 * The test costs a scan of the cell's first two lines, and, for a one-line cell that starts with a word, one
 * set lookup.
 */
#include "pyint.h"

#include <string.h>

/* The line magics automagic may run: pyc's own (kernel/python/pyc/_magics.py: _LINE, _WITHOUT_IPYTHON),
 * IPython 8's (InteractiveShell's magics and Linux aliases), ipykernel's (connect_info, qtconsole, less,
 * more, man, clear). */
static const char *const standard_names[] = {
    "alias", "alias_magic", "autoawait", "autocall", "automagic", "bookmark", "cat", "cd", "clear", "colors",
    "conda", "config", "connect_info", "cp", "debug", "dhist", "dirs", "doctest_mode", "ed", "edit", "env",
    "gui", "hist", "history", "killbgscripts", "ldir", "less", "lf", "lk", "ll", "load", "load_ext", "loadpy",
    "logoff", "logon", "logstart", "logstate", "logstop", "ls", "lsmagic", "lx", "macro", "magic", "man",
    "matplotlib", "mkdir", "more", "mv", "notebook", "page", "pastebin", "pdb", "pdef", "pdoc", "pfile",
    "pinfo", "pinfo2", "pip", "popd", "pprint", "precision", "prun", "psearch", "psource", "pushd", "pwd",
    "pycat", "pylab", "qtconsole", "quickref", "recall", "rehashx", "reload_ext", "rep", "rerun", "reset",
    "reset_selective", "restore", "rm", "rmdir", "run", "save", "sc", "set_env", "snapshot", "snapshots", "sx",
    "system", "tb", "time", "timeit", "unalias", "unload_ext", "who", "who_ls", "whos", "xdel", "xmode",
};

/* _pyc.automagic_names, as the module was made with it: a reference of this file's, for the life of the
 * interpreter. */
static PyObject *automagic_names;

int
pyc__py_ipyinput_ready(PyObject *module)
{
    PyObject *set = PySet_New(NULL);
    for (size_t i = 0; set != NULL && i < sizeof standard_names / sizeof standard_names[0]; i++) {
        PyObject *name = PyUnicode_InternFromString(standard_names[i]);
        if (name == NULL || PySet_Add(set, name) < 0) {
            Py_XDECREF(name);
            Py_CLEAR(set);
            break;
        }
        Py_DECREF(name);
    }
    if (set == NULL || PyModule_AddObject(module, "automagic_names", set) < 0) {
        Py_XDECREF(set);
        return -1;
    }
    Py_INCREF(set);              /* a reference of our own: a cell may rebind _pyc.automagic_names */
    automagic_names = set;
    return 0;
}

/* True when the line (up to its end, '\n' or NUL) starts with `prefix`. */
static bool
starts(const char *line, const char *prefix)
{
    return strncmp(line, prefix, strlen(prefix)) == 0;
}

/* The standard interpreter's prompts: ">>>" (first) or ">>>" / "..." (any line), then a space or the line's
 * end. */
static bool
classic_prompt(const char *line, bool first)
{
    if (!starts(line, ">>>") && (first || !starts(line, "...")))
        return false;
    return line[3] == ' ' || line[3] == '\n' || line[3] == '\r' || line[3] == '\0';
}

/* IPython's prompts: "In [N]: " (after "[nav] " or "[ins] "), or whitespace, three or more dots and ':'. */
static bool
ipython_prompt(const char *line)
{
    const char *p = line;
    if (starts(p, "[nav] ") || starts(p, "[ins] "))
        p += 6;
    else if (*p == ' ')
        p++;
    if (starts(p, "In [")) {
        p += 4;
        if (*p < '0' || *p > '9')
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
        return starts(p, "]: ");
    }
    p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    if (!starts(p, "..."))
        return false;
    while (*p == '.')
        p++;
    return *p == ':';
}

/* The start of the line after the one at p, or NULL when p's line is the last. */
static const char *
next_line(const char *p)
{
    const char *nl = strchr(p, '\n');
    return nl != NULL ? nl + 1 : NULL;
}

/* True when the one-line cell at line starts with a word of automagic_names that IPython would take for a
 * magic's name (see the file's comment). */
static bool
automagic_word(const char *line)
{
    const char *p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    const char *w = p;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_')
        p++;
    if (p == w || *p == '.' || *p == '*' || (unsigned char)*p >= 0x80)
        return false;
    const char *rest = p;
    while (*rest == ' ' || *rest == '\t')
        rest++;
    if (*rest == '=' || *rest == ',')
        return false;
    const char *nl = strchr(p, '\n');
    if (nl != NULL && nl[1] != '\0')
        return false;            /* more than one line: IPython's automagic is for one-line cells */
    if (automagic_names == NULL)
        return false;
    PyObject *word = PyUnicode_FromStringAndSize(w, p - w);
    int found = word != NULL ? PySet_Contains(automagic_names, word) : -1;
    Py_XDECREF(word);
    if (found < 0)
        PyErr_Clear();
    return found == 1;
}

bool
pyc__py_ipython_input(const char *code)
{
    const char *line = code;
    /* Blank lines before the first line are IPython's leading_empty_lines: they do not count. */
    for (;;) {
        const char *p = line;
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\f')
            p++;
        if (*p != '\n')
            break;
        line = p + 1;
    }
    if (*line == '\0')
        return false;
    if (classic_prompt(line, true) || ipython_prompt(line))
        return true;
    const char *second = next_line(line);
    if (second != NULL && (classic_prompt(second, false) || ipython_prompt(second)))
        return true;
    return automagic_word(line);
}
