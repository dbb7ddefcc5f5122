/*
 * sandbox_exec.c - run a program under the restrictions of systemd/nexard.service, for a
 * machine where systemd is not PID 1 (CI containers): the sandbox suite starts every
 * nexard of its tests through this, so that "nexard works under its unit" is tested, not
 * assumed from the score of `systemd-analyze security`.
 *
 *   sandbox_exec --syscalls FILE [--rw DIR]... -- PROGRAM ARGS...
 *   sandbox_exec --check        exit 0 when this machine can build the sandbox, else 77
 *
 * What the unit asks for, and how it is done here (in this order, as systemd does):
 *   PrivateMounts=yes             a mount namespace of its own, propagation private
 *   ProtectProc=invisible,
 *   ProcSubset=pid                a new /proc with hidepid=invisible,subset=pid
 *   ProtectSystem=strict          every mount read-only but the --rw directories
 *   CapabilityBoundingSet= and
 *   AmbientCapabilities=          the bounding set emptied, and no capability left
 *   NoNewPrivileges=yes           PR_SET_NO_NEW_PRIVS
 *   UMask=0077                    umask(077)
 *   SystemCallFilter= lines,
 *   SystemCallErrorNumber=EPERM   a seccomp allow list of FILE's names (unit_syscalls.py
 *                                 computes it from the unit), anything else EPERM
 *   SystemCallArchitectures=native   only the native architecture's calls
 *   RestrictAddressFamilies=      socket() of AF_UNIX, AF_INET, AF_INET6, AF_NETLINK only
 *   MemoryDenyWriteExecute=yes    mmap of writable and executable memory, and
 *                                 mprotect/pkey_mprotect adding PROT_EXEC, refused
 *   RestrictNamespaces=yes        unshare, setns and clone with CLONE_NEW* refused;
 *                                 clone3 ENOSYS (the C library then uses clone)
 * Not done here, and why it is not needed for the question "does nexard still work":
 * User= (the tests' daemons run as root without capabilities, which is stricter on
 * capabilities and looser on files than the nexar user), PrivateTmp= and ProtectHome=
 * (the tests keep their sockets under /tmp and the build may live under /root),
 * PrivateDevices= (nexard opens no device node; the seccomp list has no mknod), and the
 * Protect{Kernel*,ControlGroups,Clock,Hostname} settings (their calls are outside the
 * allow list or need the capabilities that are gone).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <seccomp.h>

#define MAX_RW 16

static void die(const char *what)
{
    fprintf(stderr, "sandbox_exec: %s: %s\n", what, strerror(errno));
    exit(126);
}

/* Every mount read-only, except the --rw directories (bind-mounted onto themselves first,
 * so that each is a mount of its own) and the new /proc. */
static void read_only_except(char **rw, int nrw)
{
    for (int i = 0; i < nrw; i++)
        if (mount(rw[i], rw[i], NULL, MS_BIND | MS_REC, NULL) < 0)
            die(rw[i]);
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        die("/proc/self/mountinfo");
    char line[4096];
    while (fgets(line, sizeof(line), f)) {
        char point[4096];
        unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY;
        if (sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1)
            continue;
        int keep = !strcmp(point, "/proc") || !strncmp(point, "/proc/", 6);
        for (int i = 0; i < nrw && !keep; i++)
            keep = !strcmp(point, rw[i]);
        if (keep)
            continue;
        /* A bind remount keeps the per-mount flags it is given: carry them over. */
        if (strstr(line, " nosuid") || strstr(line, ",nosuid"))
            flags |= MS_NOSUID;
        if (strstr(line, " nodev") || strstr(line, ",nodev"))
            flags |= MS_NODEV;
        if (strstr(line, " noexec") || strstr(line, ",noexec"))
            flags |= MS_NOEXEC;
        /* Mounts hidden under others or gone meanwhile cannot be remounted: skipped, as
         * systemd skips what it cannot reach. */
        mount(NULL, point, NULL, flags, NULL);
    }
    fclose(f);
}

static void drop_capabilities(void)
{
    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            die("PR_CAPBSET_DROP");
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof(d));
    if (syscall(SYS_capset, &h, d) < 0)
        die("capset");
}

static void load_filter(const char *path)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (!ctx)
        die("seccomp_init");
    FILE *f = fopen(path, "re");
    if (!f)
        die(path);
    char name[128];
    int n = 0;
    while (fscanf(f, "%127s", name) == 1) {
        int nr = seccomp_syscall_resolve_name(name);
        if (nr == __NR_SCMP_ERROR || nr < 0)
            continue; /* not a call of this architecture (systemd skips those too) */
        if (!strcmp(name, "socket") || !strcmp(name, "mmap") || !strcmp(name, "mprotect") ||
            !strcmp(name, "pkey_mprotect") || !strcmp(name, "clone") ||
            !strcmp(name, "clone3") || !strcmp(name, "unshare") || !strcmp(name, "setns"))
            continue; /* allowed below, with their arguments checked */
        if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0) < 0)
            die(name);
        n++;
    }
    fclose(f);
    if (n < 100) {
        fprintf(stderr, "sandbox_exec: %s lists %d calls; is it the unit's list?\n", path, n);
        exit(126);
    }
    /* RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK */
    static const int families[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
        if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                             SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)families[i], 0)) < 0)
            die("socket rule");
    /* MemoryDenyWriteExecute=yes: no mapping both writable and executable, and nothing
     * made executable after the fact. */
    if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
                         SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC | PROT_WRITE, PROT_WRITE)) < 0 ||
        seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
                         SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_WRITE, 0)) < 0 ||
        seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
                         SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0)) < 0 ||
        seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(pkey_mprotect), 1,
                         SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0)) < 0)
        die("memory rules");
    /* RestrictNamespaces=yes: threads (clone without CLONE_NEW*) only; no unshare/setns. */
    const scmp_datum_t newns = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
                               CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP;
    if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                         SCMP_A0(SCMP_CMP_MASKED_EQ, newns, 0)) < 0)
        die("clone rule");
    /* clone3 keeps its flags in memory a filter cannot read: ENOSYS, as systemd does, and
     * the C library falls back to clone. */
    if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) < 0)
        die("clone3 rule");
    if (seccomp_load(ctx) < 0)
        die("seccomp_load");
    seccomp_release(ctx);
}

int main(int argc, char **argv)
{
    const char *syscalls = NULL;
    char *rw[MAX_RW];
    int nrw = 0, i = 1;
    if (argc == 2 && !strcmp(argv[1], "--check")) {
        /* Root in a mount namespace of its own is what the rest needs. */
        if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0) {
            printf("sandbox_exec: cannot make a mount namespace here (not root, or no "
                   "CAP_SYS_ADMIN): skipped\n");
            return 77;
        }
        return 0;
    }
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        if (!strcmp(argv[i], "--syscalls") && i + 1 < argc)
            syscalls = argv[++i];
        else if (!strcmp(argv[i], "--rw") && i + 1 < argc && nrw < MAX_RW)
            rw[nrw++] = argv[++i];
        else {
            fprintf(stderr, "usage: sandbox_exec --syscalls FILE [--rw DIR]... -- PROGRAM "
                    "ARGS...\n");
            return 2;
        }
    }
    if (!syscalls || i + 1 >= argc) {
        fprintf(stderr, "sandbox_exec: --syscalls FILE and -- PROGRAM are required\n");
        return 2;
    }
    if (unshare(CLONE_NEWNS) < 0)
        die("unshare(CLONE_NEWNS)");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        die("making / private");
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "hidepid=invisible,subset=pid") < 0)
        die("mounting /proc with hidepid=invisible,subset=pid");
    read_only_except(rw, nrw);
    drop_capabilities();
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        die("PR_SET_NO_NEW_PRIVS");
    umask(077);
    load_filter(syscalls);
    execv(argv[i + 1], argv + i + 1);
    fprintf(stderr, "sandbox_exec: exec %s: %s\n", argv[i + 1], strerror(errno));
    return 127;
}
