/*
 * opts.c - nexar-bench's command line (the nccl-tests letters where they exist).
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench.h"
#include "util.h"

/* nccl-tests' names: what the table prints. */
static const char *const dtype_names[NEXAR_DTYPE_COUNT] = {
    [NEXAR_F32] = "float", [NEXAR_F64] = "double", [NEXAR_F16] = "half",
    [NEXAR_BF16] = "bfloat16", [NEXAR_I8] = "int8", [NEXAR_U8] = "uint8",
    [NEXAR_I32] = "int32", [NEXAR_U32] = "uint32", [NEXAR_I64] = "int64",
    [NEXAR_U64] = "uint64",
};

/* nexar's short names (what the table printed before) and MPI-ish spellings, so
 * that command lines carry over. */
static const struct {
    const char *alias;
    nexar_dtype_t d;
} dtype_aliases[] = {
    {"f32", NEXAR_F32},  {"float32", NEXAR_F32}, {"f64", NEXAR_F64}, {"float64", NEXAR_F64},
    {"f16", NEXAR_F16},  {"float16", NEXAR_F16}, {"bf16", NEXAR_BF16}, {"i8", NEXAR_I8},
    {"char", NEXAR_I8},  {"u8", NEXAR_U8},       {"i32", NEXAR_I32}, {"int", NEXAR_I32},
    {"u32", NEXAR_U32},  {"i64", NEXAR_I64},     {"u64", NEXAR_U64},
};

static const char *const op_names[NEXAR_OP_COUNT] = {
    [NEXAR_SUM] = "sum", [NEXAR_PROD] = "prod", [NEXAR_MIN] = "min", [NEXAR_MAX] = "max",
};

const nexar_dtype_t nxb_dtype_order[NEXAR_DTYPE_COUNT] = {
    NEXAR_I8,  NEXAR_U8,  NEXAR_I32, NEXAR_U32, NEXAR_I64,
    NEXAR_U64, NEXAR_F16, NEXAR_F32, NEXAR_F64, NEXAR_BF16,
};
const nexar_op_t nxb_op_order[NEXAR_OP_COUNT] = {NEXAR_SUM, NEXAR_PROD, NEXAR_MAX, NEXAR_MIN};

const char *nxb_dtype_name(nexar_dtype_t d)
{
    return (unsigned)d < NEXAR_DTYPE_COUNT ? dtype_names[d] : "?";
}

const char *nxb_op_name(nexar_op_t op)
{
    return (unsigned)op < NEXAR_OP_COUNT ? op_names[op] : "?";
}

static void usage(FILE *f)
{
    fprintf(f,
"Usage: nexar-run -n N nexar-bench [options]\n"
"Measures nexar collectives in the style of nccl-tests; run one process per rank.\n"
"\n"
"  -b SIZE    smallest size in bytes (default 8); suffixes K M G\n"
"  -e SIZE    largest size in bytes (default 64M)\n"
"  -f FACTOR  each size is the previous one times FACTOR (default 2)\n"
"  -n ITERS   timed iterations per size (default 20)\n"
"  -w ITERS   untimed warm-up iterations per size (default 5)\n"
"  -c 0|1     check every size against an independent reference (default 1)\n"
"  -d TYPE    int8 uint8 int32 uint32 int64 uint64 half float double bfloat16,\n"
"             a comma list, or all (default float); also f32 f64 f16 bf16 i8 u8 i32\n"
"             u32 i64 u64\n"
"  -o OP      sum prod max min, a comma list, or all (default sum)\n"
"  -r ROOT    root of broadcast, reduce, gather and scatter (default 0)\n"
"  -t COLLS   comma list or all (default all_reduce): all_reduce broadcast reduce\n"
"             all_gather reduce_scatter gather scatter all_to_all scan exscan\n"
"             all_reduce_bucketed barrier sendrecv\n"
"  -a         use buffers from nexar_alloc (the zero-copy direct path)\n"
"  -m FILE    machine-readable: one JSON object per measurement into FILE, or\n"
"             onto stderr for -m - (never onto stdout, which has the table)\n"
"  -p         progress on stderr\n"
"  -h, --help this text\n"
"\n"
"Each row has nccl-tests' two groups: out-of-place (separate send and receive\n"
"buffers) and in-place (one buffer); N/A where nexar.h has no such form of the call.\n"
"\"size\" is the per-rank vector for all_reduce, broadcast, reduce, scan, exscan,\n"
"sendrecv and the total buffer for all_gather, reduce_scatter, gather, scatter and\n"
"all_to_all.  time is the slowest rank's mean; algbw = size / time;\n"
"busbw = algbw * 2(n-1)/n (all_reduce), (n-1)/n (all_gather, reduce_scatter,\n"
"all_to_all, gather, scatter), 1 (broadcast, reduce, scan, exscan, sendrecv).\n"
"\n"
"Exit status: 0; 1-10 the nexar_status_t of a failed call; 64 usage; 65 #wrong > 0;\n"
"73 the -m FILE cannot be opened.\n");
}

/* Every rank parses the same command line: only one of them reports its errors. */
static bool quiet_rank(void)
{
    const char *r = getenv("NEXAR_RANK");
    return r && strcmp(r, "0") != 0;
}

static void __attribute__((noreturn, format(printf, 1, 2))) bad(const char *fmt, ...)
{
    if (!quiet_rank()) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fprintf(stderr, "nexar-bench: %s\nTry 'nexar-bench --help'.\n", msg);
    }
    exit(NXB_EXIT_USAGE);
}

static int lookup_dtype(const char *s)
{
    for (int d = 0; d < NEXAR_DTYPE_COUNT; d++)
        if (!strcasecmp(s, dtype_names[d]))
            return d;
    for (size_t i = 0; i < sizeof(dtype_aliases) / sizeof(dtype_aliases[0]); i++)
        if (!strcasecmp(s, dtype_aliases[i].alias))
            return (int)dtype_aliases[i].d;
    return -1;
}

static int lookup_op(const char *s)
{
    for (int o = 0; o < NEXAR_OP_COUNT; o++)
        if (!strcasecmp(s, op_names[o]))
            return o;
    return -1;
}

/* Parses "a,b,c" or "all" into sel[0..n); lookup maps one name to an index. */
static void parse_list(const char *what, const char *arg, bool *sel, int n,
                       int (*lookup)(const char *))
{
    memset(sel, 0, sizeof(bool) * (size_t)n);
    char *copy = nxt_xstrdup(arg), *save = NULL;
    int picked = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!strcasecmp(tok, "all")) {
            for (int i = 0; i < n; i++)
                sel[i] = true;
            picked++;
            continue;
        }
        int i = lookup(tok);
        if (i < 0)
            bad("unknown %s '%s'", what, tok);
        sel[i] = true;
        picked++;
    }
    free(copy);
    if (!picked)
        bad("empty %s list", what);
}

static uint64_t size_arg(const char *flag, const char *arg)
{
    uint64_t v;
    if (nxt_parse_size(arg, &v) < 0)
        bad("%s: not a size: '%s' (digits with an optional K, M or G)", flag, arg);
    return v;
}

static long long_arg(const char *flag, const char *arg, long min, long max)
{
    long v;
    if (nxt_parse_long(arg, min, max, &v) < 0)
        bad("%s: expected an integer in [%ld, %ld], got '%s'", flag, min, max, arg);
    return v;
}

void nxb_opts_parse(struct nxb_opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof(*o));
    o->min_bytes = 8;
    o->max_bytes = 64u << 20;
    o->factor = 2;
    o->iters = 20;
    o->warmup = 5;
    o->check = true;
    o->dtype[NEXAR_F32] = true;
    o->op[NEXAR_SUM] = true;
    o->coll[NXB_ALL_REDUCE] = true;

    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0; /* our own messages, printed by one rank */
    int ch;
    while ((ch = getopt_long(argc, argv, ":b:e:f:n:w:c:d:o:r:t:am:ph", longopts, NULL)) != -1) {
        switch (ch) {
        case 'b': o->min_bytes = size_arg("-b", optarg); break;
        case 'e': o->max_bytes = size_arg("-e", optarg); break;
        case 'f': {
            char *end;
            o->factor = strtod(optarg, &end);
            if (*end || !(o->factor > 1.0) || o->factor > 1e6)
                bad("-f: the factor must be a number > 1, got '%s'", optarg);
            break;
        }
        case 'n': o->iters = long_arg("-n", optarg, 1, 1000000000); break;
        case 'w': o->warmup = long_arg("-w", optarg, 0, 1000000000); break;
        case 'c': o->check = long_arg("-c", optarg, 0, 1) != 0; break;
        case 'd': parse_list("dtype", optarg, o->dtype, NEXAR_DTYPE_COUNT, lookup_dtype); break;
        case 'o': parse_list("op", optarg, o->op, NEXAR_OP_COUNT, lookup_op); break;
        case 'r': o->root = (int)long_arg("-r", optarg, 0, 1 << 30); break;
        case 't': parse_list("collective", optarg, o->coll, NXB_COLL_COUNT, nxb_coll_lookup); break;
        case 'a': o->arena = true; break;
        case 'm':
            /* "-m -b 8" (the old -m took no argument) must not write a file "-b". */
            if (optarg[0] == '-' && optarg[1])
                bad("-m needs a file name, or - for stderr; got '%s'", optarg);
            o->machine = optarg;
            break;
        case 'p': o->progress = true; break;
        case 'h': usage(stdout); exit(0);
        case ':': bad("option -%c needs an argument", optopt);
        default:
            if (optopt)
                bad("unknown option -%c", optopt);
            bad("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        bad("unexpected argument '%s'", argv[optind]);
    if (o->min_bytes > o->max_bytes)
        bad("-b %llu is larger than -e %llu", (unsigned long long)o->min_bytes,
            (unsigned long long)o->max_bytes);
}
