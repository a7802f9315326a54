/* How the runner spawner starts a `local` sandbox's bubblewrap without forking itself:
 *
 *     launch [--network FD] [--namespace FD ATTACH] CGROUP_PROCS_FILE... -- COMMAND [ARG...]
 *     launch --hold-namespace SANDBOX_DIR KEEP...
 *     launch --hold-network
 *
 * The spawner (runner.py --serve) starts this program with posix_spawn (no copy of its memory),
 * its output already appended to the sandbox's log and the descriptors bubblewrap needs already
 * at their numbers. It writes its own pid into each cgroup.procs file, so that the command and
 * everything it starts are in the sandbox's groups before the command's first instruction, and
 * executes the command, found on the PATH of its environment. A file it cannot write, or a
 * command it cannot execute, is one line in the log and exit status 70: nothing runs outside its
 * groups. Compiled once per worker like the runner (native_runner.py); where it cannot be, the
 * spawner forks a child that does the same in Python (runner.py, `fork_exec`).
 *
 * The launch mount namespace (docs/sandbox.md, "Start-up cost"). bubblewrap reads the whole mount
 * table after each bind it makes, and the host's table holds every sandbox disk mounted. So
 * `--hold-namespace` makes a mount namespace of its own (private: nothing mounted on the host
 * later reaches it) and detaches every mount in it except the ancestors of SANDBOX_DIR and the
 * KEEP folders and what lies under the KEEP folders; it prints "ready" and waits for EOF on
 * stdin, while the provider opens /proc/PID/ns/mnt and keeps that descriptor. `--namespace FD
 * ATTACH` then starts the command in a copy of that namespace with a clone of the mounts at
 * ATTACH (the sandbox's disk) attached at the same place, once it has checked that every source
 * of a bind in the command (bubblewrap's --bind, --ro-bind, --dev-bind and their -try forms) is
 * the same file there as on the host. Where anything differs or fails, it says so in one line
 * and executes the command in the host's namespace, as before: a stale or missing namespace
 * costs time, never what a sandbox sees.
 *
 * A network namespace a pool keeps (network_pool.py; docs/sandbox.md, "A network namespace per
 * sandbox, reused"). `--hold-network` makes a network namespace with its loopback up, prints
 * "ready" and waits for EOF while the provider opens /proc/PID/ns/net. `--network FD` joins that
 * namespace after the cgroups, before the command starts; the command (bubblewrap) then makes no
 * network namespace of its own. A namespace it cannot join is one line in the log and exit status
 * 70: nothing starts with the host's network. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXIT_FAILED 70
#define MAX_SOURCES 64
#define MAX_MOUNTS 4096

#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif

static const char USAGE[] = "usage: launch [--network FD] [--namespace FD ATTACH] CGROUP_PROCS_FILE... "
                            "-- COMMAND [ARG...]\n       launch --hold-namespace SANDBOX_DIR KEEP...\n"
                            "       launch --hold-network\n";

static int join(const char *procs_file) {
    char pid[24];
    int length = snprintf(pid, sizeof pid, "%d", (int)getpid());
    int fd = open(procs_file, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t written = write(fd, pid, (size_t)length);
    int saved = errno;
    close(fd);
    errno = saved;
    return written == length ? 0 : -1;
}

/* -- the namespace a holder keeps ------------------------------------------------------------- */

/* `point` is `path` or one of its ancestors. */
static int ancestor_or_same(const char *point, const char *path) {
    size_t length = strlen(point);
    if (strcmp(point, "/") == 0)
        return 1;
    return strncmp(point, path, length) == 0 && (path[length] == '/' || path[length] == '\0');
}

static int kept(const char *point, int count, char **folders) {
    if (strcmp(point, folders[0]) != 0 && ancestor_or_same(folders[0], point))
        return 0; /* a sandbox's disk, or anything else under the sandboxes' folder */
    for (int i = 0; i < count; i++)
        if (ancestor_or_same(point, folders[i]))
            return 1;
    for (int i = 1; i < count; i++)
        if (ancestor_or_same(folders[i], point))
            return 1;
    return 0;
}

/* mountinfo writes a space, tab, newline and backslash in a path as \ooo. */
static void unescape(char *text) {
    char *out = text;
    for (char *in = text; *in; in++) {
        if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' &&
            in[3] >= '0' && in[3] <= '7') {
            *out++ = (char)((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
            in += 3;
        } else {
            *out++ = *in;
        }
    }
    *out = '\0';
}

/* The mount points of this namespace, in the order of its table; their count, or -1. */
static int mount_points(char **points, int room) {
    FILE *table = fopen("/proc/self/mountinfo", "re");
    if (table == NULL)
        return -1;
    char *line = NULL;
    size_t size = 0;
    int count = 0;
    while (count < room && getline(&line, &size, table) > 0) {
        char *field = line;
        for (int skip = 0; skip < 4 && field != NULL; skip++) {
            field = strchr(field, ' ');
            field = field ? field + 1 : NULL;
        }
        char *end = field ? strchr(field, ' ') : NULL;
        if (end == NULL)
            continue;
        *end = '\0';
        unescape(field);
        points[count++] = strdup(field);
    }
    free(line);
    fclose(table);
    return count;
}

/* Says "ready" and keeps this process (and its namespaces) until EOF on stdin. */
static int held_until_eof(void) {
    fputs("ready\n", stdout);
    fflush(stdout);
    char byte;
    while (read(0, &byte, 1) > 0) {
    }
    return 0;
}

static int hold_namespace(int count, char **folders) {
    static char *points[MAX_MOUNTS];
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        fprintf(stderr, "launch: no mount namespace of its own: %s\n", strerror(errno));
        return EXIT_FAILED;
    }
    int found = mount_points(points, MAX_MOUNTS);
    if (found < 0) {
        fprintf(stderr, "launch: /proc/self/mountinfo: %s\n", strerror(errno));
        return EXIT_FAILED;
    }
    for (int i = found - 1; i >= 0; i--) /* submounts first; one detached with its parent is EINVAL */
        if (!kept(points[i], count, folders) && umount2(points[i], MNT_DETACH) != 0 &&
            errno != EINVAL && errno != ENOENT)
            fprintf(stderr, "launch: %s stays in the namespace: %s\n", points[i], strerror(errno));
    return held_until_eof();
}

/* -- a network namespace a pool keeps ---------------------------------------------------------- */

static int loopback_up(void) {
    int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        return -1;
    struct ifreq request;
    memset(&request, 0, sizeof request);
    strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
    int result = ioctl(sock, SIOCGIFFLAGS, &request);
    if (result == 0) {
        request.ifr_flags |= IFF_UP;
        result = ioctl(sock, SIOCSIFFLAGS, &request);
    }
    int saved = errno;
    close(sock);
    errno = saved;
    return result;
}

static int hold_network(void) {
    if (unshare(CLONE_NEWNET) != 0 || loopback_up() != 0) {
        fprintf(stderr, "launch: no network namespace with a loopback: %s\n", strerror(errno));
        return EXIT_FAILED;
    }
    return held_until_eof();
}

/* -- a launch in a copy of it ------------------------------------------------------------------ */

struct source {
    const char *path;
    int error;
    dev_t device;
    ino_t inode;
};

static int is_bind(const char *option) {
    static const char *const binds[] = {"--bind", "--ro-bind", "--dev-bind", "--bind-try",
                                        "--ro-bind-try", "--dev-bind-try"};
    for (size_t i = 0; i < sizeof binds / sizeof binds[0]; i++)
        if (strcmp(option, binds[i]) == 0)
            return 1;
    return 0;
}

/* The sources of the command's binds (bubblewrap's options, up to its own "--"); their count. */
static int bind_sources(char **command, struct source *sources) {
    int count = 0;
    for (int i = 1; command[i] != NULL && strcmp(command[i], "--") != 0; i++) {
        if (is_bind(command[i]) && command[i + 1] != NULL && count < MAX_SOURCES) {
            sources[count++].path = command[i + 1];
            i += 2;
        }
    }
    return count;
}

static void look(struct source *source, struct stat *found) {
    source->error = stat(source->path, found) == 0 ? 0 : errno;
}

/* The first source that is not the file it was on the host, or NULL. */
static const char *first_moved(struct source *sources, int count) {
    for (int i = 0; i < count; i++) {
        struct stat now;
        struct source here = sources[i];
        look(&here, &now);
        if (here.error != sources[i].error ||
            (!here.error && (now.st_dev != sources[i].device || now.st_ino != sources[i].inode)))
            return sources[i].path;
    }
    return NULL;
}

/* Into a copy of the held namespace with ATTACH's mounts: 0, or -1 back in the host's (said why). */
static int enter(int held, const char *attach, char **command) {
    struct source sources[MAX_SOURCES];
    int count = bind_sources(command, sources);
    for (int i = 0; i < count; i++) {
        struct stat found;
        look(&sources[i], &found);
        sources[i].device = found.st_dev;
        sources[i].inode = found.st_ino;
    }
    int host = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    int tree = (int)syscall(SYS_open_tree, AT_FDCWD, attach,
                            OPEN_TREE_CLONE | O_CLOEXEC | AT_RECURSIVE);
    const char *step = host < 0 ? "/proc/self/ns/mnt" : tree < 0 ? "open_tree" : NULL;
    if (step == NULL) {
        step = setns(held, CLONE_NEWNS) != 0       ? "setns"
               : unshare(CLONE_NEWNS) != 0         ? "unshare"
               : syscall(SYS_move_mount, tree, "", AT_FDCWD, attach,
                         MOVE_MOUNT_F_EMPTY_PATH) != 0 ? "move_mount"
                                                       : NULL;
    }
    const char *moved = step == NULL ? first_moved(sources, count) : NULL;
    if (tree >= 0)
        close(tree);
    if (step == NULL && moved == NULL) {
        close(host);
        return 0;
    }
    if (step != NULL)
        fprintf(stderr, "launch: %s: %s; bubblewrap starts in the host's mount namespace\n", step,
                strerror(errno));
    else
        fprintf(stderr, "launch: %s is another file in the launch namespace; bubblewrap starts in "
                        "the host's mount namespace\n", moved);
    if (host >= 0 && setns(host, CLONE_NEWNS) != 0) {
        fprintf(stderr, "launch: back to the host's mount namespace: %s\n", strerror(errno));
        exit(EXIT_FAILED);
    }
    if (host >= 0)
        close(host);
    return -1;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "--hold-namespace") == 0)
        return hold_namespace(argc - 2, argv + 2);
    if (argc == 2 && strcmp(argv[1], "--hold-network") == 0)
        return hold_network();
    int first = 1, held = -1, network = -1;
    const char *attach = NULL;
    for (;;) {
        if (first + 1 < argc && strcmp(argv[first], "--network") == 0) {
            network = atoi(argv[first + 1]);
            fcntl(network, F_SETFD, FD_CLOEXEC); /* never the command's */
            first += 2;
        } else if (first + 2 < argc && strcmp(argv[first], "--namespace") == 0) {
            held = atoi(argv[first + 1]);
            attach = argv[first + 2];
            fcntl(held, F_SETFD, FD_CLOEXEC);
            first += 3;
        } else {
            break;
        }
    }
    int separator = first;
    while (separator < argc && strcmp(argv[separator], "--") != 0)
        separator++;
    if (separator + 1 >= argc) {
        fputs(USAGE, stderr);
        return 1;
    }
    for (int i = first; i < separator; i++) {
        if (join(argv[i]) != 0) {
            fprintf(stderr, "runner spawner: %s: %s\n", argv[i], strerror(errno));
            return EXIT_FAILED;
        }
    }
    if (network >= 0) {
        if (setns(network, CLONE_NEWNET) != 0) {
            fprintf(stderr, "launch: could not join the sandbox's network namespace: %s\n",
                    strerror(errno));
            return EXIT_FAILED;
        }
        close(network);
    }
    if (attach != NULL) {
        enter(held, attach, argv + separator + 1);
        close(held);
    }
    execvp(argv[separator + 1], argv + separator + 1);
    fprintf(stderr, "runner spawner: %s: %s\n", argv[separator + 1], strerror(errno));
    return EXIT_FAILED;
}
