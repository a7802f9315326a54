"""A small seccomp filter for `local` sandboxes (x86_64), given to bwrap with `--seccomp FD`.

It is a deny list on top of what the sandbox already prevents (no capabilities, no_new_privs):

- new user namespaces (clone/unshare with CLONE_NEWUSER): they would hand the agent a namespace
  "root" and with it the kernel's largest unprivileged attack surface;
- clone3 answers ENOSYS, because its flags live in memory a filter cannot read (glibc then
  falls back to clone, which is checked);
- the kernel keyring (not namespaced), io_uring, bpf, userfaultfd, perf_event_open;
- every 32-bit or x32 system call (a way around a filter written for x86_64 numbers).

Everything else is allowed. On other architectures `program()` returns None and bwrap runs
without a filter (documented in docs/sandbox.md).
"""

from __future__ import annotations

import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
CLONE_NEWUSER = 0x10000000
EPERM, ENOSYS = 1, 38

RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000

# x86_64 system call numbers
CLONE, UNSHARE, CLONE3 = 56, 272, 435
DENIED = {
    "keyctl": 250,
    "add_key": 248,
    "request_key": 249,
    "perf_event_open": 298,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
}

LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
RET_K = 0x06  # BPF_RET | BPF_K

OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16  # struct seccomp_data (arg0's low 32 bits)


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def program() -> bytes | None:
    """The compiled filter (struct sock_filter[]), or None off x86_64."""
    if platform.machine() != "x86_64":
        return None
    denied = sorted(DENIED.values())
    # Layout: arch and number checks (4), clone3/clone/unshare (3), denied numbers (n), allow,
    # flag check for clone/unshare (3), errno returns (2). A jump skips that many instructions
    # (forward only): target = index + 1 + offset.
    allow = 7 + len(denied)
    check_flags = allow + 1
    eperm = check_flags + 3
    enosys = eperm + 1
    code = [
        _insn(LD_W_ABS, OFFSET_ARCH),
        _insn(JEQ_K, AUDIT_ARCH_X86_64, jt=0, jf=eperm - 2),
        _insn(LD_W_ABS, OFFSET_NR),
        _insn(JGE_K, X32_SYSCALL_BIT, jt=eperm - 4, jf=0),
        _insn(JEQ_K, CLONE3, jt=enosys - 5, jf=0),
        _insn(JEQ_K, CLONE, jt=check_flags - 6, jf=0),
        _insn(JEQ_K, UNSHARE, jt=check_flags - 7, jf=0),
    ]
    for index, number in enumerate(denied):
        here = 7 + index
        code.append(_insn(JEQ_K, number, jt=eperm - here - 1, jf=0))
    code += [
        _insn(RET_K, RET_ALLOW),
        _insn(LD_W_ABS, OFFSET_ARG0),
        _insn(JSET_K, CLONE_NEWUSER, jt=1, jf=0),
        _insn(RET_K, RET_ALLOW),
        _insn(RET_K, RET_ERRNO | EPERM),
        _insn(RET_K, RET_ERRNO | ENOSYS),
    ]
    return b"".join(code)
