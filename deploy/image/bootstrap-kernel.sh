#!/bin/sh
# bootstrap-kernel.sh -- the CMD of pyc's kernel image (deploy/image/Dockerfile): starts
# `pyc-kernel gateway-launch` from the environment that Jupyter Enterprise Gateway and gateway_provisioners
# give a kernel container, as their own bootstrap-kernel.sh does for ipykernel.
#
# The gateway runs launch_kubernetes.py or launch_docker.py on its own host; that script creates the pod or
# container with no command of its own, so this script runs, and it finds its arguments in the environment:
#
#   KERNEL_ID                                          required: the kernel's id, echoed back to the gateway
#   RESPONSE_ADDRESS, else EG_RESPONSE_ADDRESS          required: HOST:PORT where the gateway waits
#   PUBLIC_KEY, else EG_PUBLIC_KEY                      required: the gateway's RSA public key (base64 DER)
#   PORT_RANGE, else EG_PORT_RANGE, else 0..0           the ports the kernel may bind (0..0: any)
#   KERNEL_WORKING_DIR                                  the directory the kernel starts in (default $HOME)
#
# A required variable that is missing or empty ends the script with a message naming it and exit status 2,
# the status pyc-kernel gives bad arguments.  Values are not checked here: the launcher checks them all
# before it starts anything, and says what is wrong on stderr (exit 2 as well).
#
# KERNEL_LANGUAGE and KERNEL_CLASS_NAME are ignored.  Upstream's script reads KERNEL_LANGUAGE to choose among
# its Python, R and Scala launchers; this image has one kernel, pyc, and the image sets KERNEL_LANGUAGE=python
# only for tools that look for it.  KERNEL_CLASS_NAME names the ipykernel subclass launch_ipykernel.py would
# load (`jupyter k8s-spec install` always writes one); pyc is not ipykernel and has no such class.
# KERNEL_SPARK_CONTEXT_INIT_MODE other than "none" gets a warning on stderr: pyc creates no Spark context.
#
# pyc's own settings.  A gateway passes from the client that starts a kernel only variables named KERNEL_*,
# so every KERNEL_PYC_<X> becomes PYC_<X> here, unless PYC_<X> is already set: a PYC_<X> in the environment
# came from the image, the kernelspec's env or the gateway's own environment, that is from the operator, and
# it wins, so that a limit the operator sets cannot be lifted by a client (a line on stderr says so).  The
# PYC_* settings that mean something in a gateway kernel (README, "Configuration" and "Limits and outcomes"):
#
#   limits         PYC_IDLE_TIMEOUT PYC_LIFETIME PYC_SHUTDOWN_GRACE PYC_CELL_TIMEOUT PYC_CELL_GRACE
#                  PYC_OUTPUT_LIMIT PYC_OUTPUT_MESSAGES PYC_MEMORY_LIMIT   (src/limits/limit.c)
#   session        PYC_HISTORY_FILE PYC_MAX_CHILDREN PYC_PICKLE_MAX_BYTES PYC_IPYTHON PYC_NO_STARTUP
#                  PYC_NO_JEDI PYC_REPLY_PACE_US PYC_HUGEPAGES
#   checkpoints    PYC_CHECKPOINT PYC_CHECKPOINT_DIR PYC_CHECKPOINT_MAX_CELL PYC_CHECKPOINT_MAX_BYTES
#                  PYC_CHECKPOINT_MAX_AGE PYC_REPLAY
#   messages       PYC_MAX_MESSAGE_BYTES PYC_IOPUB_HWM PYC_JOURNAL_CELLS PYC_JOURNAL_CELL_BYTES PYC_JOURNAL_BYTES
#   the launcher   PYC_GATEWAY_IP PYC_GATEWAY_RESPONSE_TIMEOUT PYC_REGISTRATION_TIMEOUT
#
# Others are mapped as well (the mapping does not know pyc's names); an unknown name does nothing.
#
# PYC_KERNEL_PROGRAM names the program to run (default /usr/local/bin/pyc-kernel); the tests set it.  It is
# read before the mapping, so a client cannot choose it.
set -eu

me=bootstrap-kernel.sh

die() {
    echo "$me: $*" >&2
    exit 2
}

warn() {
    echo "$me: $*" >&2
}

program=${PYC_KERNEL_PROGRAM:-/usr/local/bin/pyc-kernel}

KERNEL_ID=${KERNEL_ID:-}
RESPONSE_ADDRESS=${RESPONSE_ADDRESS:-${EG_RESPONSE_ADDRESS:-}}
PUBLIC_KEY=${PUBLIC_KEY:-${EG_PUBLIC_KEY:-}}
PORT_RANGE=${PORT_RANGE:-${EG_PORT_RANGE:-0..0}}

[ -n "$KERNEL_ID" ] || die "KERNEL_ID is required (the gateway sets it); not starting the kernel"
[ -n "$RESPONSE_ADDRESS" ] ||
    die "RESPONSE_ADDRESS (or EG_RESPONSE_ADDRESS) is required (the gateway sets it); not starting the kernel"
[ -n "$PUBLIC_KEY" ] ||
    die "PUBLIC_KEY (or EG_PUBLIC_KEY) is required (the gateway sets it); not starting the kernel"

spark_mode=$(printf '%s' "${KERNEL_SPARK_CONTEXT_INIT_MODE:-none}" | tr '[:upper:]' '[:lower:]')
case $spark_mode in
    none | "") ;;
    *) warn "KERNEL_SPARK_CONTEXT_INIT_MODE=$spark_mode ignored: pyc creates no Spark context" ;;
esac

# KERNEL_PYC_<X> -> PYC_<X>.  The names come from `env`, whose lines may also be pieces of a value with a
# newline in it, so each name is checked to be a variable that is really set; names are limited to letters,
# digits and _, which is what makes the eval safe.
names=$(env | sed -n 's/^KERNEL_PYC_\([A-Za-z0-9_][A-Za-z0-9_]*\)=.*/\1/p' | sort -u)
for name in $names; do
    given='' fixed='' value=''
    eval "given=\${KERNEL_PYC_$name+set}"
    [ "$given" = set ] || continue
    eval "fixed=\${PYC_$name+set}"
    if [ "$fixed" = set ]; then
        warn "KERNEL_PYC_$name ignored: PYC_$name is set by the image or the gateway"
        continue
    fi
    eval "value=\$KERNEL_PYC_$name"
    export "PYC_$name=$value"
done

# The gateway's environment is copied into the pod, JPY_PARENT_PID included, which names a process of the
# gateway's host; the launcher sets it for the kernel to its own pid, and nothing else must see the old one.
unset JPY_PARENT_PID

# The gateway copies its own HOME into the pod too, which may not exist there: then the image user's home is
# used, so that the kernel's history and data directory are writable.
if [ ! -d "${HOME:-}" ]; then
    home=$(getent passwd "$(id -u)" | cut -d: -f6) || home=
    if [ -n "$home" ] && [ -d "$home" ]; then
        HOME=$home
        export HOME
    fi
fi

workdir=${KERNEL_WORKING_DIR:-${HOME:-}}
if [ -n "$workdir" ] && [ -d "$workdir" ]; then
    cd "$workdir"
elif [ -n "${KERNEL_WORKING_DIR:-}" ]; then
    warn "KERNEL_WORKING_DIR=$KERNEL_WORKING_DIR is not a directory here; starting in $(pwd)"
fi

exec "$program" gateway-launch --kernel-id "$KERNEL_ID" --response-address "$RESPONSE_ADDRESS" \
    --public-key "$PUBLIC_KEY" --port-range "$PORT_RANGE"
