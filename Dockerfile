# The default sandbox image for sandboxd: a small Debian with the tools agents reach for.
# Build:  sandboxd build-image   (or: docker build -t logos-sandbox:latest .)
# Offline: docker build --build-arg BASE=<a locally imported Debian image> -t logos-sandbox:latest .
ARG BASE=debian:bookworm-slim
FROM ${BASE}

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      bash coreutils findutils grep sed gawk git curl ca-certificates python3 procps less ripgrep \
 && rm -rf /var/lib/apt/lists/*

# Commands run as the calling user's uid:gid (set per container by sandboxd); this user is
# the fallback identity for a plain `docker run` of the image.
RUN useradd --create-home --uid 1000 --shell /bin/bash sandbox
USER sandbox
WORKDIR /home/sandbox
CMD ["/bin/bash"]
