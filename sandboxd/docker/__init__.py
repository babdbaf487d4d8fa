"""The Docker backend: everything that talks to a Docker engine lives in this package.

`backend.DockerBackend` implements sandboxd.backend.Backend with one warm container per
session and spec; `container` is the container's shape (and stages sandboxd.inside into it),
`seccomp` its profile, `engine` the engine's client on worker threads, `supervisor_client`
the backend's end of the supervisor's channel over `fifo`s, `mount_check` whether a
container mounted what the policy checked, `job` a command gone on as a job, `scratch` a
sandbox's /tmp and $HOME as tmpfs volumes, `fork` a session copied into its forks by a
copier container, `exec_fallback` the `docker exec` path for images without
python3, `mount_report` the same path's mount check, `image` the image build, `ownership`
which daemon owns a container, `step_clock` the timed steps of a start.

It imports the backend protocol, the sessions' bookkeeping, the egress proxy, the policy's
pinned identities and mount table, and the inside modules whose protocol it speaks; never
the server or the client side.
"""

__all__ = ["backend", "container", "image", "keeping", "ownership", "records", "scratch"]
