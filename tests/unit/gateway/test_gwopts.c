/*
 * test_gwopts.c -- cmocka tests for gwopts.c, the arguments of `pyc-kernel gateway-launch`: the upstream
 * launchers' spellings (new and --RemoteProcessProxy.*), "=" and separate values, an option without a value,
 * the options accepted and ignored, the environment's fallbacks and which wins, port ranges, response
 * addresses, the command after "--", and every refusal with its sentence.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "gateway.h"

static const char *const env_names[] = {
    "KERNEL_ID",          "RESPONSE_ADDRESS",       "EG_RESPONSE_ADDRESS",    "PUBLIC_KEY",
    "EG_PUBLIC_KEY",      "PORT_RANGE",             "EG_PORT_RANGE",          "MIN_PORT_RANGE_SIZE",
    "EG_MIN_PORT_RANGE_SIZE", "MAX_PORT_RANGE_RETRIES", "EG_MAX_PORT_RANGE_RETRIES", "PYC_GATEWAY_IP",
    "PYC_GATEWAY_RESPONSE_TIMEOUT",
};

static int
clear_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof env_names / sizeof env_names[0]; i++)
        unsetenv(env_names[i]);
    return 0;
}

static int
parse(pyc_gwopts_t *o, pyc_error_t *err, int argc, ...)
{
    static char *argv[32];
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc; i++)
        argv[i] = va_arg(ap, char *);
    va_end(ap);
    return pyc_gwopts_parse(o, argc, argv, err);
}

static void
test_new_style(void **state)
{
    (void)state;
    pyc_gwopts_t o;
    assert_int_equal(parse(&o, NULL, 8, "--kernel-id", "k1", "--response-address", "10.0.0.5:8877", "--public-key",
                           "KEY", "--port-range", "40000..41000"),
                     0);
    assert_string_equal(o.kernel_id, "k1");
    assert_string_equal(o.public_key, "KEY");
    assert_string_equal(o.response_host, "10.0.0.5");
    assert_int_equal(o.response_port, 8877);
    assert_int_equal(o.port_min, 40000);
    assert_int_equal(o.port_max, 41000);
    assert_string_equal(o.ip, "0.0.0.0");
    assert_int_equal(o.max_retries, 5);
    assert_true(o.response_timeout_s == 20.0);
    assert_null(o.command);
}

static void
test_legacy_equals_and_ignored(void **state)
{
    (void)state;
    pyc_gwopts_t o;
    assert_int_equal(parse(&o, NULL, 7, "--RemoteProcessProxy.kernel-id=k2",
                           "--RemoteProcessProxy.response-address", "gw.example:9000",
                           "--RemoteProcessProxy.public-key=KEY",
                           "--RemoteProcessProxy.spark-context-initialization-mode", "none",
                           "--kernel-class-name=ipykernel.ipkernel.IPythonKernel"),
                     0);
    assert_string_equal(o.kernel_id, "k2");
    assert_string_equal(o.response_host, "gw.example");
    assert_int_equal(o.response_port, 9000);
    assert_int_equal(o.port_min, 0);
    assert_int_equal(o.port_max, 0);
}

/* argparse's nargs="?": an option followed by another option has no value, and counts as not given. */
static void
test_option_without_value(void **state)
{
    (void)state;
    pyc_gwopts_t o;
    setenv("KERNEL_ID", "from-env", 1);
    assert_int_equal(parse(&o, NULL, 5, "--kernel-id", "--public-key", "KEY", "--cluster-type", "--ip=127.0.0.1"),
                     0);
    assert_string_equal(o.kernel_id, "from-env");
    assert_string_equal(o.ip, "127.0.0.1");
    assert_null(o.response);
}

static void
test_environment_fallbacks(void **state)
{
    (void)state;
    pyc_gwopts_t o;
    setenv("KERNEL_ID", "k3", 1);
    setenv("EG_RESPONSE_ADDRESS", "[::1]:8877", 1);
    setenv("EG_PUBLIC_KEY", "EGKEY", 1);
    setenv("EG_PORT_RANGE", "30000..30100", 1);
    setenv("EG_MIN_PORT_RANGE_SIZE", "100", 1);
    setenv("MAX_PORT_RANGE_RETRIES", "9", 1);
    setenv("PYC_GATEWAY_RESPONSE_TIMEOUT", "2.5", 1);
    assert_int_equal(parse(&o, NULL, 0), 0);
    assert_string_equal(o.kernel_id, "k3");
    assert_string_equal(o.public_key, "EGKEY");
    assert_string_equal(o.response_host, "::1");
    assert_int_equal(o.response_port, 8877);
    assert_int_equal(o.port_min, 30000);
    assert_int_equal(o.max_retries, 9);
    assert_true(o.response_timeout_s == 2.5);
    /* The unprefixed variable wins over EG_, an argument over both. */
    setenv("PUBLIC_KEY", "KEY", 1);
    setenv("RESPONSE_ADDRESS", "h:1", 1);
    assert_int_equal(parse(&o, NULL, 2, "--response-address", "a:2"), 0);
    assert_string_equal(o.public_key, "KEY");
    assert_string_equal(o.response_host, "a");
    assert_int_equal(o.response_port, 2);
}

static void
test_command_after_dashes(void **state)
{
    (void)state;
    pyc_gwopts_t o;
    pyc_error_t err;
    assert_int_equal(parse(&o, NULL, 9, "--kernel-id", "k", "--public-key", "K", "--", "python3", "-m",
                           "ipykernel_launcher", "{connection_file}"),
                     0);
    assert_int_equal(o.ncommand, 4);
    assert_string_equal(o.command[0], "python3");
    assert_string_equal(o.command[3], "{connection_file}");
    assert_int_equal(parse(&o, &err, 5, "--kernel-id", "k", "--public-key", "K", "--"), -1);
    assert_string_equal(err.text, "\"--\" must be followed by the kernel's command");
}

static void
test_port_ranges(void **state)
{
    (void)state;
    int lo = -1, hi = -1;
    pyc_error_t err;
    assert_int_equal(pyc_gwopts_port_range("0..0", 1000, &lo, &hi, NULL), 0);
    assert_int_equal(lo + hi, 0);
    assert_int_equal(pyc_gwopts_port_range("40000..41000", 1000, &lo, &hi, NULL), 0);
    assert_int_equal(hi - lo, 1000);
    assert_int_equal(pyc_gwopts_port_range("40000..40010", 1000, &lo, &hi, &err), -1);
    assert_string_equal(err.text, "port range \"40000..40010\" spans 10 ports, fewer than the minimum of 1000 "
                                  "(MIN_PORT_RANGE_SIZE)");
    assert_int_equal(pyc_gwopts_port_range("40000..40010", 10, &lo, &hi, NULL), 0);
    assert_int_equal(pyc_gwopts_port_range("40000-41000", 1000, &lo, &hi, &err), -1);
    assert_string_equal(err.text, "port range \"40000-41000\" is not LOWER..UPPER (0..0 for any port)");
    assert_int_equal(pyc_gwopts_port_range("41000..40000", 10, &lo, &hi, &err), -1);
    assert_string_equal(err.text, "port range \"41000..40000\": the lower port must be at least 1 and below the "
                                  "upper one");
    assert_int_equal(pyc_gwopts_port_range("a..b", 10, &lo, &hi, NULL), -1);
    assert_int_equal(pyc_gwopts_port_range("..5", 1, &lo, &hi, NULL), -1);
    assert_int_equal(pyc_gwopts_port_range("5..", 1, &lo, &hi, NULL), -1);
    assert_int_equal(pyc_gwopts_port_range("1..70000", 1, &lo, &hi, NULL), -1);
    assert_int_equal(pyc_gwopts_port_range("0..100", 1, &lo, &hi, NULL), -1);
}

static void
test_refusals(void **state)
{
    (void)state;
    pyc_gwopts_t o;
    pyc_error_t err;
    assert_int_equal(parse(&o, &err, 2, "--public-key", "K"), -1);
    assert_string_equal(err.text, "no kernel id: give --kernel-id or set KERNEL_ID");
    assert_int_equal(parse(&o, &err, 2, "--kernel-id", "k"), -1);
    assert_string_equal(err.text, "no public key: give --public-key or set PUBLIC_KEY (the gateway's RSA key, "
                                  "base64 DER)");
    assert_int_equal(parse(&o, &err, 5, "--kernel-id", "k", "--public-key", "K", "--bogus"), -1);
    assert_string_equal(err.text, "unknown option \"--bogus\"");
    assert_int_equal(parse(&o, &err, 5, "--kernel-id", "k", "--public-key", "K", "stray"), -1);
    assert_string_equal(err.text, "unexpected argument \"stray\"");
    static const char *const bad_addresses[] = {"nohostport", ":80", "h:0", "h:99999", "h:8877x", "[]:1"};
    for (size_t i = 0; i < sizeof bad_addresses / sizeof bad_addresses[0]; i++) {
        assert_int_equal(parse(&o, &err, 6, "--kernel-id", "k", "--public-key", "K", "--response-address",
                               bad_addresses[i]),
                         -1);
        assert_non_null(strstr(err.text, "is not HOST:PORT"));
    }
    assert_int_equal(parse(&o, &err, 6, "--kernel-id", "k", "--public-key", "K", "--port-range", "40000..40010"),
                     -1);
    setenv("MIN_PORT_RANGE_SIZE", "lots", 1);
    assert_int_equal(parse(&o, &err, 4, "--kernel-id", "k", "--public-key", "K"), -1);
    assert_string_equal(err.text, "MIN_PORT_RANGE_SIZE=\"lots\" is not a number from 1 to 65535");
    unsetenv("MIN_PORT_RANGE_SIZE");
    setenv("PYC_GATEWAY_RESPONSE_TIMEOUT", "-1", 1);
    assert_int_equal(parse(&o, &err, 4, "--kernel-id", "k", "--public-key", "K"), -1);
    assert_non_null(strstr(err.text, "PYC_GATEWAY_RESPONSE_TIMEOUT"));
}

static void
test_help(void **state)
{
    (void)state;
    pyc_gwopts_t o;
    assert_int_equal(parse(&o, NULL, 1, "--help"), 0);
    assert_true(o.help);
    assert_non_null(strstr(pyc_gateway_usage, "--response-address"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_new_style, clear_env),
        cmocka_unit_test_setup(test_legacy_equals_and_ignored, clear_env),
        cmocka_unit_test_setup(test_option_without_value, clear_env),
        cmocka_unit_test_setup(test_environment_fallbacks, clear_env),
        cmocka_unit_test_setup(test_command_after_dashes, clear_env),
        cmocka_unit_test_setup(test_port_ranges, clear_env),
        cmocka_unit_test_setup(test_refusals, clear_env),
        cmocka_unit_test_setup(test_help, clear_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
