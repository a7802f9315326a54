/* How the runner spawner starts a `local` sandbox's bubblewrap without forking itself:
 *
 *     launch [--private-mounts BELOW KEEP] CGROUP_PROCS_FILE... -- COMMAND [ARG...]
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
 * With --private-mounts it first moves into a mount namespace of its own (private: nothing
 * mounted on the host later shows up in it) and detaches there every mount below BELOW except
 * KEEP and what is below KEEP: the other sandboxes' disks. Bubblewrap reads the whole mount
 * table after each of its binds, so each disk in the table cost every start CPU
 * (docs/sandbox.md, "Start-up cost"); the sandbox sees none of them either way. Where the
 * namespace cannot be made, one line in the log says so and the command runs as before. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#define EXIT_FAILED 70

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

/* A mount point as /proc/self/mountinfo writes it, with its \ooo escapes undone in place. */
static char *unescaped(char *path) {
    char *out = path;
    for (char *in = path; *in;) {
        if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' &&
            in[3] >= '0' && in[3] <= '7') {
            *out++ = (char)(((in[1] - '0') << 6) | ((in[2] - '0') << 3) | (in[3] - '0'));
            in += 4;
        } else {
            *out++ = *in++;
        }
    }
    *out = '\0';
    return path;
}

static int is_below(const char *path, const char *folder) {
    size_t length = strlen(folder);
    return strncmp(path, folder, length) == 0 && path[length] == '/';
}

/* The mount point of one mountinfo line (its fifth field), or NULL. */
static char *mount_point(char *line) {
    char *rest = line, *field = NULL;
    for (int i = 0; i < 5; i++)
        if ((field = strsep(&rest, " ")) == NULL)
            return NULL;
    return unescaped(field);
}

/* The table names mounts by their real paths: compare those. */
static int detach_others(const char *given_below, const char *given_keep) {
    char below[PATH_MAX], keep[PATH_MAX];
    if (realpath(given_below, below) == NULL || realpath(given_keep, keep) == NULL)
        return -1;
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return -1;
    FILE *table = fopen("/proc/self/mountinfo", "re");
    if (table == NULL)
        return -1;
    char *line = NULL, **points = NULL;
    size_t capacity = 0, count = 0;
    while (getline(&line, &capacity, table) > 0) {
        char *point = mount_point(line);
        if (point == NULL || !is_below(point, below) || strcmp(point, keep) == 0 ||
            is_below(point, keep))
            continue;
        char **grown = realloc(points, (count + 1) * sizeof *points);
        if (grown == NULL || (grown[count] = strdup(point)) == NULL) {
            points = grown ? grown : points;
            break;
        }
        points = grown;
        count++;
    }
    free(line);
    fclose(table);
    while (count > 0) { /* the last listed first: a disk's own submounts before it */
        umount2(points[--count], MNT_DETACH); /* EINVAL: gone with a mount detached before */
        free(points[count]);
    }
    free(points);
    return 0;
}

int main(int argc, char **argv) {
    int first = 1;
    if (argc > 3 && strcmp(argv[1], "--private-mounts") == 0) {
        if (detach_others(argv[2], argv[3]) != 0)
            fprintf(stderr, "runner spawner: no mount namespace of its own: %s\n", strerror(errno));
        first = 4;
    }
    int separator = first;
    while (separator < argc && strcmp(argv[separator], "--") != 0)
        separator++;
    if (separator + 1 >= argc) {
        fputs("usage: launch [--private-mounts BELOW KEEP] CGROUP_PROCS_FILE... -- COMMAND "
              "[ARG...]\n", stderr);
        return 1;
    }
    for (int i = first; i < separator; i++) {
        if (join(argv[i]) != 0) {
            fprintf(stderr, "runner spawner: %s: %s\n", argv[i], strerror(errno));
            return EXIT_FAILED;
        }
    }
    execvp(argv[separator + 1], argv + separator + 1);
    fprintf(stderr, "runner spawner: %s: %s\n", argv[separator + 1], strerror(errno));
    return EXIT_FAILED;
}
