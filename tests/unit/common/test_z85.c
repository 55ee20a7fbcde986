/*
 * test_z85.c -- cmocka tests for z85.c and for the CURVE members of connection files (connfile.c): the Z85
 * codec against RFC 32's vector and pyzmq's encodings, the key checks with the sentences a user sees, the
 * allow-list from a file and from the connection file, and that a written file reads back with its keys.
 * Keys here were made by pyzmq's zmq.curve_keypair().
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "connfile.h"
#include "unit_util.h"
#include "z85.h"

#define PUB "2nyUk41j@90AoMhRP*+kqATsPxqOcGwYBtxypzqK"
#define SEC "cEsh{OJk.)?xLewe2(eI>vC6MJLzeE^ks(=&hQk<"
#define CLIENT1 "YK9{V@s4&&cVM*QN+3W.Yb7*lG*LuGE#unogl:^M"
#define CLIENT2 "W$mGBf}Z5atN4$Su>q^@w7$rC>+PjCXNzOvDVYMP"

#define PORTS "\"shell_port\": 1, \"iopub_port\": 2, \"stdin_port\": 3, \"control_port\": 4, \"hb_port\": 5, "

static void
test_rfc_vector(void **state)
{
    (void)state;
    static const unsigned char bytes[8] = {0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B};
    char text[11];
    unsigned char back[8];
    assert_int_equal(pyc_z85_encode(bytes, 8, text), 10);
    assert_string_equal(text, "HelloWorld");
    assert_int_equal(pyc_z85_decode(text, 10, back, NULL), 8);
    assert_memory_equal(back, bytes, 8);
}

static void
test_keys_as_pyzmq_writes_them(void **state)
{
    (void)state;
    unsigned char key[32], all_ff[32];
    char text[41];
    for (int i = 0; i < 32; i++)
        key[i] = (unsigned char)i;
    memset(all_ff, 0xff, sizeof all_ff);
    assert_int_equal(pyc_z85_encode(key, 32, text), 40);
    assert_string_equal(text, "009c61o!#m2NH?C3>iWS5d]J*6CRx17-skh9337x");
    assert_int_equal(pyc_z85_encode(all_ff, 32, text), 40);
    assert_string_equal(text, "%nSc0%nSc0%nSc0%nSc0%nSc0%nSc0%nSc0%nSc0");
    unsigned char back[32];
    assert_int_equal(pyc_z85_key(text, 40, back, "k", NULL), 0);
    assert_memory_equal(back, all_ff, 32);
    assert_int_equal(pyc_z85_key(PUB, 40, back, "k", NULL), 0);
    assert_int_equal(pyc_z85_encode(back, 32, text), 40);
    assert_string_equal(text, PUB);
}

static void
test_refusals(void **state)
{
    (void)state;
    unsigned char out[40] = {0};
    char text[8];
    pyc_error_t err = {0, ""};
    assert_int_equal(pyc_z85_encode(out, 3, text), -1);
    assert_int_equal(pyc_z85_decode("Hello", 4, out, &err), -1);
    assert_non_null(strstr(err.text, "multiple of 5"));
    assert_int_equal(pyc_z85_decode("Hel\"o", 5, out, &err), -1);
    assert_non_null(strstr(err.text, "character 4 is not"));
    assert_int_equal(pyc_z85_decode("Hel\0o", 5, out, &err), -1);
    assert_int_equal(pyc_z85_decode("%nSc1", 5, out, &err), -1);      /* 2^32: one past the largest group */
    assert_non_null(strstr(err.text, "not valid Z85"));
    assert_int_equal(pyc_z85_decode("#0000", 5, out, &err), -1);      /* so no key starts with '#' */
    assert_non_null(strstr(err.text, "not valid Z85"));
    assert_int_equal(pyc_z85_key(PUB, 39, out, "curve_publickey", &err), -1);
    assert_string_equal(err.text, "curve_publickey is 39 characters long; a CURVE key is 40 characters of Z85 text");
    assert_int_equal(pyc_z85_key("2nyUk41j@90AoMhRP*+kqATsPxqOcGwYBtxypzq ", 40, out, "curve_secretkey", &err), -1);
    assert_string_equal(err.text, "curve_secretkey is not a CURVE key: character 40 is not a Z85 character");
    assert_int_equal(err.code, PYC_EINVAL);
}

static void
parse_refused(const char *text, const char *want)
{
    pyc_connfile_t cf;
    pyc_error_t err = {0, ""};
    assert_int_equal(pyc_connfile_parse(text, strlen(text), &cf, &err), -1);
    assert_null(cf.key);
    assert_null(cf.curve_allowed);
    if (strstr(err.text, want) == NULL)
        fail_msg("refusal [%s] does not mention [%s]", err.text, want);
}

static void
test_connfile_curve(void **state)
{
    (void)state;
    static const char plain[] = "{" PORTS "\"key\": \"k\"}";
    static const char curve[] = "{" PORTS "\"key\": \"k\", \"curve_publickey\": \"" PUB "\", \"curve_secretkey\": \""
                                SEC "\"}";
    pyc_connfile_t cf;
    assert_int_equal(pyc_connfile_parse(plain, strlen(plain), &cf, NULL), 0);
    assert_false(pyc_connfile_curve(&cf));
    assert_false(cf.curve_restricted);
    pyc_connfile_clear(&cf);
    assert_int_equal(pyc_connfile_parse(curve, strlen(curve), &cf, NULL), 0);
    assert_true(pyc_connfile_curve(&cf));
    assert_string_equal(cf.curve_publickey, PUB);
    assert_string_equal(cf.curve_secretkey, SEC);
    assert_false(cf.curve_restricted);
    pyc_connfile_clear(&cf);

    parse_refused("{" PORTS "\"curve_publickey\": \"" PUB "\"}",
                  "\"curve_publickey\" without \"curve_secretkey\" (CURVE needs both keys)");
    parse_refused("{" PORTS "\"curve_secretkey\": \"" SEC "\"}",
                  "\"curve_secretkey\" without \"curve_publickey\"");
    parse_refused("{" PORTS "\"curve_publickey\": \"" PUB "\", \"curve_secretkey\": \"short\"}",
                  "curve_secretkey is 5 characters long");
    parse_refused("{" PORTS "\"curve_publickey\": 7, \"curve_secretkey\": \"" SEC "\"}",
                  "\"curve_publickey\" is not a string");
    parse_refused("{" PORTS "\"curve_publickey\": \"" PUB "\", \"curve_secretkey\": \"" SEC "\", "
                  "\"curve_allowed_clients\": \"" CLIENT1 "\"}", "\"curve_allowed_clients\" is not a list");
    parse_refused("{" PORTS "\"curve_publickey\": \"" PUB "\", \"curve_secretkey\": \"" SEC "\", "
                  "\"curve_allowed_clients\": [\"" CLIENT1 "\", \"x\"]}", "curve_allowed_clients[1] is 1 characters");
    parse_refused("{" PORTS "\"curve_allowed_clients\": [\"" CLIENT1 "\"]}", "without the kernel's CURVE keys");
}

static void
test_allowed_in_connfile(void **state)
{
    (void)state;
    static const char text[] = "{" PORTS "\"key\": \"k\", \"curve_publickey\": \"" PUB "\", \"curve_secretkey\": \"" SEC
                               "\", \"curve_allowed_clients\": [\"" CLIENT1 "\", \"" CLIENT2 "\", \"" CLIENT1 "\"]}";
    static const char empty[] = "{" PORTS "\"curve_publickey\": \"" PUB "\", \"curve_secretkey\": \"" SEC "\", "
                                "\"curve_allowed_clients\": []}";
    pyc_connfile_t cf, copy;
    unsigned char c1[32], c2[32];
    assert_int_equal(pyc_z85_key(CLIENT1, 40, c1, "c1", NULL), 0);
    assert_int_equal(pyc_z85_key(CLIENT2, 40, c2, "c2", NULL), 0);
    assert_int_equal(pyc_connfile_parse(text, strlen(text), &cf, NULL), 0);
    assert_true(cf.curve_restricted);
    assert_int_equal(cf.curve_nallowed, 2);               /* the repeated key is kept once */
    assert_memory_equal(cf.curve_allowed[0], c1, 32);
    assert_memory_equal(cf.curve_allowed[1], c2, 32);

    /* A copy owns its list; the JSON form reads back the same. */
    assert_int_equal(pyc_connfile_copy(&copy, &cf, NULL), 0);
    pyc_connfile_clear(&cf);
    assert_int_equal(copy.curve_nallowed, 2);
    assert_memory_equal(copy.curve_allowed[1], c2, 32);
    json_t *j = pyc_connfile_to_json(&copy);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "curve_publickey")), PUB);
    assert_string_equal(json_string_value(json_object_get(j, "curve_secretkey")), SEC);
    json_t *list = json_object_get(j, "curve_allowed_clients");
    assert_int_equal(json_array_size(list), 2);
    assert_string_equal(json_string_value(json_array_get(list, 0)), CLIENT1);
    char *dumped = json_dumps(j, 0);
    json_decref(j);
    pyc_connfile_clear(&copy);
    assert_int_equal(pyc_connfile_parse(dumped, strlen(dumped), &cf, NULL), 0);
    free(dumped);
    assert_int_equal(cf.curve_nallowed, 2);
    assert_string_equal(cf.curve_secretkey, SEC);
    pyc_connfile_clear(&cf);

    /* An empty list still restricts: only the file's own key may connect. */
    assert_int_equal(pyc_connfile_parse(empty, strlen(empty), &cf, NULL), 0);
    assert_true(cf.curve_restricted);
    assert_int_equal(cf.curve_nallowed, 0);
    j = pyc_connfile_to_json(&cf);
    assert_int_equal(json_array_size(json_object_get(j, "curve_allowed_clients")), 0);
    json_decref(j);
    pyc_connfile_clear(&cf);
}

static void
write_text(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
}

static void
test_allow_list_file(void **state)
{
    char path[4200];
    pyc_connfile_t cf;
    pyc_error_t err = {0, ""};
    snprintf(path, sizeof path, "%s/allowed", (char *)*state);
    memset(&cf, 0, sizeof cf);

    /* CLIENT1 has a '#' in it (no key starts with one). */
    write_text(path, "# laptop\n" CLIENT1 "  alice@laptop\n\n   \t\n  " CLIENT2 "\r\n#comment\n" CLIENT1 "\n", 0600);
    if (pyc_connfile_load_allowed(&cf, path, &err) != 3)
        fail_msg("%s", err.text);
    assert_true(cf.curve_restricted);
    assert_int_equal(cf.curve_nallowed, 2);
    pyc_connfile_clear(&cf);

    write_text(path, "# nobody yet\n", 0600);
    assert_int_equal(pyc_connfile_load_allowed(&cf, path, &err), 0);
    assert_true(cf.curve_restricted);
    pyc_connfile_clear(&cf);

    write_text(path, CLIENT1 "\n" CLIENT2 "x\n", 0600);
    assert_int_equal(pyc_connfile_load_allowed(&cf, path, &err), -1);
    assert_non_null(strstr(err.text, "line 2 is 41 characters long"));
    pyc_connfile_clear(&cf);

    write_text(path, CLIENT1 "\n", 0620);
    assert_int_equal(pyc_connfile_load_allowed(&cf, path, &err), -1);
    assert_non_null(strstr(err.text, "may be written by group or others"));
    pyc_connfile_clear(&cf);

    snprintf(path, sizeof path, "%s/missing", (char *)*state);
    assert_int_equal(pyc_connfile_load_allowed(&cf, path, &err), -1);
    assert_int_equal(err.code, PYC_ENOENT);
    assert_int_equal(pyc_connfile_load_allowed(&cf, (char *)*state, &err), -1);
    assert_non_null(strstr(err.text, "not a regular file"));
    pyc_connfile_clear(&cf);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc_vector),
        cmocka_unit_test(test_keys_as_pyzmq_writes_them),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_connfile_curve),
        cmocka_unit_test(test_allowed_in_connfile),
        cmocka_unit_test_setup_teardown(test_allow_list_file, unit_tmpdir_setup, unit_tmpdir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
