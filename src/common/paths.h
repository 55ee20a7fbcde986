/*
 * paths.h -- where Jupyter keeps per-user files, found the way jupyter_core finds them on Linux.
 *
 *   data dir     $JUPYTER_DATA_DIR, else $XDG_DATA_HOME/jupyter, else ~/.local/share/jupyter
 *   runtime dir  $JUPYTER_RUNTIME_DIR, else <data dir>/runtime
 *
 * An empty variable counts as unset.  HOME falls back to the password database.
 */
#ifndef PYC_PATHS_H
#define PYC_PATHS_H

#include <stddef.h>
#include <sys/types.h>

/* Write the directory and a NUL into out.  Return 0, or -1 when no home is known or out is too small
 * (out is then ""). */
int pyc_jupyter_data_dir(char *out, size_t cap);
int pyc_jupyter_runtime_dir(char *out, size_t cap);

/* Creates dir and its missing parents with the given mode (existing ones are left as they are).  Returns 0,
 * or -1 with errno. */
int pyc_mkdirs(const char *dir, mode_t mode);

/* Creates a new file beside path for writing, to be renamed over path once written: its name is
 * "<path><infix><16 random hex digits>" (getrandom), written into tmp (cap bytes), and it is opened with
 * O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC and the given mode, so that neither a file nor a symbolic link planted
 * in the directory under a guessed name can receive what is written; a name that exists already is
 * replaced by another (up to 100 tries).  Returns the fd, or -1 with errno (ENAMETOOLONG when the name does
 * not fit in tmp; tmp is then ""). */
int pyc_open_tmp(const char *path, const char *infix, mode_t mode, char *tmp, size_t cap);

#endif
