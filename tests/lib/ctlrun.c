/* ctlrun.c - see ctlrun.h. */
#include "ctlrun.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "harness.h"

const char *tl_ctl_path(void)
{
    const char *p = getenv("NEXARCTL");
    if (!p || !*p || access(p, X_OK) != 0) {
        tl_log("SKIP: $NEXARCTL (%s) is not an executable nexarctl", p ? p : "unset");
        exit(HX_SKIP);
    }
    return p;
}

static void slurp(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, len - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    unlink(path);
}

int tl_ctl_run(struct tl_ctl *r, const char *scratch, const char *const *args, double limit_s)
{
    static int seq;
    char outp[300], errp[300];
    snprintf(outp, sizeof(outp), "%s/ctl-%d-%d.out", scratch, (int)getpid(), seq);
    snprintf(errp, sizeof(errp), "%s/ctl-%d-%d.err", scratch, (int)getpid(), seq++);
    const char *argv[40];
    int n = 0;
    argv[n++] = tl_ctl_path();
    for (int i = 0; args[i] && n < 39; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    r->rc = -1;
    r->out[0] = r->err[0] = '\0';
    fflush(NULL);
    pid_t p = fork();
    if (p < 0) {
        tl_log("FAIL: fork: %m");
        return -1;
    }
    if (p == 0) {
        int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int ws = 0;
    if (hx_wait_pid(p, limit_s, &ws)) {
        kill(p, SIGKILL);
        waitpid(p, &ws, 0);
        tl_log("nexarctl %s did not end within %.0f s", args[0] ? args[0] : "", limit_s);
    } else {
        r->rc = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    }
    slurp(outp, r->out, sizeof(r->out));
    slurp(errp, r->err, sizeof(r->err));
    return r->rc;
}

struct tj *tl_ctl_json(const char *scratch, const char *sock, const char *cmd, int *rc)
{
    static struct tl_ctl r; /* 70 KB: not on the stack */
    const char *args[] = {"-s", sock, "--json", cmd, NULL};
    tl_ctl_run(&r, scratch, args, 20);
    if (rc)
        *rc = r.rc;
    char why[200];
    struct tj *v = tj_parse(r.out, why, sizeof(why));
    if (!v)
        tl_log("nexarctl --json %s: exit %d, unparsable (%s): %s | stderr: %s", cmd, r.rc, why,
               r.out, r.err);
    return v;
}
