/*
 * test_outgate.c -- cmocka tests for outgate.c, the per-cell output cap: counting, the cut of stream text on
 * a whole UTF-8 character, dropping everything after the cap, the message cap, nothing counted outside a
 * cell, and the notice inside the cap (content, notice and error never more than the cap).
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
    pyc_outgate_set(&g, true, 10, 0);       /* 10 bytes: no room for a notice, all of it for the content */
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
    assert_int_equal(pyc_outgate_notice(&g, text, sizeof text), 0);
    /* A new cell starts from zero. */
    pyc_outgate_set(&g, true, 10, 0);
    assert_int_equal(pyc_outgate_admit(&g, 3, "abc"), 3);
    assert_int_equal(pyc_outgate_notice(&g, text, sizeof text), 0);
    pyc_outgate_destroy(&g);
}

/* Prints `n` bytes of 'x' at a time against g until the gate cuts; returns the bytes that went out. */
static size_t
flood(pyc_outgate_t *g, size_t n)
{
    static char xs[4096];
    memset(xs, 'x', sizeof xs);
    size_t out = 0;
    for (int i = 0; i < 1000; i++)
        out += pyc_outgate_admit(g, n, xs);
    return out;
}

static void
test_the_notice_is_inside_the_cap(void **state)
{
    (void)state;
    pyc_outgate_t g;
    pyc_outgate_init(&g);
    char text[256];
    /* A cap with room for the long notice: content + notice == the cap, to the byte. */
    pyc_outgate_set(&g, true, 1000, 0);
    size_t out = flood(&g, 7);
    size_t n = pyc_outgate_notice(&g, text, sizeof text);
    assert_true(n > 0 && n == strlen(text) && n <= 500);
    assert_non_null(strstr(text, "output limit reached: the rest of this cell's output was dropped"));
    assert_non_null(strstr(text, "(limit: 1000 bytes)"));
    assert_int_equal(out + n, 1000);
    pyc_outgate_stats_t s = pyc_outgate_stats(&g);
    assert_int_equal(s.bytes, 1000);                        /* the notice counted */
    assert_int_equal(pyc_outgate_room(&g), 0);              /* nothing left for an error */
    assert_int_equal(pyc_outgate_notice(&g, text, sizeof text), 0);   /* told once */
    /* A cap too small for the long notice gets the short one, on the same terms. */
    pyc_outgate_set(&g, true, 60, 0);
    out = flood(&g, 5);
    n = pyc_outgate_notice(&g, text, sizeof text);
    assert_string_equal(text, "\n[pyc] output limit reached\n");
    assert_int_equal(out + n, 60);
    /* A buffer too small for the notice: none is given. */
    pyc_outgate_set(&g, true, 1000, 0);
    flood(&g, 7);
    char small[16];
    assert_int_equal(pyc_outgate_notice(&g, small, sizeof small), 0);
    /* Output that fits within the content's share: no notice, and room left for an error. */
    pyc_outgate_set(&g, true, 1000, 0);
    assert_int_equal(pyc_outgate_admit(&g, 100, NULL), 100);
    assert_int_equal(pyc_outgate_notice(&g, text, sizeof text), 0);
    assert_int_equal(pyc_outgate_room(&g), 900);
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
    /* Three messages: two of content and one for the notice. */
    pyc_outgate_set(&g, true, 0, 3);
    assert_int_equal(pyc_outgate_admit(&g, 5, "abcde"), 5);
    assert_int_equal(pyc_outgate_admit(&g, 5, "abcde"), 5);
    assert_int_equal(pyc_outgate_admit(&g, 5, "abcde"), 0);
    char text[256];
    assert_true(pyc_outgate_notice(&g, text, sizeof text) > 0);
    assert_non_null(strstr(text, "(limit: 3 messages)"));
    pyc_outgate_stats_t s = pyc_outgate_stats(&g);
    assert_int_equal(s.msgs, 3);
    assert_false(pyc_outgate_can_send(&g));                 /* the message cap is spent: no error either */
    /* One message: no room for a notice, the one message is the content's. */
    pyc_outgate_set(&g, true, 0, 1);
    assert_true(pyc_outgate_can_send(&g));
    pyc_outgate_set(&g, true, 0, 1);
    assert_int_equal(pyc_outgate_admit(&g, 5, "abcde"), 5);
    assert_int_equal(pyc_outgate_admit(&g, 5, "abcde"), 0);
    assert_int_equal(pyc_outgate_notice(&g, text, sizeof text), 0);
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
test_between_cells_one_budget_per_stretch(void **state)
{
    (void)state;
    pyc_outgate_t g;
    pyc_outgate_init(&g);
    char text[256];
    pyc_outgate_set_session_caps(&g, 1024, 0);
    assert_int_equal(pyc_outgate_take_idle_notice(&g, text, sizeof text), 0);
    size_t out = flood(&g, 100);                                    /* a thread prints after its cell */
    size_t n = pyc_outgate_take_idle_notice(&g, text, sizeof text);  /* once */
    assert_true(n > 0);
    assert_non_null(strstr(text, "output between cells"));
    assert_int_equal(out + n, 1024);                                /* the notice inside the budget */
    assert_int_equal(pyc_outgate_take_idle_notice(&g, text, sizeof text), 0);
    assert_int_equal(pyc_outgate_admit(&g, 1, "m"), 0);
    /* A cell in between has caps of its own; when it ends, a new stretch between cells starts with the whole
     * budget again (a thread that prints for days is capped per stretch, not silenced for good), and its own
     * notice. */
    pyc_outgate_set(&g, true, 10, 0);
    assert_int_equal(pyc_outgate_admit(&g, 5, "abcde"), 5);
    assert_int_equal(pyc_outgate_admit(&g, 20, NULL), 0);         /* the cell's caps, not the stretch's */
    pyc_outgate_set(&g, false, 0, 0);
    assert_int_equal(pyc_outgate_take_idle_notice(&g, text, sizeof text), 0);
    assert_int_equal(flood(&g, 100) + pyc_outgate_take_idle_notice(&g, text, sizeof text), 1024);
    assert_int_equal(pyc_outgate_admit(&g, 1, "n"), 0);
    assert_int_equal(pyc_outgate_take_idle_notice(&g, text, sizeof text), 0);
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
    assert_int_equal(pyc_outgate_room(&g), 70);                     /* nothing was dropped: no notice to keep */
    pyc_outgate_count(&g, 70, NULL, 0);                             /* an error cut to that room */
    assert_int_equal(pyc_outgate_room(&g), 0);
    pyc_outgate_stats_t s = pyc_outgate_stats(&g);
    assert_int_equal(s.bytes, 100);
    assert_int_equal(s.msgs, 2);
    pyc_outgate_destroy(&g);
}

/* The head of a cell's output (its cell_done event): the first bytes the cell published, in order, its error
 * included after the count ended; cut on a whole character; none outside a cell, none when off. */
static void
test_head_of_a_cells_output(void **state)
{
    (void)state;
    pyc_outgate_t g;
    char out[PYC_OUTGATE_HEAD_MAX + 1];
    pyc_outgate_init(&g);
    pyc_outgate_set(&g, true, 0, 0);
    pyc_outgate_keep(&g, "ignored", 7);
    assert_int_equal(pyc_outgate_head(&g, out, sizeof out), 0);   /* off by default */
    assert_false(pyc_outgate_wants_text(&g));
    pyc_outgate_set_head(&g, 9);
    pyc_outgate_set(&g, true, 0, 0);
    assert_true(pyc_outgate_wants_text(&g));
    pyc_outgate_keep(&g, "ab\n", 3);
    pyc_outgate_set(&g, false, 0, 0);
    pyc_outgate_keep(&g, "between", 7);                        /* not the cell's */
    pyc_outgate_count(&g, 40, "E: x\n", 5);                     /* its error, after the count ended */
    assert_int_equal(pyc_outgate_head(&g, out, sizeof out), 8);
    assert_string_equal(out, "ab\nE: x\n");
    /* A character cut by the cap is left out whole. */
    pyc_outgate_set(&g, true, 0, 0);
    assert_int_equal(pyc_outgate_head(&g, out, sizeof out), 0);   /* a new cell starts a new head */
    pyc_outgate_keep(&g, "12345678\xc3\xa9", 10);
    assert_false(pyc_outgate_wants_text(&g));
    assert_int_equal(pyc_outgate_head(&g, out, sizeof out), 8);
    assert_string_equal(out, "12345678");
    pyc_outgate_set_head(&g, 100000);                           /* bounded */
    assert_int_equal(g.head_cap, PYC_OUTGATE_HEAD_MAX);
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
        cmocka_unit_test(test_the_notice_is_inside_the_cap),
        cmocka_unit_test(test_between_cells_one_budget_per_stretch),
        cmocka_unit_test(test_room_and_count_for_errors),
        cmocka_unit_test(test_head_of_a_cells_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
