/*
 * test_text_escape.c - nx_text_escape (proto/text_escape.c), which every log line of nexard
 * and every string in nexarctl's tables passes through:
 * control bytes, DEL and bytes outside well-formed UTF-8 become \xNN, so a client's
 * string (NEXAR_COORD, a job name, a peer's address) can neither forge a log line nor put
 * raw bytes in the log; well-formed UTF-8 stays as it is.  Exact strings throughout.
 */
#include <stdio.h>
#include <string.h>

#include "text_escape.h"

static int failures;

static void expect(const char *in, size_t len, const char *want, int line)
{
    char out[256];
    size_t n = nx_text_escape(in, out, len);
    if (strcmp(out, want) || n != strlen(want)) {
        fprintf(stderr, "test_text_escape.c:%d: escaped to \"%s\" (%zu), expected \"%s\"\n", line, out,
                n, want);
        failures++;
    }
}
#define EXPECT(in, want) expect((in), 256, (want), __LINE__)
#define EXPECT_LEN(in, len, want) expect((in), (len), (want), __LINE__)

int main(void)
{
    EXPECT("plain text, 127.0.0.1:7000", "plain text, 127.0.0.1:7000");
    EXPECT("x:1\n12:00:00.000 nexard warn main: FORGED LOG LINE",
           "x:1\\x0a12:00:00.000 nexard warn main: FORGED LOG LINE");
    EXPECT("a\rb\tc\x1b[31md\x7f", "a\\x0db\\x09c\\x1b[31md\\x7f");
    /* Well-formed UTF-8 of 2, 3 and 4 bytes is kept. */
    EXPECT("h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x99\x82", "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x99\x82");
    /* Stray bytes, overlong forms, surrogates, beyond U+10FFFF, cut sequences. */
    EXPECT("\xff\xfe", "\\xff\\xfe");
    EXPECT("\xc0\xaf", "\\xc0\\xaf");
    EXPECT("\xe0\x80\xaf", "\\xe0\\x80\\xaf");
    EXPECT("\xed\xa0\x80", "\\xed\\xa0\\x80");
    EXPECT("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80");
    EXPECT("ok\xe2\x9c", "ok\\xe2\\x9c");
    EXPECT("\x80 lone", "\\x80 lone");
    /* A backslash stays: an escape is recognisable by its x and two hex digits. */
    EXPECT("C:\\dir", "C:\\dir");
    /* Out of room: nothing is cut in half, and the result is always terminated. */
    EXPECT_LEN("ab\ncd", 5, "ab");
    EXPECT_LEN("ab\xc3\xa9", 4, "ab");
    EXPECT_LEN("abc", 1, "");
    if (failures) {
        fprintf(stderr, "test_log: %d failures\n", failures);
        return 1;
    }
    printf("test_log: every case escaped exactly\n");
    return 0;
}
