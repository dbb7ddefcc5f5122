/*
 * opts.c - nexar-run's command line.
 *
 * Options end at the first non-option argument (getopt's '+'), so that the
 * program's own flags are never taken for ours: `nexar-run -n 2 prog -n 5`.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"
#include "util.h"

enum {
    OPT_SOCKET = 256,
    OPT_JOB,
    OPT_TIMEOUT,
    OPT_GRACE,
    OPT_DAEMON,
    OPT_DAEMON_ARG,
    OPT_KEEP_DAEMON,
    OPT_VERSION,
    OPT_NODES,
    OPT_BIND,
    OPT_JOIN,
};

static void usage(FILE *f)
{
    fprintf(f,
"Usage: nexar-run [-n N] [options] [--] PROGRAM [ARGS...]\n"
"Starts N ranks of PROGRAM on this machine as one nexar job.\n"
"\n"
"  -n, --np N            number of ranks (default 1)\n"
"      --nodes K         simulate K nodes: K private nexards on 127.0.0.1, each with\n"
"                        its own socket, port and certificate (one CA made for the\n"
"                        run); ranks go to them in blocks, node 0 coordinates\n"
"      --bind node|rank|none  with --nodes: run each node's daemon and ranks on\n"
"                        that node's share of the CPUs, as real nodes have their own\n"
"                        (default node); rank: also each rank on its own share of\n"
"                        its node's CPUs (one node too) while the node has a CPU\n"
"                        for each, as mpirun binds its ranks; none leaves placement\n"
"                        to the kernel\n"
"      --socket PATH     nexard socket (default $NEXAR_SOCKET, else\n"
"                        /run/nexar/nexard.sock); when no daemon answers there, a\n"
"                        private nexard is started in a temporary directory\n"
"      --job NAME        job name (NEXAR_JOB; default run-<pid>-<time>-<random>)\n"
"      --join JOB        start the N processes as joiners of the running job JOB\n"
"                        (NEXAR_JOIN=1): a communicator of it that grows\n"
"                        (nexar_comm_grow) takes them; needs the daemon that runs JOB\n"
"      --timeout S       NEXAR_TIMEOUT for the ranks: formation and per-op deadline\n"
"      --grace S         after a rank fails, wait S seconds (default 5) for the\n"
"                        others, then SIGTERM them, then SIGKILL 2 s later\n"
"      --daemon PATH     the nexard to start (default $NEXARD, next to nexar-run,\n"
"                        the build tree, then $PATH)\n"
"      --daemon-arg ARG  one more argument for the private nexard (repeatable)\n"
"      --keep-daemon     leave the private nexard running and print its socket\n"
"  -q, --quiet           no summary line and no notes on stderr\n"
"  -v, --verbose         notes on what nexar-run does; the daemon logs to stderr\n"
"  -h, --help            this text\n"
"      --version\n"
"\n"
"Every rank gets NEXAR_RANK, NEXAR_WORLD_SIZE, NEXAR_LOCAL_RANK, NEXAR_JOB,\n"
"NEXAR_SOCKET, with --timeout NEXAR_TIMEOUT, with --nodes NEXAR_COORD, and with --join\n"
"NEXAR_JOIN=1 (its rank then comes from the grown communicator).  Without --join it\n"
"also gets torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, and MASTER_ADDR\n"
"(127.0.0.1) and MASTER_PORT (a free port) unless they are set, so that\n"
"torch.distributed's env:// rendezvous works.  SIGINT, SIGTERM and SIGHUP are\n"
"forwarded to the ranks; a second one kills them.\n"
"\n"
"Exit status: 0 when every rank exited 0; else the first failing rank's status\n"
"(128+S for a rank killed by signal S); 2 no daemon could be reached or started;\n"
"64 usage; 71 a system call failed; 126/127 PROGRAM is not executable / not found.\n");
}

static void __attribute__((noreturn)) bad(const char *msg, const char *arg)
{
    nxt_warn("%s%s%s", msg, arg ? ": " : "", arg ? arg : "");
    fprintf(stderr, "Try 'nexar-run --help'.\n");
    exit(NXR_EXIT_USAGE);
}

void run_opts_parse(struct run_opts *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"np", required_argument, NULL, 'n'},
        {"nodes", required_argument, NULL, OPT_NODES},
        {"bind", required_argument, NULL, OPT_BIND},
        {"socket", required_argument, NULL, OPT_SOCKET},
        {"job", required_argument, NULL, OPT_JOB},
        {"join", required_argument, NULL, OPT_JOIN},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"grace", required_argument, NULL, OPT_GRACE},
        {"daemon", required_argument, NULL, OPT_DAEMON},
        {"daemon-arg", required_argument, NULL, OPT_DAEMON_ARG},
        {"keep-daemon", no_argument, NULL, OPT_KEEP_DAEMON},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    o->nranks = 1;
    o->nodes = 1;
    o->grace = 5;
    o->daemon_args = nxt_xcalloc((size_t)argc + 1, sizeof(char *));

    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "+:n:qvh", longopts, NULL)) != -1) {
        long v;
        double s;
        switch (ch) {
        case 'n':
            if (nxt_parse_long(optarg, 1, 65536, &v) < 0)
                bad("-n expects a rank count from 1 to 65536", optarg);
            o->nranks = (int)v;
            break;
        case OPT_NODES:
            if (nxt_parse_long(optarg, 1, 256, &v) < 0)
                bad("--nodes expects a node count from 1 to 256", optarg);
            o->nodes = (int)v;
            break;
        case OPT_BIND:
            if (!strcmp(optarg, "node"))
                o->bind = RUN_BIND_NODE;
            else if (!strcmp(optarg, "rank"))
                o->bind = RUN_BIND_RANK;
            else if (!strcmp(optarg, "none"))
                o->bind = RUN_BIND_NONE;
            else
                bad("--bind expects node, rank or none", optarg);
            break;
        case OPT_SOCKET: o->socket = optarg; break;
        case OPT_JOB:
            if (!*optarg)
                bad("--job needs a non-empty name", NULL);
            o->job = optarg;
            break;
        case OPT_JOIN:
            if (!*optarg)
                bad("--join needs the running job's name", NULL);
            o->join = optarg;
            break;
        case OPT_TIMEOUT:
            if (nxt_parse_seconds(optarg, &s) < 0 || s <= 0)
                bad("--timeout expects a positive number of seconds", optarg);
            o->timeout = optarg;
            break;
        case OPT_GRACE:
            if (nxt_parse_seconds(optarg, &s) < 0)
                bad("--grace expects a number of seconds", optarg);
            o->grace = s;
            break;
        case OPT_DAEMON: o->daemon = optarg; break;
        case OPT_DAEMON_ARG: o->daemon_args[o->n_daemon_args++] = optarg; break;
        case OPT_KEEP_DAEMON: o->keep_daemon = true; break;
        case 'q': o->quiet = true; break;
        case 'v': o->verbose = true; break;
        case 'h': usage(stdout); exit(0);
        case OPT_VERSION: printf("nexar-run %s\n", NEXAR_VERSION); exit(0);
        case ':': bad("option needs an argument", argv[optind - 1]);
        default: bad("unknown option", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        bad("no program to run", NULL);
    if (o->quiet && o->verbose)
        bad("--quiet and --verbose exclude each other", NULL);
    if (o->nodes > o->nranks)
        bad("--nodes needs at least one rank per node (-n >= --nodes)", NULL);
    if (o->nodes > 1 && o->socket)
        bad("--nodes starts private daemons; --socket does not apply", NULL);
    if (o->join && o->job && strcmp(o->join, o->job))
        bad("--join names the job; --job must be the same or absent", NULL);
    if (o->join && o->nodes > 1)
        bad("--join with --nodes: joiners join at a daemon that runs the job; give that "
            "node's --socket (nexar-run --nodes --verbose prints them)", NULL);
    o->argv = argv + optind;
}
