/*
 * test_regreport.c -- cmocka tests for regreport.c, the startup handshake's report: what the kernel writes is
 * what the registration services take (a round trip), and each refusal: frames out of shape, a bad
 * signature, another kernel's report, a member that is no port; the ACK's signature verifies.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "regreport.h"
#include "wire.h"

static pyc_auth_t *
auth_of(const char *key)
{
    pyc_auth_t *a = pyc_auth_new("hmac-sha256", key, strlen(key), 0, NULL);
    assert_non_null(a);
    return a;
}

/* Takes content signed with signer, as a service holding key would. */
static int
take(const char *content, const char *signer, const char *key, const char *id, pyc_connfile_t *cf,
     pyc_error_t *err)
{
    pyc_auth_t *s = auth_of(signer), *a = auth_of(key);
    char sig[PYC_AUTH_MAX_HEX + 1];
    pyc_frame_t c = {content, strlen(content)};
    assert_int_equal(pyc_auth_sign(s, &c, 1, sig), 0);
    pyc_frame_t frames[3] = {{PYC_WIRE_DELIM, PYC_WIRE_DELIM_LEN}, {sig, strlen(sig)}, c};
    int rc = pyc_regreport_take(frames, 3, a, id, cf, err);
    pyc_auth_destroy(&s);
    pyc_auth_destroy(&a);
    return rc;
}

static void
test_round_trip(void **state)
{
    (void)state;
    pyc_connfile_t out, in;
    memset(&out, 0, sizeof out);
    memset(&in, 0, sizeof in);
    snprintf(out.kernel_id, sizeof out.kernel_id, "%s", "k-42");
    for (int i = 0; i < PYC_CHAN_COUNT; i++)
        out.ports[i] = 40000 + i;
    char buf[512];
    int n = pyc_regreport_content(&out, buf, sizeof buf - 1);
    assert_true(n > 0);
    buf[n] = '\0';              /* json_dumpb writes no NUL */
    assert_non_null(strstr(buf, "\"shell_port\":\"40000\""));
    assert_int_equal(take(buf, "key", "key", "k-42", &in, NULL), 0);
    assert_memory_equal(in.ports, out.ports, sizeof in.ports);
    /* Too small a buffer is refused, not cut. */
    assert_int_equal(pyc_regreport_content(&out, buf, 20), -1);
}

static void
test_refusals(void **state)
{
    (void)state;
    pyc_connfile_t cf;
    memset(&cf, 0, sizeof cf);
    pyc_error_t err;
    static const char good[] = "{\"kernel_id\":\"k\",\"shell_port\":\"1\",\"iopub_port\":\"2\",\"stdin_port\":\"3\","
                               "\"control_port\":\"4\",\"hb_port\":\"5\"}";
    assert_int_equal(take(good, "other", "key", "k", &cf, &err), -1);
    assert_int_equal(err.code, PYC_EAUTH);
    assert_int_equal(take(good, "key", "key", "someone-else", &cf, &err), -1);
    assert_string_equal(err.text, "the report is not this kernel's");
    static const char noport[] = "{\"kernel_id\":\"k\",\"shell_port\":\"1\",\"iopub_port\":\"2\",\"stdin_port\":\"3\","
                                 "\"control_port\":\"70000\",\"hb_port\":\"5\"}";
    assert_int_equal(take(noport, "key", "key", "k", &cf, &err), -1);
    assert_string_equal(err.text, "the report's control_port is not a port");
    /* Nothing of a refused report is kept. */
    assert_int_equal(cf.ports[0], 0);
    pyc_auth_t *a = auth_of("key");
    pyc_frame_t two[2] = {{PYC_WIRE_DELIM, PYC_WIRE_DELIM_LEN}, {good, sizeof good - 1}};
    assert_int_equal(pyc_regreport_take(two, 2, a, "k", &cf, &err), -1);
    assert_string_equal(err.text, "the kernel's report is not [<IDS|MSG>, signature, content]");
    pyc_auth_destroy(&a);
}

static void
test_ack_verifies(void **state)
{
    (void)state;
    pyc_auth_t *a = auth_of("key");
    char sig[PYC_AUTH_MAX_HEX + 1];
    assert_int_equal(pyc_regreport_ack(a, sig), 0);
    pyc_frame_t c = {PYC_REGREPORT_ACK, sizeof PYC_REGREPORT_ACK - 1};
    assert_int_equal(pyc_auth_verify(a, &c, 1, sig, strlen(sig), NULL), 0);
    pyc_auth_destroy(&a);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_ack_verifies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
