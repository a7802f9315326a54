/* How the runner spawner starts a `local` sandbox's bubblewrap without forking itself:
 *
 *     launch CGROUP_PROCS_FILE... -- COMMAND [ARG...]
 *
 * The spawner (runner.py --serve) starts this program with posix_spawn (no copy of its memory),
 * its output already appended to the sandbox's log and the descriptors bubblewrap needs already
 * at their numbers. It writes its own pid into each cgroup.procs file, so that the command and
 * everything it starts are in the sandbox's groups before the command's first instruction, and
 * executes the command, found on the PATH of its environment. A file it cannot write, or a
 * command it cannot execute, is one line in the log and exit status 70: nothing runs outside its
 * groups. Compiled once per worker like the runner (native_runner.py); where it cannot be, the
 * spawner forks a child that does the same in Python (runner.py, `fork_exec`). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
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

int main(int argc, char **argv) {
    int separator = 1;
    while (separator < argc && strcmp(argv[separator], "--") != 0)
        separator++;
    if (separator + 1 >= argc) {
        fputs("usage: launch CGROUP_PROCS_FILE... -- COMMAND [ARG...]\n", stderr);
        return 1;
    }
    for (int i = 1; i < separator; i++) {
        if (join(argv[i]) != 0) {
            fprintf(stderr, "runner spawner: %s: %s\n", argv[i], strerror(errno));
            return EXIT_FAILED;
        }
    }
    execvp(argv[separator + 1], argv + separator + 1);
    fprintf(stderr, "runner spawner: %s: %s\n", argv[separator + 1], strerror(errno));
    return EXIT_FAILED;
}
