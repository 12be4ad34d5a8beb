"""Which ``Host`` a request may name, and which page may send it (DNS rebinding).

A ``--no-auth`` server answers loopback clients only, and DNS rebinding satisfies that: a web
page the user visits at ``http://attacker.example:8000/`` has its name re-pointed at 127.0.0.1,
and the browser then sends the page's requests to the local server, with
``Host: attacker.example:8000`` and ``Origin: http://attacker.example:8000``. So a keyless server
answers only requests that name it by a loopback name (``127.0.0.1``, ``localhost``, ``[::1]``,
any port) and that come from no page but its own (no ``Origin``, or the origin the request was
sent to). A keyed server needs no such guard to keep its data (a page of another origin never
has the key), but a deployment can still pin the names it answers to (``--allowed-hosts``).

Starlette's ``TrustedHostMiddleware`` checks the Host alone and answers in plain text; this
checks the Origin too and answers in the API's typed JSON.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from xlrag.errors import ConfigError
from xlrag.server.errors import error_response
from xlrag.text import capped

__all__ = ["ANY_HOST", "LOOPBACK_NAMES", "HostGuardMiddleware", "resolve_allowed_hosts"]

#: The names a keyless server answers to (the bracketed IPv6 form is how a Host header writes ::1).
LOOPBACK_NAMES: tuple[str, ...] = ("127.0.0.1", "localhost", "::1")
ANY_HOST = "*"
# a DNS name (labels of letters, digits and hyphens), optionally "*." for any subdomain
_NAME = re.compile(r"^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")


def _normal(name: str) -> str | None:
    """A host as the guard compares it (lower case, IPv6 without brackets), or None if it is
    not a host name or an IP address."""
    name = name.strip().lower().rstrip(".")
    bare = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        pass
    return name if name and _NAME.match(name) else None


def resolve_allowed_hosts(hosts: Sequence[str] | str | None, no_auth: bool) -> tuple[str, ...] | None:
    """The host names the server answers to, or None for any. ``--no-auth``: the loopback
    names, always. With a key: ``hosts`` (a list, or one string with commas), or any."""
    given = hosts.split(",") if isinstance(hosts, str) else list(hosts or [])
    given = [h.strip() for h in given if h.strip()]
    if no_auth:
        if given:
            raise ConfigError("--allowed-hosts is for a server with a key: a --no-auth server answers "
                              f"{', '.join(LOOPBACK_NAMES)} only; drop --allowed-hosts, or set XLRAG_API_KEY "
                              "and drop --no-auth")
        return LOOPBACK_NAMES
    if not given or ANY_HOST in given:
        return None
    out = []
    for h in given:
        n = _normal(h)
        if n is None:
            raise ConfigError(f"--allowed-hosts: {capped(h, 60)} is not a host name or an IP address; give names "
                              "such as xlrag.example.org, *.example.org or 10.0.0.5, separated by commas "
                              "(no scheme, no port)")
        out.append(n)
    return tuple(dict.fromkeys(out))


def _matches(host: str, allowed: Sequence[str]) -> bool:
    return any(host == a or (a.startswith("*.") and host.endswith(a[1:])) for a in allowed)


def _host_of(value: str) -> tuple[str | None, int | None] | None:
    """(host, port) of a Host header's value (port None when absent), None when malformed."""
    try:
        parts = urlsplit(f"//{value}")
        port = parts.port
    except ValueError:
        return None
    if parts.username is not None or parts.path or parts.query or parts.fragment:
        return None
    return (_normal(parts.hostname) if parts.hostname else None), port


class HostGuardMiddleware:
    """400 for a request whose ``Host`` is not one of ``allowed``; with ``same_origin``, 403 for
    one whose ``Origin`` is another origin than the one it was sent to."""

    def __init__(self, app: ASGIApp, allowed: Sequence[str], same_origin: bool):
        self.app = app
        self.allowed = tuple(allowed)
        self.same_origin = same_origin

    def _names(self) -> str:
        return ", ".join(f"[{a}]" if ":" in a else a for a in self.allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        raw = headers.get("host")
        parsed = _host_of(raw) if raw is not None else None
        if parsed is None or parsed[0] is None or not _matches(parsed[0], self.allowed):
            said = "no Host header" if raw is None else f"Host {capped(raw, 80)}"
            await error_response(400, "host_not_allowed", f"this server answers requests for {self._names()} only, "
                                 f"not {said}: open it by one of those names (a page of another site that "
                                 "reaches it through its own name is refused)")(scope, receive, send)
            return
        origin = headers.get("origin")
        if self.same_origin and origin is not None and not self._own(origin, parsed):
            await error_response(403, "origin_not_allowed", f"this server runs without an API key (--no-auth) and "
                                 f"answers its own page only, not one from {capped(origin, 80)}; open "
                                 f"http://{raw}/ instead")(scope, receive, send)
            return
        await self.app(scope, receive, send)

    @staticmethod
    def _own(origin: str, host: tuple[str | None, int | None]) -> bool:
        """Whether ``origin`` is the origin the request was sent to (http, its Host and port)."""
        try:
            o = urlsplit(origin)
            port = o.port
        except ValueError:
            return False
        if o.scheme != "http" or not o.hostname:
            return False  # "null" (a sandboxed frame, a file), https (not what this server speaks)
        return _normal(o.hostname) == host[0] and (port or 80) == (host[1] or 80)
