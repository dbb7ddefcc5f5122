/*
 * test_bench.c - nexar-run -n 2 nexar-bench with checking on (-c 1) over every
 * collective (-t all) at 8 B .. 4 KiB, on one node, the way docs/tools.md shows it:
 * nccl-tests' output layout on stdout and the -m JSON lines beside it.
 *
 *  - malloc'd buffers (staged through the slots), arena buffers (-a, the direct path),
 *    every dtype x op of the reductions at one size (-d all -o all), and -c 0;
 *  - nexar-run exits 0; stdout starts with nccl-tests' header ("# nThread 1 nGpus 1
 *    minBytes ... graph: 0", "# Using devices", a "#  Rank N Group 0 Pid P on HOST"
 *    line per rank with real, distinct pids and this host);
 *  - every table the run must print is there, in the documented order, with
 *    nccl-tests' three header lines verbatim and exactly the rows its sizes give:
 *    size, count, type (nccl-tests' names), redop, root as documented, and both
 *    column groups, each with parsed numbers and #wrong 0 where nexar has that form
 *    of the call and N/A where it has not (docs/tools.md), at nccl-tests' widths;
 *  - each table ends in "# Out of bounds values : 0 OK" and "# Avg bus bandwidth : X"
 *    with X the mean busbw of its measurements;
 *  - -m FILE: FILE holds one JSON line per measurement and nothing else, stdout none of
 *    them; -m -: the JSON lines are on stderr, stdout still only the table.  Each JSON
 *    line says what its group says, and its algbw and busbw follow from size and time
 *    with the documented factor.
 * The expectations are computed here from the documentation, not read from the tool.
 */
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "itest.h"
#include "outfile.h"
#include "tjson.h"

#define RANKS 2
#define MAXLINES 4096

static int fails;
static const char *g_run, *g_bench;

struct coll {
    const char *name;
    int has_op, has_root, total; /* total: size is count x ranks elements */
    int out, in;                 /* the out-of-place / in-place group has numbers */
    double factor;               /* busbw / algbw */
};

/* docs/tools.md, nexar-bench: -t all in this order; the forms of each call; the busbw
 * factors for n = 2. */
static const struct coll colls[] = {
    {"all_reduce", 1, 0, 0, 0, 1, 2.0 * (RANKS - 1) / RANKS},
    {"broadcast", 0, 1, 0, 0, 1, 1},
    {"reduce", 1, 1, 0, 1, 1, 1},
    {"all_gather", 0, 0, 1, 1, 0, (RANKS - 1.0) / RANKS},
    {"reduce_scatter", 1, 0, 1, 1, 0, (RANKS - 1.0) / RANKS},
    {"gather", 0, 1, 1, 1, 0, (RANKS - 1.0) / RANKS},
    {"scatter", 0, 1, 1, 1, 0, (RANKS - 1.0) / RANKS},
    {"all_to_all", 0, 0, 1, 1, 0, (RANKS - 1.0) / RANKS},
    {"scan", 1, 0, 0, 0, 1, 1},
    {"exscan", 1, 0, 0, 0, 1, 1},
    {"all_reduce_bucketed", 1, 0, 0, 0, 1, 2.0 * (RANKS - 1) / RANKS},
    {"barrier", 0, 0, 0, 1, 0, 0},
    {"sendrecv", 0, 0, 0, 1, 0, 1},
};
#define NCOLLS (sizeof(colls) / sizeof(colls[0]))
#define COLL(i) (&colls[i])

/* nccl-tests' type names and order (-d all), and its op order (-o all). */
static const char *const dtypes[] = {"int8", "uint8",  "int32", "uint32", "int64",
                                     "uint64", "half", "float", "double", "bfloat16"};
static const int dsize[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))
static const char *const ops[] = {"sum", "prod", "max", "min"};

/* nccl-tests' column header (src/common.cu), without its trailing blanks. */
static const char *const table_header[] = {
    "#                                                              out-of-place"
    "                       in-place",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
    "            (us)  (GB/s)  (GB/s)",
};
/* 5 fields of 52 columns, then two groups of 32. */
#define ROW_WIDTH (52 + 2 * 32)

/* One expected row. */
struct want {
    const struct coll *c;
    long long size, count;
    const char *type, *redop;
};

/* One nexar-bench run and what it must print. */
struct run {
    const char *what;
    const char *const *args;
    int arena, checked;
    const char *machine; /* "file" or "stderr" */
    long long minb, maxb;
    const char *step;
    int warmup, iters;
    const struct want *w;
    int nw;
};

/* Runs nexar-run -n 2 --socket sock nexar-bench args; stdout and stderr into *out and
 * *err (free them). */
static int run_bench(const char *dir, const char *sock, const char *const *args, char **out,
                     char **err, double *dt)
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
    *err = tl_read_file(errp);
    if (rc != 0)
        tl_log("FAIL: nexar-run nexar-bench exited %d; stderr:\n%s", rc, *err);
    return rc;
}

/* Splits text into its lines (in place; empty lines kept).  Returns the count. */
static int split_lines(char *text, char **lines, int cap)
{
    int n = 0;
    for (char *p = text; p && *p && n < cap;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        lines[n++] = p;
        p = nl ? nl + 1 : NULL;
    }
    return n;
}

static int parse_num(const char *s, double *v)
{
    char *end;
    *v = strtod(s, &end);
    return end != s && !*end && isfinite(*v) ? 0 : -1;
}

/* Checks one group (4 tokens) of a row and, when it has numbers, the JSON line of that
 * measurement.  Adds its busbw to *busbw_sum. */
static void check_group(const struct run *rn, const struct want *w, int inpl,
                        char tok[4][16], const char *jline, double *busbw_sum, int *measured)
{
    const char *place = inpl ? "in-place" : "out-of-place";
    if (!(inpl ? w->c->in : w->c->out)) {
        for (int i = 0; i < 4; i++)
            EXPECT_TRUE(fails, !strcmp(tok[i], "N/A"), "%s %s %lld: %s field %d is '%s', "
                        "expected N/A", rn->what, w->c->name, w->size, place, i, tok[i]);
        return;
    }
    double t, algbw, busbw;
    const char *want_wrong = rn->checked ? "0" : "N/A";
    if (parse_num(tok[0], &t) || !(t > 0) || parse_num(tok[1], &algbw) ||
        parse_num(tok[2], &busbw) || strcmp(tok[3], want_wrong)) {
        tl_log("FAIL %s %s %lld: %s group \"%s %s %s %s\": expected time, algbw, busbw and "
               "#wrong %s", rn->what, w->c->name, w->size, place, tok[0], tok[1], tok[2],
               tok[3], want_wrong);
        fails++;
        return;
    }
    char why[160];
    struct tj *j = jline ? tj_parse(jline, why, sizeof(why)) : NULL;
    uint64_t js = 0, jc = 0, jw = 0, jranks = 0;
    double jt = 0, jalg = 0, jbus = 0, jroot = 0;
    int jarena = -1, jinpl = -1;
    const char *want_algo = !strcmp(w->c->name, "sendrecv") ? "-" : "local";
    int want_root = w->c->has_root ? 0 : -1;
    const char *jcoll = j ? tj_str(j, "collective") : NULL;
    const char *jtype = j ? tj_str(j, "type") : NULL, *jredop = j ? tj_str(j, "redop") : NULL;
    const char *jalgo = j ? tj_str(j, "algo") : NULL;
    int wrong_ok = j && (rn->checked ? !tj_u64(j, "wrong", &jw) && jw == 0
                                     : tj_at(j, "wrong") && tj_at(j, "wrong")->type == TJ_NULL);
    /* The table's time has 2 decimals below 100 us, 1 below 10000, then none. */
    double ttol = t < 100 ? 0.006 : t < 10000 ? 0.06 : 0.6;
    if (!j || !jcoll || strcmp(jcoll, w->c->name) || tj_u64(j, "ranks", &jranks) ||
        jranks != RANKS || tj_u64(j, "size", &js) || js != (uint64_t)w->size ||
        tj_u64(j, "count", &jc) || jc != (uint64_t)w->count || !jtype ||
        strcmp(jtype, w->type) || !jredop || strcmp(jredop, w->redop) ||
        tj_num(j, "root", &jroot) || jroot != want_root || tj_bool(j, "in_place", &jinpl) ||
        jinpl != inpl || tj_num(j, "time_us", &jt) || fabs(jt - t) > ttol ||
        tj_num(j, "algbw", &jalg) || fabs(jalg - algbw) > 0.0051 ||
        tj_num(j, "busbw", &jbus) || fabs(jbus - busbw) > 0.0051 || !wrong_ok ||
        tj_bool(j, "arena", &jarena) || jarena != rn->arena || !jalgo ||
        strcmp(jalgo, want_algo)) {
        tl_log("FAIL %s %s %lld: the %s JSON line does not match the row: %s %s", rn->what,
               w->c->name, w->size, place, jline ? jline : "(none)", j ? "" : why);
        fails++;
        tj_free(j);
        return;
    }
    /* algbw = size / time (1 GB = 1e9 B), busbw = algbw x factor; printed with 6
     * decimals from a time printed with 3. */
    double alg = (double)w->size / (jt * 1e-6) / 1e9;
    double tol = 2e-6 + alg * 1e-3;
    if (fabs(jalg - alg) > tol || fabs(jbus - jalg * w->c->factor) > tol + 1e-6) {
        tl_log("FAIL %s %s size %lld %s: algbw %.6f busbw %.6f, expected %.6f and x%.3f",
               rn->what, w->c->name, w->size, place, jalg, jbus, alg, w->c->factor);
        fails++;
    }
    *busbw_sum += jbus;
    (*measured)++;
    tj_free(j);
}

/* Checks one row line: the 5 fields, nccl-tests' widths, then both groups. */
static void check_row(const struct run *rn, const char *line, const struct want *w,
                      char **json, int njson, int *ji, double *busbw_sum, int *measured)
{
    long long size, count;
    char type[16], redop[16], g[2][4][16];
    int root, end = -1;
    int k = sscanf(line, "%lld %lld %15s %15s %d %15s %15s %15s %15s %15s %15s %15s %15s %n",
                   &size, &count, type, redop, &root, g[0][0], g[0][1], g[0][2], g[0][3],
                   g[1][0], g[1][1], g[1][2], g[1][3], &end);
    int want_root = w->c->has_root ? 0 : -1;
    if (k != 13 || end != (int)strlen(line) || strlen(line) != ROW_WIDTH || size != w->size ||
        count != w->count || strcmp(type, w->type) || strcmp(redop, w->redop) ||
        root != want_root) {
        tl_log("FAIL %s %s: row \"%s\": expected %d columns wide, size %lld count %lld %s %s "
               "root %d and 8 group fields", rn->what, w->c->name, line, ROW_WIDTH, w->size,
               w->count, w->type, w->redop, want_root);
        fails++;
        return;
    }
    for (int p = 0; p < 2; p++) {
        int has = p ? w->c->in : w->c->out;
        const char *jl = has && *ji < njson ? json[(*ji)++] : NULL;
        check_group(rn, w, p, g[p], jl, busbw_sum, measured);
    }
}

/* Checks lines[*li] == want and moves on. */
static void expect_line(const struct run *rn, char **lines, int n, int *li, const char *want)
{
    const char *got = *li < n ? lines[*li] : "(end of output)";
    EXPECT_TRUE(fails, !strcmp(got, want), "%s: line %d is \"%s\", expected \"%s\"", rn->what,
                *li + 1, got, want);
    (*li)++;
}

/* The header: parameters, devices with one line per rank. */
static void check_preamble(const struct run *rn, char **lines, int n, int *li)
{
    char want[256], host[64] = "";
    if (gethostname(host, 59) != 0) /* as nexar-bench: 59 bytes, else "?" */
        snprintf(host, sizeof(host), "?");
    host[59] = '\0';
    snprintf(want, sizeof(want), "# nexar-bench %s: %d ranks, one per process", NEXAR_VERSION,
             RANKS);
    expect_line(rn, lines, n, li, want);
    snprintf(want, sizeof(want),
             "# nThread 1 nGpus 1 minBytes %lld maxBytes %lld step: %s(factor) warmup iters: %d "
             "iters: %d agg iters: 1 validation: %d graph: 0",
             rn->minb, rn->maxb, rn->step, rn->warmup, rn->iters, rn->checked);
    expect_line(rn, lines, n, li, want);
    expect_line(rn, lines, n, li, "#");
    expect_line(rn, lines, n, li, "# Using devices");
    int pids[RANKS];
    for (int r = 0; r < RANKS; r++, (*li)++) {
        int rank = -1, group = -1, pid = 0, end = -1;
        char h[64] = "", bufs[32] = "";
        const char *l = *li < n ? lines[*li] : "";
        int k = sscanf(l, "#  Rank %d Group %d Pid %d on %63s device host [%31[^]]]%n", &rank,
                       &group, &pid, h, bufs, &end);
        pids[r] = pid;
        EXPECT_TRUE(fails, k == 5 && end == (int)strlen(l) && rank == r && group == 0 &&
                               pid > 0 && !strcmp(h, host) &&
                               !strcmp(bufs, rn->arena ? "nexar_alloc" : "malloc") &&
                               (r == 0 || pid != pids[0]),
                    "%s: rank line \"%s\": expected rank %d group 0, a pid, host %s, [%s]",
                    rn->what, l, r, host, rn->arena ? "nexar_alloc" : "malloc");
    }
    expect_line(rn, lines, n, li, "#");
}

/* Walks stdout: preamble, then the tables in order with their rows and summaries;
 * json[] holds the -m lines, one per measurement in row order. */
static void check_output(const struct run *rn, char *out, char **json, int njson)
{
    int before = fails, tables = 0, ji = 0;
    static char *lines[MAXLINES];
    int n = split_lines(out, lines, MAXLINES), li = 0;
    if (n > 0 && !lines[n - 1][0])
        n--; /* the text ends in a newline */
    for (int i = 0; i < n; i++)
        EXPECT_TRUE(fails, lines[i][0] != '{', "%s: a JSON line on stdout: %s", rn->what,
                    lines[i]);
    check_preamble(rn, lines, n, &li);
    for (int wi = 0; wi < rn->nw;) {
        const struct coll *c = rn->w[wi].c;
        char want[128];
        snprintf(want, sizeof(want), "# %s, %d ranks", c->name, RANKS);
        expect_line(rn, lines, n, &li, want);
        expect_line(rn, lines, n, &li, "#");
        for (int h = 0; h < 3; h++)
            expect_line(rn, lines, n, &li, table_header[h]);
        double busbw_sum = 0;
        int measured = 0;
        for (; wi < rn->nw && rn->w[wi].c == c; wi++, li++) {
            if (li >= n || lines[li][0] == '#') {
                tl_log("FAIL %s: %s size %lld: no row (line %d: %s)", rn->what, c->name,
                       rn->w[wi].size, li + 1, li < n ? lines[li] : "end of output");
                fails++;
                return;
            }
            check_row(rn, lines[li], &rn->w[wi], json, njson, &ji, &busbw_sum, &measured);
        }
        expect_line(rn, lines, n, &li,
                    rn->checked ? "# Out of bounds values : 0 OK"
                                : "# Out of bounds values : N/A (not checked, -c 0)");
        double avg = -1;
        const char *l = li < n ? lines[li] : "";
        if (!strcmp(c->name, "barrier")) {
            expect_line(rn, lines, n, &li, "# Avg bus bandwidth    : N/A");
        } else {
            EXPECT_TRUE(fails, sscanf(l, "# Avg bus bandwidth    : %lf", &avg) == 1 &&
                                   measured > 0 &&
                                   fabs(avg - busbw_sum / measured) <= 1e-6 + avg * 1e-5,
                        "%s: \"%s\": expected the mean busbw of %d measurements, %g", rn->what,
                        l, measured, measured ? busbw_sum / measured : 0);
            li++;
        }
        expect_line(rn, lines, n, &li, "#");
        tables++;
    }
    EXPECT_TRUE(fails, li == n, "%s: %d more lines after the last table: %s", rn->what, n - li,
                li < n ? lines[li] : "");
    EXPECT_TRUE(fails, ji == njson, "%s: %d JSON lines, %d measurements", rn->what, njson, ji);
    if (fails == before)
        tl_log("ok: %s: %d tables, %d rows, %d measurements, each as expected", rn->what,
               tables, rn->nw, ji);
}

/* The JSON lines of a run: from the -m FILE, which must hold nothing else, or the
 * lines of stderr that start with '{' (nexar-run notes may be there too). */
static int machine_lines(const struct run *rn, char *text, char **json)
{
    static char *lines[MAXLINES];
    int n = split_lines(text, lines, MAXLINES), k = 0;
    for (int i = 0; i < n; i++) {
        if (lines[i][0] == '{')
            json[k++] = lines[i];
        else if (!strcmp(rn->machine, "file") && lines[i][0])
            EXPECT_TRUE(fails, 0, "%s: -m FILE has a line that is no JSON object: %s",
                        rn->what, lines[i]);
    }
    return k;
}

/* The rows of -t all -b 8 -e 4K -f 8 with float sum. */
static int all_rows(struct want *w)
{
    int n = 0;
    for (size_t i = 0; i < NCOLLS; i++) {
        const struct coll *c = COLL(i);
        if (!strcmp(c->name, "barrier")) {
            w[n++] = (struct want){c, 0, 0, "none", "none"};
            continue;
        }
        for (long long size = 8; size <= 4096; size *= 8)
            w[n++] = (struct want){c, size, c->total ? size / 4 / RANKS : size / 4, "float",
                                   c->has_op ? "sum" : "none"};
    }
    return n;
}

/* The rows of -t all_reduce,reduce,reduce_scatter -d all -o all -b 64 -e 64: per
 * collective, dtype by dtype, op by op, in nccl-tests' orders. */
static int matrix_rows(struct want *w)
{
    int n = 0;
    const struct coll *cs[] = {COLL(0), COLL(2), COLL(4)};
    for (int k = 0; k < 3; k++)
        for (size_t d = 0; d < NDTYPES; d++)
            for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
                w[n++] = (struct want){cs[k], 64,
                                       cs[k]->total ? 64 / dsize[d] / RANKS : 64 / dsize[d],
                                       dtypes[d], ops[o]};
    return n;
}

/* The rows of -t reduce,all_gather -d bfloat16,int8 -b 8 -e 64 -f 8: int8 first. */
static int short_rows(struct want *w)
{
    int n = 0;
    const struct coll *cs[] = {COLL(2), COLL(3)};
    const char *ts[] = {"int8", "bfloat16"};
    const int tsz[] = {1, 2};
    for (int k = 0; k < 2; k++)
        for (int d = 0; d < 2; d++)
            for (long long size = 8; size <= 64; size *= 8)
                w[n++] = (struct want){cs[k], size,
                                       cs[k]->total ? size / tsz[d] / RANKS : size / tsz[d],
                                       ts[d], cs[k]->has_op ? "sum" : "none"};
    return n;
}

static void one_run(const struct hx_daemon *d, struct run *rn)
{
    char *out = NULL, *err = NULL;
    double dt = 0;
    static char *json[MAXLINES];
    if (run_bench(d->dir, d->sock, rn->args, &out, &err, &dt) != 0) {
        fails++;
    } else {
        char mpath[300];
        snprintf(mpath, sizeof(mpath), "%s/bench.json", d->dir);
        char *mtext = !strcmp(rn->machine, "file") ? tl_read_file(mpath) : NULL;
        int nj = machine_lines(rn, mtext ? mtext : err, json);
        check_output(rn, out, json, nj);
        free(mtext);
    }
    tl_log("%s: %.2f s", rn->what, dt);
    free(out);
    free(err);
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
    static struct want w[160];
    char mfile[300];
    snprintf(mfile, sizeof(mfile), "%s/bench.json", d.dir);

    /* -d f32: nexar's short name, printed as nccl-tests' "float". */
    int n = all_rows(w);
    const char *plain[] = {"-c", "1", "-t", "all", "-b", "8", "-e", "4K", "-f", "8", "-n", "2",
                           "-w", "1", "-d", "f32", "-m", mfile, NULL};
    struct run r1 = {"-t all, malloc'd buffers", plain, 0, 1, "file", 8, 4096, "8", 1, 2, w, n};
    one_run(&d, &r1);

    const char *arena[] = {"-c", "1", "-t", "all", "-b", "8", "-e", "4K", "-f", "8", "-n", "2",
                           "-w", "1", "-m", mfile, "-a", NULL};
    struct run r2 = {"-t all -a, arena buffers", arena, 1, 1, "file", 8, 4096, "8", 1, 2, w, n};
    one_run(&d, &r2);

    n = matrix_rows(w);
    const char *matrix[] = {"-c", "1", "-t", "all_reduce,reduce,reduce_scatter", "-d", "all",
                            "-o", "all", "-b", "64", "-e", "64", "-n", "1", "-w", "0", "-m",
                            mfile, NULL};
    struct run r3 = {"every dtype x op", matrix, 0, 1, "file", 64, 64, "2", 0, 1, w, n};
    one_run(&d, &r3);

    /* -m - (stderr), -c 0 (#wrong N/A, "wrong":null), the rows in nccl-tests' order. */
    n = short_rows(w);
    const char *err_m[] = {"-c", "0", "-t", "reduce,all_gather", "-d", "bfloat16,int8", "-b",
                           "8", "-e", "64", "-f", "8", "-n", "1", "-w", "0", "-m", "-", NULL};
    struct run r4 = {"-m - -c 0", err_m, 0, 0, "stderr", 8, 64, "8", 0, 1, w, n};
    one_run(&d, &r4);

    if (hx_daemon_stop(&d))
        fails++;
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
