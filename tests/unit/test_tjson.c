/*
 * test_tjson.c - the JSON reader the nexarctl tests rely on (tests/lib/tjson.c): it must
 * accept what RFC 8259 allows, refuse what it does not (so a tool printing broken JSON
 * fails its test), and find exactly the value a path names.
 */
#include <stdio.h>
#include <string.h>

#include "expect.h"
#include "tjson.h"

static void bad(const char *text)
{
    char err[200];
    struct tj *v = tj_parse(text, err, sizeof(err));
    if (v || !err[0]) {
        fprintf(stderr, "accepted invalid JSON: %s\n", text);
        failures++;
    }
    tj_free(v);
}

int main(void)
{
    char err[200];
    const char *doc =
        "{\"command\":\"comms\",\"status\":0,\"comms\":[{\"id\":1,\"job\":\"j\\\"x\\\\\","
        "\"ranks\":[{\"rank\":0,\"pid\":18446744073709551615},{\"rank\":1,\"pid\":7}]}],"
        " \"listen\" : null, \"ok\":true, \"no\":false, \"x\":-1.5e3, \"u\":\"\\u00e9\\ud83d\\ude00/\\/\","
        "\"empty\":[], \"o\":{}}";
    struct tj *v = tj_parse(doc, err, sizeof(err));
    EXPECT(v != NULL);
    if (!v) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    uint64_t u = 0;
    double d = 0;
    int b = -1;
    EXPECT(!strcmp(tj_str(v, "command"), "comms"));
    EXPECT(tj_u64(v, "status", &u) == 0 && u == 0);
    EXPECT(tj_len(v, "comms") == 1 && tj_len(v, "comms[0].ranks") == 2);
    EXPECT(!strcmp(tj_str(v, "comms[0].job"), "j\"x\\"));
    EXPECT(tj_u64(v, "comms[0].ranks[0].pid", &u) == 0 && u == UINT64_MAX);
    EXPECT(tj_u64(v, "comms[0].ranks[1].pid", &u) == 0 && u == 7);
    EXPECT(tj_u64(v, "comms[0].ranks[2].pid", &u) == -1);
    EXPECT(tj_u64(v, "comms[0].ranks[1].nope", &u) == -1);
    EXPECT(tj_u64(v, "x", &u) == -1 && tj_num(v, "x", &d) == 0 && d == -1500);
    EXPECT(tj_at(v, "listen") && tj_at(v, "listen")->type == TJ_NULL && !tj_str(v, "listen"));
    EXPECT(tj_bool(v, "ok", &b) == 0 && b == 1 && tj_bool(v, "no", &b) == 0 && b == 0);
    EXPECT(tj_bool(v, "status", &b) == -1);
    EXPECT(!strcmp(tj_str(v, "u"), "\xc3\xa9\xf0\x9f\x98\x80//"));
    EXPECT(tj_len(v, "empty") == 0 && tj_len(v, "o") == 0 && tj_len(v, "") == 10);
    EXPECT(tj_len(v, "command") == -1);
    EXPECT(tj_at(v, "comms.0") == NULL && tj_at(v, "comms[x]") == NULL);
    tj_free(v);

    bad("");
    bad("{");
    bad("{\"a\":1,}");
    bad("[1,]");
    bad("{\"a\" 1}");
    bad("{a:1}");
    bad("\"unterminated");
    bad("\"tab\there\"");
    bad("\"\\x\"");
    bad("\"\\ud800\"");
    bad("01");
    bad("1.");
    bad("-");
    bad("tru");
    bad("{} {}");
    bad("{\"a\":1} x");
    char deep[256] = "";
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    bad(deep); /* deeper than the reader's bound: refused, not a stack overflow */
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    else
        printf("tjson: all checks passed\n");
    return failures ? 1 : 0;
}
