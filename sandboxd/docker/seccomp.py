"""The seccomp profile every sandbox container is created with: every guard from its first process.

WHY a profile of our own rather than the engine's default plus a filter the supervisor adds:
a filter a process installs holds only for it and what it starts, so the container's first
process and anything that is not the supervisor's child (an engine `exec`) would run without
it, and a command able to reach such a process (ptrace, /proc/<pid>/mem) would borrow its
rights. The runtime installs this profile before the container's first program runs, so no
process inside is ever without it; the supervisor needs none of what it refuses (it talks to
the backend through FIFOs, sandboxd.inside.supervisor).

An allowlist, as the engine's own default is: a system call not named here fails with EPERM
(a kernel's newer calls included, until they are read and listed). On top of what the engine's
default refuses to a container without capabilities, it refuses:

- Unix sockets: socket(AF_UNIX, …), and socketpair(AF_UNIX, SOCK_DGRAM, …), whose ends can be
  connected elsewhere (a stream pair cannot: it stays allowed for pipes and asyncio). A host
  socket under a mount (a read-only one included) is out of reach. Unless the sandbox's spec
  allows Unix sockets.
- Every other socket but IPv4 and IPv6 TCP and UDP (stream or datagram, protocol 0, TCP or
  UDP), and netlink's NETLINK_ROUTE (interfaces and routes, as `ip` and getifaddrs read
  them): no MPTCP, UDP-Lite, SCTP, ping (ICMP) sockets nor other netlink protocols, whose
  kernel code a container has no use for and whose bugs were exploits.
- io_uring, which opens and connects sockets without the system calls filtered here.
- ptrace(PTRACE_ATTACH) and ptrace(PTRACE_SEIZE): a process is traced only by its parent, at its
  own request (PTRACE_TRACEME, as debuggers start what they debug), never one it did not start;
  process_vm_readv/writev, pidfd_getfd, kcmp, process_madvise: nobody's memory or descriptors.
- a setuid or setgid bit on any file (chmod, fchmod, fchmodat, open, openat, creat, mknod with
  S_ISUID or S_ISGID): a command cannot plant a setuid file in a read-write host directory,
  which the host would honour (the engine cannot mount binds nosuid).
- new namespaces (clone with namespace flags, unshare, setns), mounts, keyrings, BPF,
  perf events, userfaultfd, kernel modules, the clock, the system's name, swap, reboot, quotas,
  file handles (open_by_handle_at: "shocker"), port I/O, the kernel log.
- openat2 and clone3 fail with ENOSYS (their flags sit behind a pointer no filter can read), so
  the C library falls back to openat and clone, which are checked.
"""

from __future__ import annotations

import errno
import json
import platform
from typing import Any

ALLOWED = [
    "accept",
    "accept4",
    "access",
    "adjtimex",
    "alarm",
    "arch_prctl",
    "bind",
    "brk",
    "capget",
    "capset",
    "chdir",
    "chown",
    "clock_getres",
    "clock_gettime",
    "clock_nanosleep",
    "close",
    "close_range",
    "connect",
    "copy_file_range",
    "dup",
    "dup2",
    "dup3",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "eventfd",
    "eventfd2",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "faccessat",
    "faccessat2",
    "fadvise64",
    "fallocate",
    "fchdir",
    "fchown",
    "fchownat",
    "fcntl",
    "fdatasync",
    "fgetxattr",
    "flistxattr",
    "flock",
    "fork",
    "fremovexattr",
    "fsetxattr",
    "fstat",
    "fstatfs",
    "fsync",
    "ftruncate",
    "futex",
    "futex_waitv",
    "futimesat",
    "get_mempolicy",
    "get_robust_list",
    "getcpu",
    "getcwd",
    "getdents",
    "getdents64",
    "getegid",
    "geteuid",
    "getgid",
    "getgroups",
    "getitimer",
    "getpeername",
    "getpgid",
    "getpgrp",
    "getpid",
    "getppid",
    "getpriority",
    "getrandom",
    "getresgid",
    "getresuid",
    "getrlimit",
    "getrusage",
    "getsid",
    "getsockname",
    "getsockopt",
    "gettid",
    "gettimeofday",
    "getuid",
    "getxattr",
    "inotify_add_watch",
    "inotify_init",
    "inotify_init1",
    "inotify_rm_watch",
    "io_cancel",
    "io_destroy",
    "io_getevents",
    "io_pgetevents",
    "io_setup",
    "io_submit",
    "ioctl",
    "ioprio_get",
    "ioprio_set",
    "kill",
    "landlock_add_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "lchown",
    "lgetxattr",
    "link",
    "linkat",
    "listen",
    "listxattr",
    "llistxattr",
    "lremovexattr",
    "lseek",
    "lsetxattr",
    "lstat",
    "madvise",
    "mbind",
    "membarrier",
    "memfd_create",
    "mincore",
    "mkdir",
    "mkdirat",
    "mlock",
    "mlock2",
    "mlockall",
    "mmap",
    "mprotect",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedsend",
    "mq_unlink",
    "mremap",
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "msync",
    "munlock",
    "munlockall",
    "munmap",
    "nanosleep",
    "newfstatat",
    "pause",
    "pidfd_open",
    "pidfd_send_signal",
    "pipe",
    "pipe2",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "poll",
    "ppoll",
    "prctl",
    "pread64",
    "preadv",
    "preadv2",
    "prlimit64",
    "pselect6",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readahead",
    "readlink",
    "readlinkat",
    "readv",
    "recvfrom",
    "recvmmsg",
    "recvmsg",
    "remap_file_pages",
    "removexattr",
    "rename",
    "renameat",
    "renameat2",
    "restart_syscall",
    "rmdir",
    "rseq",
    "rt_sigaction",
    "rt_sigpending",
    "rt_sigprocmask",
    "rt_sigqueueinfo",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_tgsigqueueinfo",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_getaffinity",
    "sched_getattr",
    "sched_getparam",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_setaffinity",
    "sched_setattr",
    "sched_setparam",
    "sched_setscheduler",
    "sched_yield",
    "seccomp",
    "select",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "sendfile",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "set_mempolicy",
    "set_robust_list",
    "set_tid_address",
    "setfsgid",
    "setfsuid",
    "setgid",
    "setgroups",
    "setitimer",
    "setpgid",
    "setpriority",
    "setregid",
    "setresgid",
    "setresuid",
    "setreuid",
    "setrlimit",
    "setsid",
    "setsockopt",
    "setuid",
    "setxattr",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    "shutdown",
    "sigaltstack",
    "signalfd",
    "signalfd4",
    "splice",
    "stat",
    "statfs",
    "statx",
    "symlink",
    "symlinkat",
    "sync",
    "sync_file_range",
    "syncfs",
    "sysinfo",
    "tee",
    "tgkill",
    "time",
    "timer_create",
    "timer_delete",
    "timer_getoverrun",
    "timer_gettime",
    "timer_settime",
    "timerfd_create",
    "timerfd_gettime",
    "timerfd_settime",
    "times",
    "tkill",
    "truncate",
    "umask",
    "uname",
    "unlink",
    "unlinkat",
    "utime",
    "utimensat",
    "utimes",
    "vfork",
    "vmsplice",
    "wait4",
    "waitid",
    "write",
    "writev",
    "map_shadow_stack",
    "cachestat",
    "mseal",
]
"""Allowed whatever their arguments: the engine's default for a container without
capabilities, less what the module's docstring lists."""

_NOT_IMPLEMENTED = ("clone3", "openat2")
"""Fail with ENOSYS: the C library then uses clone and openat, whose arguments are checked."""

_AF_UNIX = 1
_AF_INET = 2
_AF_INET6 = 10
_AF_NETLINK = 16
_SOCK_STREAM = 1
_SOCK_DGRAM = 2
_SOCK_SEQPACKET = 5
_SOCK_TYPE_MASK = 0xF
"""The type's bits of socket()'s second argument (SOCK_NONBLOCK and SOCK_CLOEXEC aside)."""
_IPPROTO_TCP = 6
_IPPROTO_UDP = 17
_NETLINK_ROUTE = 0
_IP_SOCKETS = (
    (_SOCK_STREAM, 0),
    (_SOCK_STREAM, _IPPROTO_TCP),
    (_SOCK_DGRAM, 0),
    (_SOCK_DGRAM, _IPPROTO_UDP),
)
"""(type, protocol) of the IPv4 and IPv6 sockets allowed: TCP and UDP. The rest (MPTCP 262,
UDP-Lite 136, SCTP 132, ICMP and ICMPv6 ping sockets 1 and 58, raw sockets) never gets one,
nor does any other family (packet, vsock to the hypervisor, the kernel's crypto API,
Bluetooth, and the rarely used families whose bugs were kernel exploits)."""
_SETID_BITS = 0o6000
_NAMESPACE_FLAGS = 0x7E020000
"""CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET."""
_CLONE_FLAGS_ARG = {"x86_64": 0, "aarch64": 0}
_PTRACE_REQUESTS = (
    0,  # TRACEME: the one way to become traced, and only by one's parent
    *range(1, 16),  # PEEK*, POKE*, CONT, KILL, SINGLESTEP, GETREGS, SETREGS, *FPREGS
    *range(17, 35),  # DETACH, *FPXREGS, SYSCALL, ARCH_PRCTL, SYSEMU*, SINGLEBLOCK
    *range(0x4200, 0x4206),  # SETOPTIONS, GETEVENTMSG, *SIGINFO, GETREGSET, SETREGSET
    *range(0x4207, 0x420C),  # INTERRUPT, LISTEN, PEEKSIGINFO, *SIGMASK
    0x420E,  # GET_SYSCALL_INFO
)
"""Every request but PTRACE_ATTACH (16) and PTRACE_SEIZE (0x4206), which would trace a process
the command did not start, and SECCOMP_GET_FILTER/GET_RSEQ_CONFIGURATION (root's)."""
_PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)
"""PER_LINUX (0), PER_LINUX32 (0x8, what `linux32` asks), either with UNAME26 (0x20000), or
the query (0xFFFFFFFF): the engine default's list. ADDR_NO_RANDOMIZE (0x0040000, what
`setarch -R` asks) is not among them: no command turns address randomisation off."""
_MODE_ARGUMENT = {
    "chmod": 1,
    "fchmod": 1,
    "fchmodat": 2,
    "fchmodat2": 2,
    "open": 2,
    "openat": 3,
    "creat": 1,
    "mknod": 1,
    "mknodat": 2,
}
"""Where each call that sets a file's mode takes it: allowed only without S_ISUID/S_ISGID."""

_ARCHITECTURES = {"x86_64": "SCMP_ARCH_X86_64", "aarch64": "SCMP_ARCH_AARCH64"}


def _allow(names: list[str] | tuple[str, ...], *conditions: dict[str, Any]) -> dict[str, Any]:
    rule: dict[str, Any] = {"names": list(names), "action": "SCMP_ACT_ALLOW"}
    if conditions:
        rule["args"] = list(conditions)
    return rule


def _arg(index: int, op: str, value: int, value_two: int = 0) -> dict[str, Any]:
    return {"index": index, "value": value, "valueTwo": value_two, "op": f"SCMP_CMP_{op}"}


def profile(*, unix_sockets: bool = False, machine: str | None = None) -> dict[str, Any]:
    """The profile as the engine takes it (`--security-opt seccomp=<json>`)."""
    machine = machine or platform.machine()
    architecture = _ARCHITECTURES.get(machine)
    if architecture is None:
        raise ValueError(f"no seccomp profile for the {machine} architecture")
    names = [name for name in ALLOWED if not (machine == "aarch64" and name == "arch_prctl")]
    rules = [_allow(names)]
    # WHY one rule per (family, type, protocol): the engine ANDs the conditions of one rule
    # and ORs the rules of one call.
    rules += [
        _allow(
            ["socket"],
            _arg(0, "EQ", family),
            _arg(1, "MASKED_EQ", _SOCK_TYPE_MASK, kind),
            _arg(2, "EQ", protocol),
        )
        for family in (_AF_INET, _AF_INET6)
        for kind, protocol in _IP_SOCKETS
    ]
    rules.append(_allow(["socket"], _arg(0, "EQ", _AF_NETLINK), _arg(2, "EQ", _NETLINK_ROUTE)))
    if unix_sockets:
        rules.append(_allow(["socket"], _arg(0, "EQ", _AF_UNIX)))
    if unix_sockets:
        rules.append(_allow(["socketpair"], _arg(0, "EQ", _AF_UNIX)))
    else:
        for kind in (_SOCK_STREAM, _SOCK_SEQPACKET):
            rules.append(
                _allow(
                    ["socketpair"],
                    _arg(0, "EQ", _AF_UNIX),
                    _arg(1, "MASKED_EQ", _SOCK_TYPE_MASK, kind),
                )
            )
    rules.append(
        _allow(["clone"], _arg(_CLONE_FLAGS_ARG[machine], "MASKED_EQ", _NAMESPACE_FLAGS, 0))
    )
    rules += [_allow(["ptrace"], _arg(0, "EQ", request)) for request in _PTRACE_REQUESTS]
    rules += [_allow(["personality"], _arg(0, "EQ", value)) for value in _PERSONALITIES]
    rules += [
        _allow([name], _arg(index, "MASKED_EQ", _SETID_BITS, 0))
        for name, index in _MODE_ARGUMENT.items()
    ]
    rules.append(
        {"names": list(_NOT_IMPLEMENTED), "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS}
    )
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": errno.EPERM,
        "architectures": [architecture],
        "syscalls": rules,
    }


def security_option(*, unix_sockets: bool = False) -> str:
    """The engine's `security_opt` entry for the profile."""
    return "seccomp=" + json.dumps(profile(unix_sockets=unix_sockets), separators=(",", ":"))
