"""Network by name for a sandbox without network: the egress proxy and its allowlist.

`proxy` (the proxy the daemon runs per sandbox, every decision made there), `host_rules`
(the allowlist's grammar and what an entry matches) and `tls_hello` (the server names of a
tunnel's TLS ClientHello, read strictly). The forwarder inside the sandbox is
sandboxd.inside.egress_forwarder.

It imports nothing of sandboxd outside itself.
"""

__all__ = ["host_rules", "proxy"]
