"""The Docker backend: everything that talks to a Docker engine lives in this package.

`backend.DockerBackend` implements sandboxd.backend.Backend with one warm container per
session and spec; `container` is the container's shape, `engine` the engine's client on
worker threads, `exec_fallback` the `docker exec` path for images without python3,
`mount_report` the same path's mount check, `image` the image build, `ownership` which
daemon owns a container.
"""
