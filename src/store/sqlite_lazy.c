/*
 * sqlite_lazy.c -- see sqlite_lazy.h: libsqlite3 loaded with dlopen(3) at the history's first use.
 */
#define PYC_SQLITE_NO_REDIRECT
#include "sqlite_lazy.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

pyc_sqlite_api_t pyc_sqlite;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[256];     /* empty when the table is filled */

static void
load(void)
{
    void *lib = dlopen(PYC_SQLITE_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(load_error, sizeof load_error, "cannot load %s: %s", PYC_SQLITE_SONAME, dlerror());
        return;
    }
    pyc_sqlite_api_t api;
    const char *missing = NULL;
    /* A function pointer from dlsym's void pointer, through memcpy: ISO C has no conversion between them. */
#define PYC_SQLITE_LOAD(name)                                        \
    if (missing == NULL) {                                           \
        void *sym = dlsym(lib, #name);                               \
        if (sym == NULL)                                             \
            missing = #name;                                         \
        else                                                         \
            memcpy(&api.name, &sym, sizeof sym);                     \
    }
    PYC_SQLITE_FUNCTIONS(PYC_SQLITE_LOAD)
#undef PYC_SQLITE_LOAD
    if (missing != NULL) {
        snprintf(load_error, sizeof load_error, "%s lacks %s", PYC_SQLITE_SONAME, missing);
        dlclose(lib);
        return;
    }
    int version = api.sqlite3_libversion_number();
    if (version < PYC_SQLITE_MIN) {
        snprintf(load_error, sizeof load_error, "%s is SQLite %d, older than %d", PYC_SQLITE_SONAME, version,
                 PYC_SQLITE_MIN);
        dlclose(lib);
        return;
    }
    pyc_sqlite = api;            /* the library stays loaded: the table points into it */
    const sqlite3_mem_methods *mem = pyc_sqlite_mem_methods();
    if (mem != NULL)
        api.sqlite3_config(SQLITE_CONFIG_MALLOC, mem);
}

int
pyc_sqlite_load(pyc_error_t *err)
{
    if (pthread_once(&load_once, load) != 0)
        return pyc_error_set(err, "cannot load %s", PYC_SQLITE_SONAME);
    if (load_error[0] != '\0')
        return pyc_error_set(err, "%s", load_error);
    return 0;
}
