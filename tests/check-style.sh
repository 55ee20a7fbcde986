#!/bin/sh
# check-style.sh -- `make check-style`: the rules of pyc's C that a script can check, in the manner of curl's
# checksrc.  Exits 1 and names file and line for every breach.
#
#   1. No unsafe calls: sprintf, vsprintf, strcpy, strcat, gets, atoi, atol, atof, rand, srand, strtok, tmpnam
#      (snprintf, strtol/strtod with an end check, getrandom and strtok_r do the same safely).
#   2. Lines of at most 120 columns, no tabs, no trailing blanks.
#   3. Every file opens with a comment that says what it is for.
#   4. No C file over 700 lines: a file that grows past that holds more than one concern.
#   5. README's "Design in short" names every C file of the programs and libraries, so it stays true.
#   6. A feature's state in the kernel object (kernelint.h: k->store, k->lifelog, k->shells, k->children, k->tt) is
#      read and written only by the files its type names; any other file goes through that feature's functions.
set -u
top=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top" || exit 2
files=$(git ls-files 'src/*.[ch]' 'kernel/*.[ch]' 'cli/*.[ch]' 'tests/*.[ch]' 'bench/*.[ch]' 2>/dev/null ||
        find src kernel cli tests bench -name '*.[ch]' -not -path '*/node_modules/*')
bad=0
report() {
    echo "$1"
    bad=1
}
for f in $files; do
    [ -f "$f" ] || continue
    grep -nE '(^|[^_a-zA-Z0-9.>])(sprintf|vsprintf|strcpy|strcat|gets|atoi|atol|atof|rand|srand|strtok|tmpnam)[[:space:]]*\(' "$f" |
        grep -vE '^[0-9]+:\s*(/?\*|//)' | while IFS= read -r line; do
        echo "$f:${line%%:*}: unsafe call: ${line#*:}"
    done | grep . && bad=1
    awk -v f="$f" 'length($0) > 120 { printf "%s:%d: line of %d columns (at most 120)\n", f, NR, length($0) }
                   /\t/ { printf "%s:%d: tab\n", f, NR }
                   /[ \t]+$/ { printf "%s:%d: trailing blanks\n", f, NR }' "$f" | grep . && bad=1
    head -1 "$f" | grep -q '^/\*' || report "$f:1: the file does not open with a comment saying what it is for"
    n=$(wc -l < "$f")
    [ "$n" -le 700 ] || report "$f: $n lines (at most 700: split it by concern)"
done
design=$(sed -n '/^## Design in short/,/^## /p' README.md)
for f in $(git ls-files 'src/*.c' 'kernel/*.c' 'cli/*.c' 2>/dev/null || find src kernel cli -name '*.c'); do
    b=$(basename "$f")
    echo "$design" | grep -q "\b${b%.c}\b" || report "README.md: \"Design in short\" does not name $f"
done
# Rule 6: member, then the files of src/kernel that may name it (kernel.c makes and ends every one).
owners="store:storage.c,kernel.c lifelog:lifelog.c,kernel.c shells:subshell.c,control.c,kernel.c
        children:children.c,kernel.c tt:snapshot.c,handover.c,kernel.c dbg:debugger.c,kernel.c"
for entry in $owners; do
    member=${entry%%:*}
    allowed=",${entry#*:},"
    for f in $(grep -lE "k->$member\." src/kernel/*.c kernel/*.c 2>/dev/null); do
        case $allowed in
        *",$(basename "$f"),"*) ;;
        *) report "$f: uses k->$member, the state of another feature (kernelint.h: through its functions)" ;;
        esac
    done
done
[ "$bad" -eq 0 ] && echo "check-style: $(echo "$files" | wc -w) files ok"
exit "$bad"
