/*
 * test_outgate.c -- cmocka tests for outgate.c, the per-cell output cap: counting, the cut of stream text on
 * a whole UTF-8 character, dropping everything after the cap, the message cap, nothing counted outside a
 * cell, and the notice.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <string.h>

#include "outgate.h"

static void
test_outside_a_cell_everything_goes(void **state)
{
    (void)state;
    pyc_outgate_t g;
    pyc_outgate_init(&g);
    assert_int_equal(pyc_outgate_admit(&g, 1 << 20, NULL), 1 << 20);
    pyc_outgate_stats_t s = pyc_outgate_stats(&g);
    assert_int_equal(s.bytes, 0);
    char text[256];
    assert_int_equal(pyc_outgate_notice(&g, text, sizeof text), 0);
    pyc_outgate_destroy(&g);
}

static void
test_byte_cap_cuts_text_on_a_character(void **state)
{
    (void)state;
    pyc_outgate_t g;
    pyc_outgate_init(&g);
    pyc_outgate_set(&g, true, 10, 0);
    assert_int_equal(pyc_outgate_admit(&g, 6, "abcdef"), 6);
    /* "é" is two bytes; 4 fit, and the cut must not split the second é: "gh" + "é" = 4 bytes. */
    const char *t = "gh\xc3\xa9\xc3\xa9";
    assert_int_equal(pyc_outgate_admit(&g, 6, t), 4);
    /* Everything after the cap is dropped, even what would fit. */
    assert_int_equal(pyc_outgate_admit(&g, 0, ""), 0);
    assert_int_equal(pyc_outgate_admit(&g, 1, "z"), 0);
    pyc_outgate_stats_t s = pyc_outgate_stats(&g);
    assert_int_equal(s.bytes, 10);
    assert_int_equal(s.msgs, 2);
    assert_int_equal(s.dropped_bytes, 2 + 1);
    assert_int_equal(s.dropped_msgs, 2);
    char text[256];
    size_t n = pyc_outgate_notice(&g, text, sizeof text);
    assert_true(n > 0 && n == strlen(text));
    assert_non_null(strstr(text, "3 bytes of this cell's output were dropped, 2 whole messages"));
    assert_non_null(strstr(text, "(limit: 10 bytes)"));
    /* A new cell starts from zero. */
    pyc_outgate_set(&g, true, 10, 0);
    assert_int_equal(pyc_outgate_admit(&g, 3, "abc"), 3);
    assert_int_equal(pyc_outgate_notice(&g, text, sizeof text), 0);
    pyc_outgate_destroy(&g);
}

static void
test_a_cut_in_the_middle_of_a_character_keeps_none_of_it(void **state)
{
    (void)state;
    pyc_outgate_t g;
    pyc_outgate_init(&g);
    pyc_outgate_set(&g, true, 1, 0);
    /* One byte of room and a two-byte character: nothing of it goes, and the message counts as dropped. */
    assert_int_equal(pyc_outgate_admit(&g, 2, "\xc3\xa9"), 0);
    pyc_outgate_stats_t s = pyc_outgate_stats(&g);
    assert_int_equal(s.bytes, 0);
    assert_int_equal(s.dropped_msgs, 1);
    pyc_outgate_destroy(&g);
}

static void
test_displays_are_not_cut(void **state)
{
    (void)state;
    pyc_outgate_t g;
    pyc_outgate_init(&g);
    pyc_outgate_set(&g, true, 100, 0);
    assert_int_equal(pyc_outgate_admit(&g, 60, NULL), 60);
    assert_int_equal(pyc_outgate_admit(&g, 60, NULL), 0);    /* whole or nothing */
    pyc_outgate_destroy(&g);
}

static void
test_message_cap(void **state)
{
    (void)state;
    pyc_outgate_t g;
    pyc_outgate_init(&g);
    pyc_outgate_set(&g, true, 0, 2);
    assert_int_equal(pyc_outgate_admit(&g, 5, "abcde"), 5);
    assert_int_equal(pyc_outgate_admit(&g, 5, "abcde"), 5);
    assert_int_equal(pyc_outgate_admit(&g, 5, "abcde"), 0);
    char text[256];
    assert_true(pyc_outgate_notice(&g, text, sizeof text) > 0);
    assert_non_null(strstr(text, "(limit: 2 messages)"));
    /* stop: a stuck cell's output goes nowhere from now on. */
    pyc_outgate_set(&g, true, 0, 0);
    pyc_outgate_stop(&g);
    assert_int_equal(pyc_outgate_admit(&g, 5, "abcde"), 0);
    pyc_outgate_destroy(&g);
}

static void
test_counted_types(void **state)
{
    (void)state;
    assert_true(pyc_outgate_counts("stream"));
    assert_true(pyc_outgate_counts("display_data"));
    assert_true(pyc_outgate_counts("update_display_data"));
    assert_true(pyc_outgate_counts("execute_result"));
    assert_true(pyc_outgate_counts("clear_output"));
    assert_false(pyc_outgate_counts("comm_msg"));
    assert_false(pyc_outgate_counts("status"));
}

static void
test_notice_fits_a_small_buffer(void **state)
{
    (void)state;
    pyc_outgate_t g;
    pyc_outgate_init(&g);
    pyc_outgate_set(&g, true, 1, 1);
    pyc_outgate_admit(&g, 5, "abcde");
    char small[16];
    size_t n = pyc_outgate_notice(&g, small, sizeof small);
    assert_int_equal(n, strlen(small));
    assert_true(n < sizeof small);
    pyc_outgate_destroy(&g);
}

static void
test_between_cells_one_budget_for_the_session(void **state)
{
    (void)state;
    pyc_outgate_t g;
    pyc_outgate_init(&g);
    pyc_outgate_set_session_caps(&g, 10, 0);
    assert_false(pyc_outgate_take_notice(&g));
    assert_int_equal(pyc_outgate_admit(&g, 6, "abcdef"), 6);        /* a thread prints after its cell */
    assert_int_equal(pyc_outgate_admit(&g, 6, "ghijkl"), 4);        /* cut at the budget */
    assert_true(pyc_outgate_take_notice(&g));                       /* once */
    assert_false(pyc_outgate_take_notice(&g));
    assert_int_equal(pyc_outgate_admit(&g, 1, "m"), 0);
    /* A cell in between has caps of its own and does not restore the session's budget. */
    pyc_outgate_set(&g, true, 10, 0);
    assert_int_equal(pyc_outgate_admit(&g, 5, "abcde"), 5);
    pyc_outgate_set(&g, false, 0, 0);
    assert_int_equal(pyc_outgate_admit(&g, 1, "n"), 0);
    assert_false(pyc_outgate_take_notice(&g));
    pyc_outgate_destroy(&g);
}

static void
test_room_and_count_for_errors(void **state)
{
    (void)state;
    pyc_outgate_t g;
    pyc_outgate_init(&g);
    pyc_outgate_set(&g, true, 0, 0);
    assert_int_equal(pyc_outgate_room(&g), SIZE_MAX);
    pyc_outgate_set(&g, true, 100, 0);
    assert_int_equal(pyc_outgate_admit(&g, 30, NULL), 30);
    assert_int_equal(pyc_outgate_room(&g), 70);
    pyc_outgate_count(&g, 500);                                     /* an error goes out whatever its size */
    assert_int_equal(pyc_outgate_room(&g), 0);
    pyc_outgate_stats_t s = pyc_outgate_stats(&g);
    assert_int_equal(s.bytes, 530);
    assert_int_equal(s.msgs, 2);
    pyc_outgate_destroy(&g);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outside_a_cell_everything_goes),
        cmocka_unit_test(test_byte_cap_cuts_text_on_a_character),
        cmocka_unit_test(test_a_cut_in_the_middle_of_a_character_keeps_none_of_it),
        cmocka_unit_test(test_displays_are_not_cut),
        cmocka_unit_test(test_message_cap),
        cmocka_unit_test(test_counted_types),
        cmocka_unit_test(test_notice_fits_a_small_buffer),
        cmocka_unit_test(test_between_cells_one_budget_for_the_session),
        cmocka_unit_test(test_room_and_count_for_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
