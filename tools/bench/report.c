/*
 * report.c - nccl-tests-style tables, and JSON lines for -m.
 *
 * Only rank 0 calls these.  Every line is flushed at once: under nexar-run the
 * output is a pipe, and a long sweep should show its rows as they come.
 */
#include <stdio.h>

#include "bench.h"

/* Column layout shared by the header and the rows. */
#define HDR_FMT "#%11s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s  %s\n"
#define ROW_FMT " %11llu  %12zu  %8s  %6s  %6d  %9.2f  %7.2f  %7.2f  %6s  %s\n"

static double table_busbw_sum;
static unsigned table_rows;
static uint64_t total_wrong;
static unsigned total_rows;
static bool checked;

void nxb_report_preamble(const struct nxb_opts *o, int ranks)
{
    printf("# nexar-bench %s: %d ranks, minBytes %llu maxBytes %llu step: %g(factor) "
           "warmup iters: %ld iters: %ld validation: %d buffers: %s\n",
           NEXAR_VERSION, ranks, (unsigned long long)o->min_bytes,
           (unsigned long long)o->max_bytes, o->factor, o->warmup, o->iters, o->check,
           o->arena ? "arena" : "plain");
    fflush(stdout);
    checked = o->check;
}

void nxb_report_table_begin(enum nxb_coll c, int ranks)
{
    printf("#\n# %s, %d ranks\n#\n", nxb_colls[c].name, ranks);
    printf(HDR_FMT, "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
           "#wrong", "algo");
    /* The units line ends at busbw: no trailing blanks. */
    printf("#%11s  %12s  %8s  %6s  %6s  %9s  %7s  %7s\n", "(B)", "(elements)", "", "", "",
           "(us)", "(GB/s)", "(GB/s)");
    fflush(stdout);
    table_busbw_sum = 0;
    table_rows = 0;
}

void nxb_report_row(const struct nxb_opts *o, const struct nxb_row *r)
{
    const struct nxb_coll_desc *cd = &nxb_colls[r->coll];
    const char *type = cd->has_data ? nxb_dtype_name(r->dtype) : "none";
    const char *redop = cd->has_op ? nxb_op_name(r->op) : "none";
    char wrong[24];
    if (r->wrong < 0)
        snprintf(wrong, sizeof(wrong), "N/A");
    else
        snprintf(wrong, sizeof(wrong), "%lld", (long long)r->wrong);

    const char *algo = r->algo ? r->algo : "-";
    printf(ROW_FMT, (unsigned long long)r->bytes, r->count, type, redop, r->root, r->time_us,
           r->algbw, r->busbw, wrong, algo);
    if (o->machine)
        printf("{\"collective\":\"%s\",\"ranks\":%d,\"size\":%llu,\"count\":%zu,"
               "\"type\":\"%s\",\"redop\":\"%s\",\"root\":%d,\"time_us\":%.3f,"
               "\"algbw\":%.6f,\"busbw\":%.6f,\"wrong\":%s,\"arena\":%s,\"algo\":\"%s\"}\n",
               cd->name, r->ranks, (unsigned long long)r->bytes, r->count, type, redop,
               r->root, r->time_us, r->algbw, r->busbw, r->wrong < 0 ? "null" : wrong,
               o->arena ? "true" : "false", algo);
    fflush(stdout);

    table_busbw_sum += r->busbw;
    table_rows++;
    total_rows++;
    if (r->wrong > 0)
        total_wrong += (uint64_t)r->wrong;
}

void nxb_report_table_end(enum nxb_coll c)
{
    if (nxb_colls[c].has_data && table_rows)
        printf("# Avg bus bandwidth    : %.3f GB/s\n", table_busbw_sum / table_rows);
    fflush(stdout);
}

uint64_t nxb_report_finish(const struct nxb_opts *o)
{
    (void)o;
    printf("#\n# Wrong elements       : %llu %s\n", (unsigned long long)total_wrong,
           !checked ? "(not checked)" : total_wrong ? "FAILED" : "OK");
    printf("# Rows                 : %u\n#\n", total_rows);
    fflush(stdout);
    return total_wrong;
}
