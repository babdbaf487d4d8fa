"""The code that runs inside the sandbox container, and nothing else.

`supervisor` (the container's PID 1: runs each command, reports the mounts) and
`egress_forwarder` (relays the sandbox's proxy port to the daemon's egress proxy):
sandboxd.docker.container stages them, with logos.runners.capture and logos.runners.live, flat
into the container's read-only control directory, where they import each other by their bare
names. `copier` is the only program of a fork's copier container (sandboxd.docker.fork),
given to its python3 as the text of a `-c`.

So its modules import only the standard library, those two logos modules and each other
(lint-imports checks it, external packages included).
"""

__all__ = ["copier", "egress_forwarder", "supervisor"]
