/*
 * gwopts.c -- the arguments of `pyc-kernel gateway-launch` and their environment fallbacks (gateway.h).
 *
 * The spellings are the upstream launchers' (Enterprise Gateway's launch_ipykernel.py, gateway_provisioners'
 * copy of it): the gateways' kernelspecs and bootstrap scripts pass them, and a launcher that refused one
 * would fail a kernel start far from anyone who could read why.
 */
#include "gateway.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char pyc_gateway_usage[] =
    "usage: pyc-kernel gateway-launch --kernel-id ID --response-address HOST:PORT --public-key B64\n"
    "                                 [--port-range L..U] [--ip ADDR] [-- COMMAND... {connection_file}]\n"
    "The kernel launcher of Jupyter Enterprise Gateway and gateway_provisioners (protocol version 1).\n"
    "  --kernel-id ID             the kernel's id, echoed to the gateway (env KERNEL_ID)\n"
    "  --response-address H:P     where the gateway waits for the connection info (env RESPONSE_ADDRESS,\n"
    "                             EG_RESPONSE_ADDRESS); without it the kernel starts locally and its\n"
    "                             connection file is named on stderr\n"
    "  --public-key B64           the gateway's RSA key, base64 DER (env PUBLIC_KEY, EG_PUBLIC_KEY)\n"
    "  --port-range L..U          ports of the kernel and the communication port (env PORT_RANGE,\n"
    "                             EG_PORT_RANGE; 0..0: any; else at least MIN_PORT_RANGE_SIZE=1000 wide)\n"
    "  --ip ADDR                  the address they listen on (env PYC_GATEWAY_IP; default 0.0.0.0)\n"
    "  -- COMMAND...              start another kernel instead of pyc: {connection_file} is replaced by the\n"
    "                             connection file (appended as -f FILE when absent)\n"
    "Each option may also be spelled --RemoteProcessProxy.NAME; --spark-context-initialization-mode,\n"
    "--cluster-type and --kernel-class-name are accepted and ignored.\n"
    "PYC_GATEWAY_RESPONSE_TIMEOUT (seconds, default 20): how long the delivery to the gateway is retried.\n";

enum { OPT_KERNEL_ID, OPT_RESPONSE, OPT_PUBLIC_KEY, OPT_PORT_RANGE, OPT_IP, OPT_IGNORED };

static const struct {
    const char *name;
    int opt;
} options[] = {
    {"kernel-id", OPT_KERNEL_ID},
    {"response-address", OPT_RESPONSE},
    {"public-key", OPT_PUBLIC_KEY},
    {"port-range", OPT_PORT_RANGE},
    {"ip", OPT_IP},
    {"spark-context-initialization-mode", OPT_IGNORED},
    {"cluster-type", OPT_IGNORED},
    {"kernel-class-name", OPT_IGNORED},
};

/* The first of the environment variables a and b that is set and not empty, or NULL. */
static const char *
env2(const char *a, const char *b)
{
    const char *v = getenv(a);
    if ((v == NULL || v[0] == '\0') && b != NULL)
        v = getenv(b);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* The number in environment variable a (or b) into *out: dflt when neither is set.  Returns 0, or -1 with
 * err for text that is not a number from lo to hi. */
static int
env_int(const char *a, const char *b, int dflt, int lo, int hi, int *out, pyc_error_t *err)
{
    const char *v = env2(a, b);
    *out = dflt;
    if (v == NULL)
        return 0;
    char *end;
    long n = strtol(v, &end, 10);
    if (*end != '\0' || n < lo || n > hi)
        return pyc_error_code(err, PYC_EINVAL, "%s=\"%s\" is not a number from %d to %d",
                              getenv(a) != NULL && getenv(a)[0] != '\0' ? a : b, v, lo, hi);
    *out = (int)n;
    return 0;
}

int
pyc_gwopts_port_range(const char *text, int min_size, int *lo, int *hi, pyc_error_t *err)
{
    const char *dots = strstr(text, "..");
    char *end1 = NULL, *end2 = NULL;
    long l = dots != NULL && dots > text ? strtol(text, &end1, 10) : -1;
    long u = dots != NULL ? strtol(dots + 2, &end2, 10) : -1;
    if (dots == NULL || end1 != dots || end2 == dots + 2 || *end2 != '\0' || l < 0 || u < 0 || l > 65535 ||
        u > 65535)
        return pyc_error_code(err, PYC_EINVAL, "port range \"%s\" is not LOWER..UPPER (0..0 for any port)", text);
    if (l == 0 && u == 0) {
        *lo = *hi = 0;
        return 0;
    }
    if (l < 1 || u <= l)
        return pyc_error_code(err, PYC_EINVAL, "port range \"%s\": the lower port must be at least 1 and below the "
                                               "upper one", text);
    if (u - l < min_size)
        return pyc_error_code(err, PYC_EINVAL, "port range \"%s\" spans %ld ports, fewer than the minimum of %d "
                                               "(MIN_PORT_RANGE_SIZE)", text, u - l, min_size);
    *lo = (int)l;
    *hi = (int)u;
    return 0;
}

/* HOST:PORT (HOST may be [IPv6]) into o->response_host and o->response_port. */
static int
response_address(pyc_gwopts_t *o, pyc_error_t *err)
{
    const char *colon = strrchr(o->response, ':');
    const char *h = o->response;
    size_t hn = colon != NULL ? (size_t)(colon - h) : 0;
    if (hn >= 2 && h[0] == '[' && h[hn - 1] == ']') {
        h++;
        hn -= 2;
    }
    char *end = NULL;
    long port = colon != NULL ? strtol(colon + 1, &end, 10) : -1;
    if (colon == NULL || hn == 0 || hn >= sizeof o->response_host || end == colon + 1 || *end != '\0' ||
        port < 1 || port > 65535)
        return pyc_error_code(err, PYC_EINVAL, "response address \"%s\" is not HOST:PORT", o->response);
    memcpy(o->response_host, h, hn);
    o->response_host[hn] = '\0';
    o->response_port = (int)port;
    return 0;
}

/* The option named by word (after "--", before any '='), or -1. */
static int
option_of(const char *word, size_t len)
{
    static const char legacy[] = "RemoteProcessProxy.";
    if (len > sizeof legacy - 1 && strncmp(word, legacy, sizeof legacy - 1) == 0) {
        word += sizeof legacy - 1;
        len -= sizeof legacy - 1;
    }
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        if (strlen(options[i].name) == len && strncmp(word, options[i].name, len) == 0)
            return options[i].opt;
    }
    return -1;
}

int
pyc_gwopts_parse(pyc_gwopts_t *o, int argc, char **argv, pyc_error_t *err)
{
    const char *given[OPT_IGNORED] = {0};
    memset(o, 0, sizeof *o);
    for (int i = 0; i < argc; i++) {
        const char *w = argv[i];
        if (strcmp(w, "--") == 0) {
            o->command = argv + i + 1;
            o->ncommand = argc - i - 1;
            if (o->ncommand == 0)
                return pyc_error_code(err, PYC_EINVAL, "\"--\" must be followed by the kernel's command");
            break;
        }
        if (strcmp(w, "--help") == 0 || strcmp(w, "-h") == 0) {
            o->help = true;
            return 0;
        }
        if (strncmp(w, "--", 2) != 0)
            return pyc_error_code(err, PYC_EINVAL, "unexpected argument \"%s\"", w);
        const char *eq = strchr(w + 2, '=');
        int opt = option_of(w + 2, eq != NULL ? (size_t)(eq - w - 2) : strlen(w + 2));
        if (opt < 0)
            return pyc_error_code(err, PYC_EINVAL, "unknown option \"%s\"", w);
        const char *v = NULL;
        if (eq != NULL)
            v = eq + 1;
        else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0)
            v = argv[++i];
        if (opt != OPT_IGNORED && v != NULL && v[0] != '\0')
            given[opt] = v;
    }
    o->kernel_id = given[OPT_KERNEL_ID] != NULL ? given[OPT_KERNEL_ID] : env2("KERNEL_ID", NULL);
    o->public_key = given[OPT_PUBLIC_KEY] != NULL ? given[OPT_PUBLIC_KEY] : env2("PUBLIC_KEY", "EG_PUBLIC_KEY");
    o->response = given[OPT_RESPONSE] != NULL ? given[OPT_RESPONSE] : env2("RESPONSE_ADDRESS", "EG_RESPONSE_ADDRESS");
    o->ip = given[OPT_IP] != NULL ? given[OPT_IP] : env2("PYC_GATEWAY_IP", NULL);
    if (o->ip == NULL)
        o->ip = "0.0.0.0";
    const char *range = given[OPT_PORT_RANGE] != NULL ? given[OPT_PORT_RANGE] : env2("PORT_RANGE", "EG_PORT_RANGE");
    if (o->kernel_id == NULL)
        return pyc_error_code(err, PYC_EINVAL, "no kernel id: give --kernel-id or set KERNEL_ID");
    if (strlen(o->kernel_id) > 200)
        return pyc_error_code(err, PYC_EINVAL, "the kernel id is longer than 200 characters");
    if (o->public_key == NULL)
        return pyc_error_code(err, PYC_EINVAL, "no public key: give --public-key or set PUBLIC_KEY (the gateway's "
                                               "RSA key, base64 DER)");
    int min_size;
    if (env_int("MIN_PORT_RANGE_SIZE", "EG_MIN_PORT_RANGE_SIZE", 1000, 1, 65535, &min_size, err) < 0 ||
        env_int("MAX_PORT_RANGE_RETRIES", "EG_MAX_PORT_RANGE_RETRIES", 5, 1, 10000, &o->max_retries, err) < 0)
        return -1;
    if (range != NULL && pyc_gwopts_port_range(range, min_size, &o->port_min, &o->port_max, err) < 0)
        return -1;
    if (o->response != NULL && response_address(o, err) < 0)
        return -1;
    const char *t = env2("PYC_GATEWAY_RESPONSE_TIMEOUT", NULL);
    o->response_timeout_s = t != NULL ? strtod(t, NULL) : 20.0;
    if (!(o->response_timeout_s > 0 && o->response_timeout_s <= 3600))
        return pyc_error_code(err, PYC_EINVAL, "PYC_GATEWAY_RESPONSE_TIMEOUT=\"%s\" is not a number of seconds "
                                               "from 0 to 3600", t);
    return 0;
}
