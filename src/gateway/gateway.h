/*
 * gateway.h -- `pyc-kernel gateway-launch`: the kernel launcher of Jupyter Enterprise Gateway (2.6+) and
 * gateway_provisioners, launcher protocol version 1, for a kernel in a pod, container or remote host.
 *
 * The gateway (or the image's bootstrap script) runs
 *   pyc-kernel gateway-launch --kernel-id ID --response-address HOST:PORT --public-key B64 [--port-range L..U]
 * and this process then
 *   1. binds the communication port (TCP, in the range, on --ip: 0.0.0.0 unless told);
 *   2. starts the kernel as its child: pyc-kernel itself on a registration file (pyc's protocol 5.6
 *      handshake), so that the kernel binds its five ports in the range and reports the ports it really
 *      bound -- the pick-then-close race of the upstream launchers does not exist here;  or, after `--`, any
 *      kernel's command, with the word {connection_file} replaced by a connection file whose ports were picked
 *      here (that kernel cannot report its ports: the race is bounded by a probe and retries, as upstream);
 *   3. sends the sealed connection info (seal.h) to the response address, once, on a fresh TCP connection;
 *   4. serves the communication port: one JSON request per connection, {"signum": N} (0: liveness) and
 *      {"shutdown": 1};
 *   5. ends with the kernel: the port closes at once (a gateway polling it then sees the connection refused),
 *      its files go, and the exit status is the kernel's (128 + N for a kernel killed by signal N).
 * SIGTERM and SIGHUP are passed on to the kernel as SIGTERM (SIGKILL after the grace); SIGINT is ignored (the
 * kernel, in the same process group, gets its own).
 *
 * Exit codes of its own: 2 for bad arguments, found before anything starts (no kernel id, a public key that
 * is no RSA key, a range that is malformed or narrower than MIN_PORT_RANGE_SIZE, a response address that is
 * not HOST:PORT); 1 when the kernel could not start or report its ports, or the payload could not be
 * delivered within PYC_GATEWAY_RESPONSE_TIMEOUT seconds (then the kernel is stopped first).  A kernel that
 * ended before it was ready gives its own status instead (pyc-kernel's 4 for a registration with no ACK),
 * and a command after "--" that cannot be run gives 127, at once, without the retries of step 2.
 */
#ifndef PYC_GATEWAY_H
#define PYC_GATEWAY_H

#include <stdbool.h>

#include "error.h"

/* What the command line and the environment said (gwopts.c). */
typedef struct pyc_gwopts {
    const char *kernel_id;       /* required */
    const char *public_key;      /* required: base64 DER, or PEM text */
    const char *response;        /* HOST:PORT as given; NULL: no gateway waits ("pull mode", a local start) */
    char response_host[256];     /* its parts */
    int response_port;
    int port_min, port_max;      /* both 0: any port the system gives */
    const char *ip;              /* where the kernel and the communication port listen (default 0.0.0.0) */
    double response_timeout_s;   /* how long the payload's delivery is retried */
    int max_retries;             /* random tries for the communication port in the range */
    char **command;              /* after "--": another kernel's command (NULL: pyc-kernel itself) */
    int ncommand;
    bool help;
} pyc_gwopts_t;

/* Reads argv (the words after "gateway-launch") and the environment's fallbacks into o:
 *   --kernel-id, --response-address, --public-key, --port-range, --ip, each also spelled
 *   --RemoteProcessProxy.<name>; --spark-context-initialization-mode, --cluster-type and --kernel-class-name
 *   accepted and ignored; "--opt VALUE" and "--opt=VALUE"; an option without a value counts as not given
 *   (the upstream launchers' argparse nargs="?").
 *   KERNEL_ID; RESPONSE_ADDRESS or EG_RESPONSE_ADDRESS; PUBLIC_KEY or EG_PUBLIC_KEY; PORT_RANGE or
 *   EG_PORT_RANGE (L..U, 0..0 for any); MIN_PORT_RANGE_SIZE or EG_MIN_PORT_RANGE_SIZE (1000);
 *   MAX_PORT_RANGE_RETRIES or EG_MAX_PORT_RANGE_RETRIES (5); PYC_GATEWAY_IP; PYC_GATEWAY_RESPONSE_TIMEOUT (20).
 * o's strings point into argv and the environment.  Returns 0, or -1 with err (the sentence for the user). */
int pyc_gwopts_parse(pyc_gwopts_t *o, int argc, char **argv, pyc_error_t *err);

/* Parses "L..U" into *lo, *hi: 0..0, or 1 <= L < U <= 65535 with U - L >= min_size.  Returns 0, or -1. */
int pyc_gwopts_port_range(const char *text, int min_size, int *lo, int *hi, pyc_error_t *err);

/* The usage text. */
extern const char pyc_gateway_usage[];

/* The command: argv[0] is "gateway-launch"; self is this program's path (for the kernel's exec).  Returns the
 * exit status. */
int pyc_gateway_main(int argc, char **argv, const char *self);

#endif
