/*
 * sandbox_probe.c - proof that sandbox_exec restricts what systemd/nexard.service says,
 * so that the sandbox suite's daemons ran under the real thing: each restriction is tried
 * from inside and must hold, and what nexard needs must still work.
 *
 *   sandbox_probe SANDBOX_EXEC SYSCALLS   (re-runs itself inside, in a scratch directory)
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int fails;

static void expect(int ok, const char *what, int err)
{
    printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", what, ok ? "" : ": ", ok ? "" : strerror(err));
    fails += !ok;
}

/* "Key:\tvalue" of /proc/self/status. */
static void status_field(const char *key, char *out, size_t len)
{
    char line[256];
    FILE *f = fopen("/proc/self/status", "re");
    out[0] = '\0';
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, key, strlen(key)) && line[strlen(key)] == ':') {
            snprintf(out, len, "%s", line + strlen(key) + 1 + strspn(line + strlen(key) + 1,
                                                                     " \t"));
            out[strcspn(out, "\n")] = '\0';
        }
    if (f)
        fclose(f);
}

static int inside(const char *dir)
{
    char path[512], v[128];
    int e;

    /* What nexard needs. */
    snprintf(path, sizeof(path), "%s/file", dir);
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
    expect(fd >= 0, "a file in the writable directory", errno);
    struct stat st;
    expect(fd >= 0 && fstat(fd, &st) == 0 && (st.st_mode & 0777) == 0600,
           "created 0600 under UMask=0077", errno);
    int m = memfd_create("probe", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    expect(m >= 0, "memfd_create", errno);
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    expect(s >= 0, "socket(AF_INET, SOCK_DGRAM)", errno);
    int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    expect(u >= 0, "socket(AF_UNIX)", errno);
    void *rw = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    expect(rw != MAP_FAILED, "mmap read-write", errno);

    /* What the unit forbids. */
    errno = 0;
    e = fd >= 0 && fchown(fd, 0, 0) < 0 ? errno : 0;
    expect(e == EPERM, "fchown refused (@privileged)", e);
    /* (setrlimit goes through prlimit64, which @default allows, under systemd as here.) */
    e = setpriority(PRIO_PROCESS, 0, getpriority(PRIO_PROCESS, 0)) < 0 ? errno : 0;
    expect(e == EPERM, "setpriority refused (@resources)", e);
    void *wx = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    e = wx == MAP_FAILED ? errno : 0;
    expect(e == EPERM, "mmap writable+executable refused (MemoryDenyWriteExecute)", e);
    e = rw != MAP_FAILED && mprotect(rw, 4096, PROT_READ | PROT_EXEC) < 0 ? errno : 0;
    expect(e == EPERM, "mprotect to executable refused (MemoryDenyWriteExecute)", e);
    e = socket(AF_PACKET, SOCK_RAW, 0) < 0 ? errno : 0;
    expect(e == EPERM, "socket(AF_PACKET) refused (RestrictAddressFamilies)", e);
    e = unshare(CLONE_NEWNET) < 0 ? errno : 0;
    expect(e == EPERM, "unshare(CLONE_NEWNET) refused (RestrictNamespaces)", e);
    e = access("/proc/sys/kernel", F_OK) < 0 ? errno : 0;
    expect(e == ENOENT, "/proc/sys absent (ProcSubset=pid)", e);
    e = open("/usr/nexar-sandbox-probe", O_CREAT | O_WRONLY, 0600) < 0 ? errno : 0;
    expect(e == EROFS, "/usr read-only (ProtectSystem=strict)", e);
    status_field("CapEff", v, sizeof(v));
    expect(!strcmp(v, "0000000000000000"), "no effective capability", 0);
    status_field("CapBnd", v, sizeof(v));
    expect(!strcmp(v, "0000000000000000"), "empty bounding set (CapabilityBoundingSet=)", 0);
    status_field("NoNewPrivs", v, sizeof(v));
    expect(!strcmp(v, "1"), "NoNewPrivs", 0);
    status_field("Seccomp", v, sizeof(v));
    expect(!strcmp(v, "2"), "a seccomp filter", 0);
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--inside"))
        return inside(argv[2]);
    if (argc != 3) {
        fprintf(stderr, "usage: sandbox_probe SANDBOX_EXEC SYSCALLS\n");
        return 2;
    }
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s --check", argv[1]);
    int rc = system(cmd);
    if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0)
        return 77;
    char dir[] = "/tmp/nexar-sandbox-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    pid_t p = fork();
    if (p == 0) {
        execl(argv[1], argv[1], "--syscalls", argv[2], "--rw", dir, "--", argv[0], "--inside",
              dir, (char *)NULL);
        _exit(127);
    }
    int ws = 0;
    waitpid(p, &ws, 0);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    int ok = WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
    printf("%s\n", ok ? "PASSED" : "FAILED");
    return ok ? 0 : 1;
}
