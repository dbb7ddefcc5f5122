/*
 * report.c - the table in nccl-tests' layout on stdout, and JSON lines for -m.
 *
 * The layout is that of nccl-tests' src/common.cu (all_reduce_perf and friends): the
 * "# nThread ..." parameters line, "# Using devices" with a line per rank, then per
 * collective the two-group column header, one row per point with an out-of-place and
 * an in-place group, and the "# Out of bounds values" / "# Avg bus bandwidth" lines.
 * The widths are nccl-tests'; header lines end without its trailing blanks.
 *
 * The JSON lines never go to stdout: a reader of the table (nccl-tests parsers,
 * scripts that split on blanks) must see nothing else there.  Only rank 0 calls
 * these.  Every line is flushed at once: under nexar-run the output is a pipe, and a
 * long sweep should show its rows as they come.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

static FILE *machine_out; /* -m: a file, stderr, or NULL */
static bool machine_file; /* machine_out is ours to close */

/* Per table: the busbw of every measurement and the measurements found wrong. */
static double table_busbw_sum;
static unsigned table_measured, table_failed;
static uint64_t total_wrong;

int nxb_report_open(const struct nxb_opts *o)
{
    if (!o->machine)
        return 0;
    if (!strcmp(o->machine, "-")) {
        machine_out = stderr;
        return 0;
    }
    machine_out = fopen(o->machine, "w");
    if (!machine_out)
        return -errno;
    machine_file = true;
    return 0;
}

/* printf, without the blanks nccl-tests leaves at the end of its header lines. */
static void __attribute__((format(printf, 1, 2))) header_line(const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    size_t n = strlen(line);
    while (n > 0 && line[n - 1] == ' ')
        line[--n] = '\0';
    printf("%s\n", line);
}

void nxb_report_preamble(const struct nxb_opts *o, int ranks,
                         const struct nxb_rank_info *info)
{
    printf("# nexar-bench %s: %d ranks, one per process\n", NEXAR_VERSION, ranks);
    /* nccl-tests' parameters line: each process is one thread with one "GPU", no
     * aggregated iterations, no CUDA graphs. */
    printf("# nThread 1 nGpus 1 minBytes %llu maxBytes %llu step: %g(factor) warmup iters: "
           "%ld iters: %ld agg iters: 1 validation: %d graph: 0\n",
           (unsigned long long)o->min_bytes, (unsigned long long)o->max_bytes, o->factor,
           o->warmup, o->iters, o->check);
    printf("#\n# Using devices\n");
    for (int r = 0; r < ranks; r++)
        printf("#  Rank %2d Group %2d Pid %6d on %10s device host [%s]\n", r, 0,
               (int)info[r].pid, info[r].host, o->arena ? "nexar_alloc" : "malloc");
    printf("#\n");
    fflush(stdout);
}

void nxb_report_table_begin(enum nxb_coll c, int ranks)
{
    printf("# %s, %d ranks\n#\n", nxb_colls[c].name, ranks);
    header_line("# %10s  %12s  %8s  %6s  %6s           out-of-place                       "
                "in-place", "", "", "", "", "");
    header_line("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                "algbw", "busbw", "#wrong");
    header_line("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                "(GB/s)", "");
    fflush(stdout);
    table_busbw_sum = 0;
    table_measured = table_failed = 0;
}

/* One group of a row: "  time  algbw  busbw  #wrong", nccl-tests' widths; the time
 * with fewer decimals as it grows, as nccl-tests prints it. */
static void print_group(const struct nxb_result *g)
{
    if (!g->ran) {
        printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
        return;
    }
    char t[32], w[24];
    snprintf(t, sizeof(t), g->time_us >= 10000.0 ? "%7.0f" : g->time_us >= 100.0 ? "%7.1f"
                                                                                : "%7.2f",
             g->time_us);
    if (g->wrong < 0)
        snprintf(w, sizeof(w), "N/A");
    else
        snprintf(w, sizeof(w), "%lld", (long long)g->wrong);
    printf("  %7s  %6.2f  %6.2f  %5s", t, g->algbw, g->busbw, w);
}

static void machine_line(const struct nxb_opts *o, const struct nxb_row *r,
                         const char *type, const char *redop, enum nxb_place p)
{
    const struct nxb_result *g = &r->res[p];
    char wrong[24];
    if (g->wrong < 0)
        snprintf(wrong, sizeof(wrong), "null");
    else
        snprintf(wrong, sizeof(wrong), "%lld", (long long)g->wrong);
    fprintf(machine_out,
            "{\"collective\":\"%s\",\"ranks\":%d,\"size\":%llu,\"count\":%zu,"
            "\"type\":\"%s\",\"redop\":\"%s\",\"root\":%d,\"in_place\":%s,\"time_us\":%.3f,"
            "\"algbw\":%.6f,\"busbw\":%.6f,\"wrong\":%s,\"arena\":%s,\"algo\":\"%s\"}\n",
            nxb_colls[r->coll].name, r->ranks, (unsigned long long)r->bytes, r->count, type,
            redop, r->root, p == NXB_INPL ? "true" : "false", g->time_us, g->algbw, g->busbw,
            wrong, o->arena ? "true" : "false", g->algo ? g->algo : "-");
    fflush(machine_out);
}

void nxb_report_row(const struct nxb_opts *o, const struct nxb_row *r)
{
    const struct nxb_coll_desc *cd = &nxb_colls[r->coll];
    const char *type = cd->has_data ? nxb_dtype_name(r->dtype) : "none";
    const char *redop = cd->has_op ? nxb_op_name(r->op) : "none";

    printf("%12llu  %12zu  %8s  %6s  %6d", (unsigned long long)r->bytes, r->count, type,
           redop, r->root);
    for (int p = 0; p < NXB_PLACES; p++)
        print_group(&r->res[p]);
    printf("\n");
    fflush(stdout);

    for (int p = 0; p < NXB_PLACES; p++) {
        const struct nxb_result *g = &r->res[p];
        if (!g->ran)
            continue;
        if (machine_out)
            machine_line(o, r, type, redop, (enum nxb_place)p);
        table_busbw_sum += g->busbw;
        table_measured++;
        if (g->wrong > 0) {
            table_failed++;
            total_wrong += (uint64_t)g->wrong;
        }
    }
}

void nxb_report_table_end(const struct nxb_opts *o, enum nxb_coll c)
{
    /* nccl-tests counts the checks that failed, not the wrong elements. */
    if (o->check)
        printf("# Out of bounds values : %u %s\n", table_failed, table_failed ? "FAILED" : "OK");
    else
        printf("# Out of bounds values : N/A (not checked, -c 0)\n");
    if (nxb_colls[c].has_data && table_measured)
        printf("# Avg bus bandwidth    : %g\n", table_busbw_sum / table_measured);
    else
        printf("# Avg bus bandwidth    : N/A\n");
    printf("#\n");
    fflush(stdout);
}

uint64_t nxb_report_finish(void)
{
    if (machine_file && fclose(machine_out) != 0)
        fprintf(stderr, "nexar-bench: -m: writing the JSON lines failed: %s\n",
                strerror(errno));
    machine_out = NULL;
    machine_file = false;
    return total_wrong;
}
