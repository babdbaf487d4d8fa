"""The policy: what a request may have (which host paths, env keys, hosts, image, network).

`policy` (the daemon's rules, built once, and the paths a request may mount), `places` (the
places never mountable, and why), `env` (which env names pass), `hosts` (what an allowlist
may name), `pinned` (a path held open with the identity it was checked as), `mount_table`
(the host's mount points) and `errors` (its refusal).

Pure rules on the host's filesystem: it imports the standard library, its own modules and
the allowlist's grammar (sandboxd.egress.host_rules), never the server, the config, a
backend or the sessions (lint-imports checks it).
"""

__all__ = ["ceiling_check", "errors", "mount_table", "pinned", "places", "policy"]
