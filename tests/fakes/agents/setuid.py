"""Try to gain privileges through setuid binaries: run the system's setuid-root programs, make a
setuid copy of python, call setuid(0)/setgid(0)/chown to root; leave a setuid file in /out (the
collector must not store it setuid). Records the effective uid each attempt ran with."""

import os
import shutil
import stat
import subprocess

from _common import out_dir, report

found = []
for folder in ("/usr/bin", "/usr/sbin", "/usr/libexec"):  # not all of /usr/lib: too slow
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        path = os.path.join(folder, name)
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode) and mode & (stat.S_ISUID | stat.S_ISGID):
            found.append(path)


def run(*argv):
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=2, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"failed: {error}"
    return f"exit {done.returncode}: {(done.stdout + done.stderr).strip()[:200]}"


def attempt(function, *args):
    try:
        function(*args)
        return "succeeded"
    except OSError as error:
        return f"failed: {error.strerror}"


copy = "/tmp/setuid-python"
shutil.copy("/usr/bin/python3", copy)
os.chmod(copy, 0o4755)
planted = os.path.join(out_dir(), "setuid-sh")
shutil.copy("/bin/sh", planted)
os.chmod(planted, 0o6755)
euid_probe = "import os; print(os.geteuid(), os.getegid())"
report(
    {
        "setuid_binaries": found,
        "su": run("su", "-c", "id -u", "root"),
        "mount": run("mount", "-t", "tmpfs", "none", "/tmp"),
        "sudo": run("sudo", "-n", "id", "-u"),
        "setuid copy of python": run(copy, "-c", euid_probe),
        "setuid(0)": attempt(os.setuid, 0),
        "setgid(0)": attempt(os.setgid, 0),
        "chown to root": attempt(os.chown, planted, 0, 0),
        "euid": os.geteuid(),
    }
)
