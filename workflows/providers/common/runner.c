/* The in-sandbox runner as a native program: the command line, behaviour and state file of
 * workflows/providers/common/runner.py (its docstring is the specification; spawner mode,
 * `--serve`, stays there), without an interpreter's start-up, which every cell of a `local`
 * experiment paid (docs/sandbox.md, "Start-up cost"). The `local` and `process` providers compile
 * it once per worker (native_runner.py) and run runner.py where no C compiler is found; the
 * runner's tests run against both (tests/workflows/providers/test_runner.py). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#define STATE_FILE ".state.json"
#define RESERVE ".runner-reserve"
#define RESERVE_BYTES (1 << 20)
#define DISK_FULL_BYTES (2LL << 20) /* or 1 % of the disk: see runner.py */
#define DISK_SAMPLE_S 0.1
#define STREAM_GRACE_S 2.0
#define CHUNK (1 << 16)
#define EXIT_FAILED 70
#define KILL_ROUNDS 50
#define USAGE                                                                                     \
    "usage: runner.py --out DIR --cwd DIR --timeout S --log-limit BYTES [--fsize BYTES] "       \
    "[--ready-fd N] [--pid-namespace] [--user UID:GID] -- COMMAND"

static const char *const LOG_NAMES[2] = {"stdout.log", "stderr.log"};
static const int RESET_SIGNALS[] = {SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGPIPE, SIGXFSZ};

struct options {
    const char *out, *cwd, *user, *command;
    double timeout;
    long long log_limit, fsize;
    int ready_fd, pid_namespace;
};

struct stream {
    int pipe_fd, log_fd; /* -1 once closed */
    long long written;
};

struct supervision {
    pid_t agent_pid;
    struct stream streams[2];
    int open_streams;
    long long log_limit;
    double deadline, streams_deadline, next_disk_sample;
    const char *out, *termination;
    int pid_namespace, have_status, status, no_children, disk_full;
};

static volatile sig_atomic_t stop_requested;
static int wakeup_write_fd = -1;

/* -- small helpers ------------------------------------------------------------------------- */

static void usage(void) {
    fputs(USAGE "\n", stderr);
    exit(1);
}

/* What runner.py does with an OSError or PermissionError: one line, exit 70. */
static void fail(const char *format, ...) {
    va_list args;
    va_start(args, format);
    fputs("runner: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    exit(EXIT_FAILED);
}

static void fail_errno(void) { fail("%s", strerror(errno)); }

static double now_s(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double monotonic(void) { return now_s(CLOCK_MONOTONIC); }

static void join(char *buffer, size_t size, const char *folder, const char *name) {
    if ((size_t)snprintf(buffer, size, "%s/%s", folder, name) >= size) {
        errno = ENAMETOOLONG;
        fail_errno();
    }
}

static void unlink_quietly(const char *path) { (void)unlink(path); }

static int write_all(int fd, const char *data, size_t size) {
    while (size > 0) {
        ssize_t done = write(fd, data, size);
        if (done < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        data += done;
        size -= (size_t)done;
    }
    return 0;
}

static int parse_long(const char *text, long long *value) {
    char *end;
    errno = 0;
    *value = strtoll(text, &end, 10);
    return errno == 0 && end != text && *end == '\0' ? 0 : -1;
}

static int all_digits(const char *text, size_t length) {
    if (length == 0)
        return 0;
    for (size_t i = 0; i < length; i++)
        if (text[i] < '0' || text[i] > '9')
            return 0;
    return 1;
}

/* -- command line -------------------------------------------------------------------------- */

static void parse_args(int argc, char **argv, struct options *options) {
    int i = 1;
    memset(options, 0, sizeof *options);
    options->ready_fd = -1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *flag = argv[i];
        long long number;
        if (strcmp(flag, "--pid-namespace") == 0) {
            options->pid_namespace = getpid() == 1;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        const char *value = argv[++i];
        if (strcmp(flag, "--out") == 0)
            options->out = value;
        else if (strcmp(flag, "--cwd") == 0)
            options->cwd = value;
        else if (strcmp(flag, "--user") == 0)
            options->user = value;
        else if (strcmp(flag, "--timeout") == 0) {
            char *end;
            options->timeout = strtod(value, &end);
            if (end == value || *end != '\0')
                usage();
        } else if (parse_long(value, &number) != 0)
            usage();
        else if (strcmp(flag, "--log-limit") == 0)
            options->log_limit = number;
        else if (strcmp(flag, "--fsize") == 0)
            options->fsize = number;
        else if (strcmp(flag, "--ready-fd") == 0 && number >= -1 && number <= 1 << 20)
            options->ready_fd = (int)number;
        else
            usage();
    }
    if (i + 2 != argc || !options->out || !*options->out || !options->cwd || !*options->cwd)
        usage();
    options->command = argv[i + 1];
}

/* -- privileges (`--user`) ----------------------------------------------------------------- */

/* The value of `name:` in /proc/self/status, trimmed, or NULL. */
static const char *status_field(const char *status, const char *name, char *value, size_t size) {
    size_t length = strlen(name);
    for (const char *line = status; *line;) {
        const char *end = strchr(line, '\n');
        if (!end)
            end = line + strlen(line);
        if (strncmp(line, name, length) != 0 || line[length] != ':') {
            line = *end ? end + 1 : end;
            continue;
        }
        const char *start = line + length + 1;
        while (start < end && (*start == ' ' || *start == '\t'))
            start++;
        while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        snprintf(value, size, "%.*s", (int)(end - start), start);
        return value;
    }
    return NULL;
}

static void check_dropped(unsigned uid, unsigned gid) {
    char status[16384], value[256], wanted_uid[64], wanted_gid[64], left[256] = "";
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fail_errno();
    ssize_t size = read(fd, status, sizeof status - 1);
    close(fd);
    if (size < 0)
        fail_errno();
    status[size] = '\0';
    snprintf(wanted_uid, sizeof wanted_uid, "%u\t%u\t%u\t%u", uid, uid, uid, uid);
    snprintf(wanted_gid, sizeof wanted_gid, "%u\t%u\t%u\t%u", gid, gid, gid, gid);
    const char *names[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "Uid", "Gid",
                           "Groups", "NoNewPrivs"};
    const char *wanted[] = {"0000000000000000", "0000000000000000", "0000000000000000",
                            "0000000000000000", "0000000000000000", wanted_uid, wanted_gid,
                            "", "1"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *found = status_field(status, names[i], value, sizeof value);
        if (found && strcmp(found, wanted[i]) == 0)
            continue;
        if (*left)
            strncat(left, ", ", sizeof left - strlen(left) - 1);
        strncat(left, names[i], sizeof left - strlen(left) - 1);
    }
    if (*left)
        fail("privileges left after dropping them: %s", left);
}

/* As runner.py's drop_privileges (and `setpriv --reuid --regid --clear-groups --inh-caps=-all
 * --bounding-set=-all --no-new-privs`), then checked in /proc/self/status; fails closed. */
static void drop_privileges(unsigned uid, unsigned gid) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        fail("could not set no_new_privs");
    FILE *file = fopen("/proc/sys/kernel/cap_last_cap", "re");
    int last_cap = -1;
    if (!file)
        fail_errno();
    if (fscanf(file, "%d", &last_cap) != 1 || last_cap < 0)
        fail("cannot read /proc/sys/kernel/cap_last_cap");
    fclose(file);
    for (int cap = 0; cap <= last_cap; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0)
            fail("could not drop capability %d from the bounding set", cap);
    (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); /* checked below */
    if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0)
        fail_errno();
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &header, data) != 0)
        fail("could not clear the inheritable capabilities");
    check_dropped(uid, gid);
}

static void drop_to_user(const char *user) {
    const char *colon = strchr(user, ':');
    if (!colon || !all_digits(user, (size_t)(colon - user)))
        usage();
    if (!all_digits(colon + 1, strlen(colon + 1)))
        usage();
    drop_privileges((unsigned)strtoul(user, NULL, 10), (unsigned)strtoul(colon + 1, NULL, 10));
}

/* -- files in --out ------------------------------------------------------------------------ */

static int open_log(const char *out, const char *name) {
    char path[4096];
    join(path, sizeof path, out, name);
    unlink_quietly(path); /* never write through a symlink or into a file someone else holds */
    return open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
}

static void make_reserve(const char *out) {
    char path[4096];
    join(path, sizeof path, out, RESERVE);
    unlink_quietly(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    if (posix_fallocate(fd, 0, RESERVE_BYTES) != 0) {
        static char zeros[CHUNK]; /* in .bss: no megabyte of zeros in the program file */
        for (int done = 0; done < RESERVE_BYTES && write_all(fd, zeros, sizeof zeros) == 0;)
            done += (int)sizeof zeros;
    }
    close(fd);
}

static void release_reserve(const char *out) {
    char path[4096];
    join(path, sizeof path, out, RESERVE);
    unlink_quietly(path);
}

static int disk_nearly_full(const char *out) {
    struct statvfs stats;
    if (statvfs(out, &stats) != 0)
        return 0;
    long long floor = (long long)stats.f_blocks * (long long)stats.f_frsize / 100;
    if (floor < DISK_FULL_BYTES)
        floor = DISK_FULL_BYTES;
    return (long long)stats.f_bavail * (long long)stats.f_frsize < floor;
}

/* Write + rename, refusing to follow anything planted at the temporary name. */
static int write_state_once(const char *out, const char *json) {
    char tmp[4096], name[64], final[4096];
    snprintf(name, sizeof name, "%s.tmp-%d", STATE_FILE, (int)getpid());
    join(tmp, sizeof tmp, out, name);
    join(final, sizeof final, out, STATE_FILE);
    unlink_quietly(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    int written = write_all(fd, json, strlen(json)), saved = errno;
    close(fd);
    errno = saved;
    return written == 0 ? rename(tmp, final) : -1;
}

/* On a full disk, give up the reserve and try once more. */
static void write_state(const char *out, const char *json) {
    if (write_state_once(out, json) == 0)
        return;
    if (errno != ENOSPC && errno != EDQUOT)
        fail_errno();
    release_reserve(out);
    if (write_state_once(out, json) != 0)
        fail_errno();
}

static void notify_ready(int fd) {
    if (fd < 0)
        return;
    (void)write_all(fd, "ready\n", 6);
    close(fd);
}

/* -- the agent ----------------------------------------------------------------------------- */

static void close_from(int first, int last) {
#ifdef SYS_close_range
    if (first > last || syscall(SYS_close_range, first, last, 0) == 0)
        return;
#endif
    for (int fd = first; fd <= last; fd++)
        close(fd);
}

/* In the forked child: returns only when something failed (errno says what). */
static void become_agent(const struct options *options, int out_fd, int err_fd, int keep) {
    sigset_t none;
    if (setsid() < 0)
        return;
    for (size_t i = 0; i < sizeof RESET_SIGNALS / sizeof *RESET_SIGNALS; i++)
        signal(RESET_SIGNALS[i], SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int null = open("/dev/null", O_RDONLY);
    if (null < 0 || dup2(null, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
        return;
    long max_fd = sysconf(_SC_OPEN_MAX);
    close_from(3, keep - 1); /* the ready pipe and everything else the runner holds */
    close_from(keep + 1, (int)(max_fd > 0 ? max_fd : 1024) - 1);
    if (chdir(options->cwd) != 0)
        return;
    struct rlimit no_core = {0, 0};
    if (setrlimit(RLIMIT_CORE, &no_core) != 0)
        return;
    if (options->fsize > 0) {
        struct rlimit fsize = {(rlim_t)options->fsize, (rlim_t)options->fsize};
        if (setrlimit(RLIMIT_FSIZE, &fsize) != 0)
            return;
    }
    int adjust = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (adjust >= 0) { /* make the kernel's OOM killer prefer the agent over the runner */
        (void)write_all(adjust, "500", 3);
        close(adjust);
    }
    char *const argv[] = {"sh", "-c", (char *)options->command, NULL};
    execv("/bin/sh", argv);
}

/* fork + exec `/bin/sh -c command` in its own session: the agent's pid, or -1 with errno. */
static pid_t spawn(const struct options *options, int out_fd, int err_fd) {
    int error_pipe[2];
    if (pipe2(error_pipe, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        int saved = errno;
        close(error_pipe[0]);
        close(error_pipe[1]);
        errno = saved;
        return -1;
    }
    if (pid == 0) {
        char code[16];
        become_agent(options, out_fd, err_fd, error_pipe[1]);
        int length = snprintf(code, sizeof code, "%d", errno);
        (void)write_all(error_pipe[1], code, (size_t)length);
        _exit(127);
    }
    close(error_pipe[1]);
    char failed[32];
    ssize_t size;
    do
        size = read(error_pipe[0], failed, sizeof failed - 1);
    while (size < 0 && errno == EINTR);
    close(error_pipe[0]);
    if (size > 0) {
        failed[size] = '\0';
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        errno = atoi(failed);
        return -1;
    }
    return pid;
}

/* -- killing ------------------------------------------------------------------------------- */

struct proc {
    pid_t pid, parent;
};

/* Every live process's pid and parent, from /proc; the count, or -1. */
static int list_processes(struct proc **found) {
    size_t count = 0, capacity = 256;
    struct proc *list = malloc(capacity * sizeof *list);
    DIR *proc = opendir("/proc");
    if (!list || !proc) {
        free(list);
        if (proc)
            closedir(proc);
        return -1;
    }
    for (struct dirent *entry; (entry = readdir(proc));) {
        char path[300], stat[1024];
        if (!all_digits(entry->d_name, strlen(entry->d_name)))
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", entry->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t size = read(fd, stat, sizeof stat - 1);
        close(fd);
        if (size <= 0)
            continue;
        stat[size] = '\0';
        char *after = strrchr(stat, ')'), state;
        int parent;
        if (!after || sscanf(after + 1, " %c %d", &state, &parent) != 2 || state == 'Z')
            continue;
        if (count == capacity) {
            struct proc *bigger = realloc(list, 2 * capacity * sizeof *list);
            if (!bigger)
                break;
            list = bigger;
            capacity *= 2;
        }
        list[count++] = (struct proc){(pid_t)atoi(entry->d_name), (pid_t)parent};
    }
    closedir(proc);
    *found = list;
    return (int)count;
}

/* SIGKILL every live descendant of this process; how many there were. */
static int kill_descendants(void) {
    struct proc *all;
    int count = list_processes(&all), killed = 0;
    if (count < 0)
        return 0;
    pid_t *todo = malloc(((size_t)count + 1) * sizeof *todo);
    if (!todo) {
        free(all);
        return 0;
    }
    int pending = 0;
    todo[pending++] = getpid();
    while (pending > 0) {
        pid_t parent = todo[--pending];
        for (int i = 0; i < count; i++) {
            if (all[i].parent != parent || all[i].pid == 0)
                continue;
            (void)kill(all[i].pid, SIGKILL);
            todo[pending++] = all[i].pid;
            all[i].pid = 0; /* visited */
            killed++;
        }
    }
    free(todo);
    free(all);
    return killed;
}

/* SIGKILL every process the agent started (but not the runner). */
static void kill_everything(const struct supervision *run) {
    if (run->pid_namespace) {
        (void)kill(-1, SIGKILL); /* everything in our pid namespace; pid 1 (us) is spared */
        return;
    }
    (void)killpg(run->agent_pid, SIGKILL);
    for (int round = 0; round < KILL_ROUNDS && kill_descendants() > 0; round++)
        ; /* descendants may fork while we kill; repeat until none are left */
}

/* -- supervision --------------------------------------------------------------------------- */

static void reap(struct supervision *run) {
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            run->no_children = 1; /* ECHILD */
            return;
        }
        if (pid == 0)
            return;
        if (pid == run->agent_pid) {
            run->status = status;
            run->have_status = 1;
        }
    }
}

static void close_stream(struct supervision *run, struct stream *stream) {
    close(stream->pipe_fd);
    close(stream->log_fd);
    stream->pipe_fd = stream->log_fd = -1;
    run->open_streams--;
}

static void pump(struct supervision *run, struct stream *stream) {
    static char data[CHUNK];
    ssize_t size = read(stream->pipe_fd, data, sizeof data);
    if (size < 0)
        return; /* EAGAIN, EINTR */
    if (size == 0) {
        close_stream(run, stream);
        return;
    }
    long long room = run->log_limit - stream->written;
    if (room < 0)
        room = 0;
    if (room > 0) {
        long long kept = size < room ? size : room;
        stream->written += kept;
        if (write_all(stream->log_fd, data, (size_t)kept) != 0) /* e.g. the agent filled the disk */
            run->disk_full = run->disk_full || disk_nearly_full(run->out);
    }
    if (size > room && !run->termination)
        run->termination = "output_limit";
}

static int winding_down(const struct supervision *run) {
    return run->termination || run->have_status;
}

/* Turn a stop request or an expired deadline into a termination reason. */
static void decide(struct supervision *run) {
    if (winding_down(run))
        return;
    if (stop_requested)
        run->termination = "killed";
    else if (monotonic() >= run->deadline)
        run->termination = "timeout";
}

static void sample_disk(struct supervision *run) {
    double now = monotonic();
    if (now < run->next_disk_sample)
        return;
    run->next_disk_sample = now + DISK_SAMPLE_S;
    run->disk_full = run->disk_full || disk_nearly_full(run->out);
}

/* Every process is gone, yet a pipe is open (passed to a process outside our reach). */
static void drain_orphaned_streams(struct supervision *run) {
    double now = monotonic();
    if (run->streams_deadline == 0)
        run->streams_deadline = now + STREAM_GRACE_S;
    if (now < run->streams_deadline)
        return;
    for (int i = 0; i < 2; i++)
        if (run->streams[i].pipe_fd >= 0)
            close_stream(run, &run->streams[i]);
}

static void supervise(struct supervision *run, int wakeup) {
    for (;;) {
        reap(run);
        decide(run);
        if (winding_down(run) && !run->no_children)
            kill_everything(run);
        if (run->no_children && run->open_streams)
            drain_orphaned_streams(run);
        sample_disk(run);
        if (run->have_status && run->no_children && !run->open_streams)
            return;
        double wait_s = winding_down(run) ? 0.05 : run->deadline - monotonic();
        wait_s = wait_s > DISK_SAMPLE_S ? DISK_SAMPLE_S : wait_s < 0 ? 0 : wait_s;
        struct pollfd polled[3];
        struct stream *owners[3] = {NULL, NULL, NULL};
        nfds_t count = 0;
        for (int i = 0; i < 2; i++) {
            if (run->streams[i].pipe_fd < 0)
                continue;
            owners[count] = &run->streams[i];
            polled[count++] = (struct pollfd){run->streams[i].pipe_fd, POLLIN, 0};
        }
        polled[count++] = (struct pollfd){wakeup, POLLIN, 0};
        struct timespec timeout = {(time_t)wait_s, (long)((wait_s - (double)(time_t)wait_s) * 1e9)};
        if (ppoll(polled, count, &timeout, NULL) <= 0)
            continue; /* a timeout, or EINTR */
        for (nfds_t i = 0; i < count; i++) {
            if (!polled[i].revents)
                continue;
            if (owners[i]) {
                pump(run, owners[i]);
                continue;
            }
            char drained[512];
            while (read(wakeup, drained, sizeof drained) > 0)
                ;
        }
    }
}

/* -- main ---------------------------------------------------------------------------------- */

static void on_signal(int signum) {
    int saved = errno;
    if (signum != SIGCHLD)
        stop_requested = 1;
    if (wakeup_write_fd >= 0)
        (void)!write(wakeup_write_fd, "", 1);
    errno = saved;
}

/* SIGCHLD wakes the poll loop; SIGTERM/SIGINT/SIGHUP ask for a clean stop; SIGPIPE and SIGXFSZ
 * are ignored (as Python ignores them) so a failed write is an error, not death. */
static int install_signals(void) {
    int wakeup[2];
    if (pipe2(wakeup, O_NONBLOCK | O_CLOEXEC) != 0)
        fail_errno();
    wakeup_write_fd = wakeup[1];
    struct sigaction action;
    memset(&action, 0, sizeof action);
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    action.sa_handler = on_signal;
    const int handled[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < sizeof handled / sizeof *handled; i++)
        sigaction(handled[i], &action, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    return wakeup[0];
}

static int failed_to_start(const struct options *options, int error) {
    char message[512], state[512];
    release_reserve(options->out);
    int log = open_log(options->out, LOG_NAMES[1]);
    if (log >= 0) {
        int length = snprintf(message, sizeof message, "runner: cannot start the agent: %s\n",
                              strerror(error));
        (void)write_all(log, message, (size_t)length);
        close(log);
    }
    double now = now_s(CLOCK_REALTIME);
    snprintf(state, sizeof state,
             "{\"status\": \"finished\", \"pid\": 0, \"started_at\": %.6f, \"finished_at\": %.6f, "
             "\"exit_code\": 127, \"signal\": null, \"termination\": null}",
             now, now);
    write_state(options->out, state);
    notify_ready(options->ready_fd);
    return 0;
}

static void finished_state(const struct supervision *run, double started_at, char *buffer,
                           size_t size) {
    int status = run->have_status ? run->status : 0;
    char exit_code[16] = "null", signal_number[16] = "null", termination[32] = "null";
    if (WIFEXITED(status))
        snprintf(exit_code, sizeof exit_code, "%d", WEXITSTATUS(status));
    else
        snprintf(signal_number, sizeof signal_number, "%d", WTERMSIG(status));
    if (run->termination)
        snprintf(termination, sizeof termination, "\"%s\"", run->termination);
    struct rusage usage;
    getrusage(RUSAGE_CHILDREN, &usage);
    double cpu = (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec / 1e6 +
                 (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec / 1e6;
    snprintf(buffer, size,
             "{\"status\": \"finished\", \"pid\": %d, \"started_at\": %.6f, \"finished_at\": "
             "%.6f, \"exit_code\": %s, \"signal\": %s, \"termination\": %s, \"disk_full\": %s, "
             "\"rusage\": {\"cpu_seconds\": %.3f, \"max_rss_mb\": %.1f}}",
             (int)run->agent_pid, started_at, now_s(CLOCK_REALTIME), exit_code, signal_number,
             termination, run->disk_full ? "true" : "false", cpu, (double)usage.ru_maxrss / 1024);
}

int main(int argc, char **argv) {
    struct options options;
    parse_args(argc, argv, &options);
    if (options.user) /* before anything else: nothing of the sandbox is touched as root */
        drop_to_user(options.user);
    int wakeup = install_signals();
    if (!options.pid_namespace)
        (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* the agent (same uid) may not ptrace the runner */
    int logs[2], pipes[2][2];
    for (int i = 0; i < 2; i++)
        if ((logs[i] = open_log(options.out, LOG_NAMES[i])) < 0)
            fail_errno();
    make_reserve(options.out);
    for (int i = 0; i < 2; i++)
        if (pipe2(pipes[i], O_CLOEXEC) != 0)
            fail_errno();
    pid_t agent = spawn(&options, pipes[0][1], pipes[1][1]);
    int spawn_error = errno;
    close(pipes[0][1]);
    close(pipes[1][1]);
    if (agent < 0)
        return failed_to_start(&options, spawn_error);
    struct supervision run;
    memset(&run, 0, sizeof run);
    run.agent_pid = agent;
    run.log_limit = options.log_limit;
    run.deadline = monotonic() + options.timeout;
    run.pid_namespace = options.pid_namespace;
    run.out = options.out;
    run.open_streams = 2;
    for (int i = 0; i < 2; i++) {
        run.streams[i] = (struct stream){pipes[i][0], logs[i], 0};
        fcntl(pipes[i][0], F_SETFL, fcntl(pipes[i][0], F_GETFL) | O_NONBLOCK);
    }
    double started_at = now_s(CLOCK_REALTIME);
    char state[1024];
    snprintf(state, sizeof state,
             "{\"status\": \"running\", \"pid\": %d, \"started_at\": %.6f, \"finished_at\": null, "
             "\"exit_code\": null, \"signal\": null, \"termination\": null}",
             (int)agent, started_at);
    write_state(options.out, state);
    notify_ready(options.ready_fd);
    supervise(&run, wakeup);
    finished_state(&run, started_at, state, sizeof state);
    release_reserve(options.out);
    write_state(options.out, state);
    return 0;
}
