/* A sandbox disk's create and remove, each in one call from Python (native_disk.py).
 *
 * The same steps as disk.py and loop_mount.py: a sparse copy of the formatted template
 * (SEEK_DATA/SEEK_HOLE and copy_file_range), the mount point, a free loop device bound to the copy
 * with LOOP_CONFIGURE and autoclear, mount(2) with nosuid, nodev, noatime, nobarrier; and umount2 (lazily if
 * busy), rmdir, unlink. In Python each of those two dozen system calls let go of the interpreter's
 * global lock and waited to take it back from the worker's event loop; here the lock is let go
 * once per create and once per remove (docs/sandbox.md, "Start-up cost").
 *
 * Each function returns 0 or an errno value and, on failure, sets *step to the step that failed
 * (enum step). A failed create removes what it made. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* No cache flushes: a sandbox disk has no journal to keep consistent across a crash, and a flush
 * through the loop device is an fsync of its image on the host's file system (loop_mount.py). */
static const char MOUNT_DATA[] = "nobarrier";

enum step { STEP_COPY = 1, STEP_MKDIR, STEP_LOOP, STEP_MOUNT, STEP_UMOUNT, STEP_RMDIR, STEP_UNLINK };

#ifndef EVALBOT_LOOP_CONFIGURE /* a test builds it with a number the loop driver does not know */
#define EVALBOT_LOOP_CONFIGURE LOOP_CONFIGURE
#endif
#define LOOP_PATH_BYTES 32
#define LOOP_ATTEMPTS 20 /* another process may take the free device between asking and binding */

/* Loaded and called once by the build's check (native_runner.py): the library is this one. */
int evalbot_library_check(void) { return 0x65766231; /* "evb1" */ }

static int copy_range(int in, int out, off_t start, off_t end) {
    off_t from = start, to = start;
    while (from < end) {
        ssize_t copied = copy_file_range(in, &from, out, &to, (size_t)(end - from), 0);
        if (copied < 0) return errno;
        if (copied == 0) return EIO; /* the template shrank under us */
    }
    return 0;
}

/* `target` (new, mode 0600): `source`'s data, its holes left holes. */
static int sparse_copy(const char *source, const char *target) {
    int in = open(source, O_RDONLY | O_CLOEXEC);
    if (in < 0) return errno;
    struct stat status;
    int out = -1, error = fstat(in, &status) < 0 ? errno : 0;
    if (!error) {
        out = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (out < 0) error = errno;
    }
    for (off_t offset = 0; !error && offset < status.st_size;) {
        off_t start = lseek(in, offset, SEEK_DATA);
        if (start < 0) {
            if (errno != ENXIO) error = errno; /* ENXIO: only a hole is left */
            break;
        }
        off_t end = lseek(in, start, SEEK_HOLE);
        if (end < 0) {
            error = errno;
            break;
        }
        error = copy_range(in, out, start, end);
        offset = end;
    }
    if (!error && ftruncate(out, status.st_size) < 0) error = errno;
    close(in);
    if (out >= 0) {
        close(out);
        if (error) unlink(target);
    }
    return error;
}

/* An open loop device bound to `image_fd` (autoclear), its path in `path`, or -1 with errno set;
 * `image` names it (its last bytes, as loop_mount.py does). */
static int attach_loop(int image_fd, const char *image, char path[LOOP_PATH_BYTES]) {
    int control = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (control < 0) return -1;
    int device = -1, error = EBUSY;
    for (int attempt = 0; attempt < LOOP_ATTEMPTS && error == EBUSY; attempt++) {
        int number = ioctl(control, LOOP_CTL_GET_FREE);
        if (number < 0) {
            error = errno;
            break;
        }
        snprintf(path, LOOP_PATH_BYTES, "/dev/loop%d", number);
        device = open(path, O_RDWR | O_CLOEXEC);
        if (device < 0) {
            error = errno;
            break;
        }
        struct loop_config config;
        memset(&config, 0, sizeof config);
        config.fd = (unsigned)image_fd;
        config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        size_t length = strlen(image), room = LO_NAME_SIZE - 1;
        memcpy(config.info.lo_file_name, image + (length > room ? length - room : 0),
               length > room ? room : length);
        if (ioctl(device, EVALBOT_LOOP_CONFIGURE, &config) == 0) break;
        error = errno;
        close(device);
        device = -1;
    }
    close(control);
    if (device < 0) errno = error;
    return device;
}

static int mount_loop(const char *image, const char *mountpoint, int *step) {
    int image_fd = open(image, O_RDWR | O_CLOEXEC);
    if (image_fd < 0) return *step = STEP_LOOP, errno;
    char path[LOOP_PATH_BYTES];
    int device = attach_loop(image_fd, image, path), error = 0;
    if (device < 0) {
        *step = STEP_LOOP, error = errno;
    } else {
        if (mount(path, mountpoint, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, MOUNT_DATA) < 0)
            *step = STEP_MOUNT, error = errno;
        close(device); /* autoclear: the device goes with the mount (or now, if none) */
    }
    close(image_fd);
    return error;
}

int evalbot_disk_create(const char *template, const char *image, const char *mountpoint,
                        int *step) {
    int error = sparse_copy(template, image);
    if (error) return *step = STEP_COPY, error;
    if (mkdir(mountpoint, 0755) < 0) {
        error = errno;
        unlink(image);
        return *step = STEP_MKDIR, error;
    }
    error = mount_loop(image, mountpoint, step);
    if (error) {
        rmdir(mountpoint);
        unlink(image);
        return error;
    }
    chmod(mountpoint, 0755); /* the disk's root, whatever the umask */
    return 0;
}

int evalbot_disk_remove(const char *image, const char *mountpoint, int *step) {
    if (umount2(mountpoint, UMOUNT_NOFOLLOW) < 0) {
        int busy = errno == EBUSY;
        if (busy && umount2(mountpoint, MNT_DETACH | UMOUNT_NOFOLLOW) < 0) busy = 0;
        if (!busy && errno != EINVAL && errno != ENOENT) return *step = STEP_UMOUNT, errno;
    }
    if (rmdir(mountpoint) < 0 && errno != ENOENT) return *step = STEP_RMDIR, errno;
    if (unlink(image) < 0 && errno != ENOENT) return *step = STEP_UNLINK, errno;
    return 0;
}
