/*
 * test_bench.c - nexar-run -n 2 nexar-bench with checking on (-c 1) over every
 * collective (-t all) at 8 B .. 4 KiB, on one node, the way docs/tools.md shows it:
 *
 *  - malloc'd buffers (staged through the slots), arena buffers (-a, the direct path), and
 *    every dtype x op of the reductions at one size (-d all -o all);
 *  - nexar-run exits 0; every table the run must print is there, in the documented
 *    order, with exactly the rows its sizes give: size, count (per-rank vector or the
 *    whole buffer over the ranks), type, redop, root and algo as documented, #wrong 0;
 *  - the -m JSON line of each row says the same, and its algbw and busbw follow from
 *    size and time with the documented factor;
 *  - the footer counts 0 wrong elements and every row.
 * The expectations are computed here from the documentation, not read from the tool.
 */
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "itest.h"
#include "outfile.h"
#include "tjson.h"

#define RANKS 2

static int fails;
static const char *g_run, *g_bench;

struct coll {
    const char *name;
    int has_op, has_root, total; /* total: size is count x ranks elements */
    double factor;               /* busbw / algbw */
};

/* docs/tools.md, nexar-bench: -t all in this order; the busbw factors for n = 2. */
static const struct coll colls[] = {
    {"all_reduce", 1, 0, 0, 2.0 * (RANKS - 1) / RANKS},
    {"broadcast", 0, 1, 0, 1},
    {"reduce", 1, 1, 0, 1},
    {"all_gather", 0, 0, 1, (RANKS - 1.0) / RANKS},
    {"reduce_scatter", 1, 0, 1, (RANKS - 1.0) / RANKS},
    {"gather", 0, 1, 1, (RANKS - 1.0) / RANKS},
    {"scatter", 0, 1, 1, (RANKS - 1.0) / RANKS},
    {"all_to_all", 0, 0, 1, (RANKS - 1.0) / RANKS},
    {"scan", 1, 0, 0, 1},
    {"exscan", 1, 0, 0, 1},
    {"all_reduce_bucketed", 1, 0, 0, 2.0 * (RANKS - 1) / RANKS},
    {"barrier", 0, 0, 0, 0},
    {"sendrecv", 0, 0, 0, 1},
};
#define NCOLLS (sizeof(colls) / sizeof(colls[0]))

static const char *const dtypes[] = {"f32", "f64", "f16", "bf16", "i8", "u8",
                                     "i32", "u32", "i64", "u64"};
static const int dsize[] = {4, 8, 2, 2, 1, 1, 4, 4, 8, 8};
static const char *const ops[] = {"sum", "prod", "min", "max"};

/* One expected row. */
struct want {
    const struct coll *c;
    long long size, count;
    const char *type, *redop;
};

/* Runs nexar-run -n 2 --socket sock nexar-bench args; stdout into *out (free it). */
static int run_bench(const char *dir, const char *sock, const char *const *args, char **out,
                     double *dt)
{
    const char *argv[48];
    int n = 0;
    argv[n++] = g_run;
    argv[n++] = "-n";
    argv[n++] = "2";
    argv[n++] = "--socket";
    argv[n++] = sock;
    argv[n++] = "--timeout";
    argv[n++] = "60";
    argv[n++] = g_bench;
    for (int i = 0; args[i] && n < 47; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    char cmd[4096], outp[300], errp[300];
    snprintf(outp, sizeof(outp), "%s/bench.out", dir);
    snprintf(errp, sizeof(errp), "%s/bench.err", dir);
    size_t off = 0;
    for (int i = 0; argv[i]; i++)
        off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, "'%s' ", argv[i]);
    snprintf(cmd + off, sizeof(cmd) - off, ">'%s' 2>'%s'", outp, errp);
    const char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    double t0 = tl_now();
    pid_t p = hx_spawn(sh, NULL, NULL);
    int ws = 0, rc;
    if (p < 0 || hx_wait_pid(p, 120, &ws)) {
        tl_log("FAIL: nexar-run nexar-bench did not end within 120 s");
        if (p > 0) {
            kill(p, SIGKILL);
            waitpid(p, &ws, 0);
        }
        rc = -1;
    } else {
        rc = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    }
    *dt = tl_now() - t0;
    *out = tl_read_file(outp);
    if (rc != 0) {
        char *err = tl_read_file(errp);
        tl_log("FAIL: nexar-run nexar-bench exited %d; stderr:\n%s", rc, err);
        free(err);
    }
    return rc;
}

/* Checks one table row line and its JSON line against w. */
static void check_row(const char *line, const char *jline, const struct want *w, int arena)
{
    long long size, count;
    char type[16], redop[16], wrong[16], algo[32];
    int root;
    double t, algbw, busbw;
    int k = sscanf(line, " %lld %lld %15s %15s %d %lf %lf %lf %15s %31s", &size, &count, type,
                   redop, &root, &t, &algbw, &busbw, wrong, algo);
    const char *want_algo = !strcmp(w->c->name, "sendrecv") ? "-" : "local";
    int want_root = w->c->has_root ? 0 : -1;
    if (k != 10 || size != w->size || count != w->count || strcmp(type, w->type) ||
        strcmp(redop, w->redop) || root != want_root || !(t > 0) || strcmp(wrong, "0") ||
        strcmp(algo, want_algo)) {
        tl_log("FAIL %s: row \"%s\": expected size %lld count %lld %s %s root %d #wrong 0 "
               "algo %s", w->c->name, line, w->size, w->count, w->type, w->redop, want_root,
               want_algo);
        fails++;
        return;
    }
    char why[160];
    struct tj *j = jline ? tj_parse(jline, why, sizeof(why)) : NULL;
    uint64_t js = 0, jc = 0, jw = 0, jranks = 0;
    double jt = 0, jalg = 0, jbus = 0, jroot = 0;
    int jarena = -1;
    const char *jcoll = j ? tj_str(j, "collective") : NULL;
    if (!j || !jcoll || strcmp(jcoll, w->c->name) || tj_u64(j, "ranks", &jranks) ||
        jranks != RANKS || tj_u64(j, "size", &js) || js != (uint64_t)size ||
        tj_u64(j, "count", &jc) || jc != (uint64_t)count || !tj_str(j, "type") ||
        strcmp(tj_str(j, "type"), type) || !tj_str(j, "redop") ||
        strcmp(tj_str(j, "redop"), redop) || tj_num(j, "root", &jroot) || jroot != root ||
        tj_num(j, "time_us", &jt) || fabs(jt - t) > 0.006 || tj_num(j, "algbw", &jalg) ||
        tj_num(j, "busbw", &jbus) || tj_u64(j, "wrong", &jw) || jw != 0 ||
        tj_bool(j, "arena", &jarena) || jarena != arena || !tj_str(j, "algo") ||
        strcmp(tj_str(j, "algo"), algo)) {
        tl_log("FAIL %s: the -m line does not match the row \"%s\": %s %s", w->c->name, line,
               jline ? jline : "(none)", j ? "" : why);
        fails++;
        tj_free(j);
        return;
    }
    /* algbw = size / time (1 GB = 1e9 B), busbw = algbw x factor; printed with 6
     * decimals from a time printed with 3. */
    double alg = (double)size / (jt * 1e-6) / 1e9;
    double tol = 2e-6 + alg * 1e-3;
    if (fabs(jalg - alg) > tol || fabs(jbus - jalg * w->c->factor) > tol + 1e-6) {
        tl_log("FAIL %s size %lld: algbw %.6f busbw %.6f, expected %.6f and x%.3f", w->c->name,
               size, jalg, jbus, alg, w->c->factor);
        fails++;
    }
    tj_free(j);
}

/* Walks the output: preamble, then the tables in order with their rows.  wants[] in
 * order; returns the number of rows seen. */
static int check_output(char *out, const struct want *wants, int nwant, int arena,
                        const char *what)
{
    int before = fails, seen = 0, tables = 0;
    const struct coll *cur = NULL;
    char *save = NULL;
    char pre[64];
    snprintf(pre, sizeof(pre), "# nexar-bench %s: %d ranks,", NEXAR_VERSION, RANKS);
    if (strncmp(out, pre, strlen(pre))) {
        tl_log("FAIL %s: the output does not start with \"%s\"", what, pre);
        fails++;
    }
    uint64_t rows_footer = 0;
    int wrong_ok = 0;
    for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char name[64];
        int n;
        if (sscanf(l, "# %63[a-z_], %d ranks", name, &n) == 2) {
            cur = NULL;
            for (size_t i = 0; i < NCOLLS; i++)
                if (!strcmp(colls[i].name, name))
                    cur = &colls[i];
            EXPECT_TRUE(fails, cur && n == RANKS, "%s: table \"%s\"", what, l);
            tables++;
            continue;
        }
        unsigned long long v;
        if (sscanf(l, "# Rows : %llu", &v) == 1) {
            rows_footer = v;
            continue;
        }
        if (!strcmp(l, "# Wrong elements       : 0 OK")) {
            wrong_ok = 1;
            continue;
        }
        if (l[0] == '#' || l[0] == '{')
            continue;
        /* A row; its -m JSON line follows it. */
        char *j = strtok_r(NULL, "\n", &save);
        if (seen >= nwant) {
            tl_log("FAIL %s: an unexpected row: %s", what, l);
            fails++;
            continue;
        }
        const struct want *w = &wants[seen++];
        if (cur != w->c) {
            tl_log("FAIL %s: a row of %s in the table of %s (expected %s size %lld)", what,
                   w->c->name, cur ? cur->name : "nothing", w->c->name, w->size);
            fails++;
            continue;
        }
        check_row(l, j && j[0] == '{' ? j : NULL, w, arena);
    }
    EXPECT_TRUE(fails, seen == nwant, "%s: %d rows, expected %d", what, seen, nwant);
    EXPECT_TRUE(fails, rows_footer == (uint64_t)nwant, "%s: footer says %llu rows, expected %d",
                what, (unsigned long long)rows_footer, nwant);
    EXPECT_TRUE(fails, wrong_ok, "%s: no \"# Wrong elements : 0 OK\" footer", what);
    if (fails == before)
        tl_log("ok: %s: %d tables, %d rows, each as expected, 0 wrong", what, tables, seen);
    return seen;
}

/* The rows of -t all -b 8 -e 4K -f 8 with f32 sum. */
static int all_rows(struct want *w)
{
    int n = 0;
    for (size_t i = 0; i < NCOLLS; i++) {
        const struct coll *c = &colls[i];
        if (!strcmp(c->name, "barrier")) {
            w[n++] = (struct want){c, 0, 0, "none", "none"};
            continue;
        }
        for (long long size = 8; size <= 4096; size *= 8)
            w[n++] = (struct want){c, size, c->total ? size / 4 / RANKS : size / 4, "f32",
                                   c->has_op ? "sum" : "none"};
    }
    return n;
}

/* The rows of -t all_reduce,reduce_scatter -d all -o all -b 64 -e 64: per collective,
 * dtype by dtype, op by op (prod/min/max/sum as the -o all list). */
static int matrix_rows(struct want *w)
{
    int n = 0;
    const struct coll *cs[] = {&colls[0], &colls[4]};
    for (int k = 0; k < 2; k++)
        for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++)
            for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
                w[n++] = (struct want){cs[k], 64,
                                       cs[k]->total ? 64 / dsize[d] / RANKS : 64 / dsize[d],
                                       dtypes[d], ops[o]};
    return n;
}

int main(void)
{
    hx_require_nexard();
    g_run = getenv("NEXAR_RUN");
    g_bench = getenv("NEXAR_BENCH");
    if (!g_run || access(g_run, X_OK) || !g_bench || access(g_bench, X_OK)) {
        tl_log("SKIP: $NEXAR_RUN or $NEXAR_BENCH is not executable");
        return HX_SKIP;
    }
    struct hx_daemon d;
    if (hx_daemon_start(&d, NULL))
        return 1;
    static struct want w[128];
    char *out = NULL;
    double dt = 0;

    int n = all_rows(w);
    const char *plain[] = {"-c", "1", "-t", "all", "-b", "8", "-e", "4K", "-f", "8", "-n", "2",
                           "-w", "1", "-m", NULL};
    if (run_bench(d.dir, d.sock, plain, &out, &dt) == 0)
        check_output(out, w, n, 0, "-t all, malloc'd buffers");
    else
        fails++;
    tl_log("-t all -c 1 (plain): %.2f s", dt);
    free(out);

    const char *arena[] = {"-c", "1", "-t", "all", "-b", "8", "-e", "4K", "-f", "8", "-n", "2",
                           "-w", "1", "-m", "-a", NULL};
    if (run_bench(d.dir, d.sock, arena, &out, &dt) == 0)
        check_output(out, w, n, 1, "-t all -a, arena buffers");
    else
        fails++;
    tl_log("-t all -c 1 -a (arena): %.2f s", dt);
    free(out);

    n = matrix_rows(w);
    const char *matrix[] = {"-c", "1", "-t", "all_reduce,reduce_scatter", "-d", "all", "-o",
                            "all", "-b", "64", "-e", "64", "-n", "1", "-w", "0", "-m", NULL};
    if (run_bench(d.dir, d.sock, matrix, &out, &dt) == 0)
        check_output(out, w, n, 0, "every dtype x op");
    else
        fails++;
    tl_log("-d all -o all: %.2f s", dt);
    free(out);

    if (hx_daemon_stop(&d))
        fails++;
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
