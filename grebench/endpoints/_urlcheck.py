"""Server-side checks of submitted endpoint URLs (SSRF guard) and the pinned address used for the calls.

A submitted base URL is fetched later by the bench stage from inside our network, so it must never point at
loopback, private, link-local (cloud metadata 169.254.169.254), multicast, reserved or unspecified addresses,
nor at the product's own services.  The host is resolved once here; the checked address is *pinned* and the
bench stage connects to that address only (see :func:`pinned_transport`), so a DNS answer that changes between
the check and the call (DNS rebinding) cannot redirect it.  Redirects are not followed; a redirect target must
pass :func:`check_url` again.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from grebench.settings import Settings

Resolver = Callable[[str, int], list[str]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Ports a submission may use besides the scheme's default: unprivileged ports only (no 22, 25, 6379 ...).
MIN_CUSTOM_PORT = 1024
MAX_URL_CHARS = 2048
_BLOCKED_HIGH_PORTS = frozenset({2375, 2376, 2379, 3306, 5432, 5984, 6379, 9200, 11211, 27017})
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$", re.IGNORECASE)
_DOTTED_QUAD = re.compile(r"^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$")
_LOCAL_NAMES = ("localhost", ".localhost", ".local", ".internal", ".home.arpa")
#: Reasons an operator's ``submission_private_allowlist`` may override; link-local (cloud metadata), unspecified,
#: multicast, reserved, IPv4-mapped and tunnelled addresses are refused whatever the allowlist says.
_OVERRIDABLE = frozenset({"a loopback address", "a private address", "not a public address"})


class URLRejected(ValueError):
    """A submitted URL failed checks; ``problems`` names each (with what to do instead), the message joins them.
    Both are safe to show to the submitter."""

    def __init__(self, problems: str | Sequence[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("; ".join(self.problems))


@dataclass(frozen=True)
class PinnedEndpoint:
    """A checked endpoint: the URL as submitted (normalised), its host, and the one address calls must use."""

    url: str
    host: str
    ip: str
    port: int


def system_resolver(host: str, port: int) -> list[str]:
    """Resolve with the system resolver (``socket.getaddrinfo``); tests inject a dict instead."""
    infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


def as_resolver(resolver: Resolver | Mapping[str, Iterable[str]] | None) -> Resolver:
    """Accept a callable, a ``{host: [ip, ...]}`` mapping (unknown hosts do not resolve) or None (system)."""
    if resolver is None:
        return system_resolver
    if callable(resolver):
        return resolver
    table = {k.lower(): list(v) for k, v in resolver.items()}

    def lookup(host: str, port: int) -> list[str]:
        if host not in table:
            raise socket.gaierror(f"{host}: name does not resolve")
        return table[host]

    return lookup


#: IANA special-purpose ranges that Python's ``is_global`` does not (all) exclude: an allow rule (``is_global``)
#: plus this explicit list, so a range the standard library misclassifies still never passes.
_SPECIAL: tuple[tuple[str, str], ...] = (
    ("fec0::/10", "a site-local IPv6 address"),
    ("64:ff9b::/96", "a NAT64 address"), ("64:ff9b:1::/48", "a NAT64 address"),
    ("::/96", "an IPv4-compatible IPv6 address"), ("100::/64", "a discard-only address"),
    ("2001::/23", "an IETF protocol-assignment address"), ("2001:db8::/32", "a documentation address"),
    ("3fff::/20", "a documentation address"), ("5f00::/16", "a segment-routing address"),
    ("fc00::/7", "a private address"), ("0.0.0.0/8", "a 'this network' address"),
    ("100.64.0.0/10", "a shared (CGNAT) address"), ("192.0.0.0/24", "an IETF protocol-assignment address"),
    ("192.0.2.0/24", "a documentation address"), ("198.18.0.0/15", "a benchmarking address"),
    ("198.51.100.0/24", "a documentation address"), ("203.0.113.0/24", "a documentation address"),
    ("240.0.0.0/4", "a reserved address"), ("255.255.255.255/32", "a broadcast address"),
)
_SPECIAL_NETS = tuple((ipaddress.ip_network(net), why) for net, why in _SPECIAL)


def blocked_reason(ip: IPAddress) -> str | None:
    """Why an address may not be reached from a submission, or None when it is a public unicast address."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return "an IPv4-mapped IPv6 address"
        if ip.sixtofour is not None or ip.teredo is not None:
            return "a tunnelled (6to4/Teredo) IPv6 address"
        if ip.is_site_local:
            return "a site-local IPv6 address"
    for net, why in _SPECIAL_NETS:
        if ip.version == net.version and ip in net and not (ip.is_loopback or ip.is_unspecified
                                                            or (ip.is_private and why == "a private address")):
            return why
    checks = (("loopback", ip.is_loopback), ("link-local", ip.is_link_local), ("unspecified", ip.is_unspecified),
              ("multicast", ip.is_multicast), ("reserved", ip.is_reserved), ("private", ip.is_private))
    for name, hit in checks:
        if hit:
            return f"a {name} address"
    if not ip.is_global:
        return "not a public address"
    return None


def _parse_ip_literal(host: str) -> IPAddress | None:
    """The address when ``host`` is an IP literal; refuses the odd numeric spellings browsers and libc accept."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if ":" in host:
        raise URLRejected(f"host {host!r} is not a valid IPv6 address")
    if all(_NUMERIC_LABEL.match(label) for label in host.split(".")) and not _DOTTED_QUAD.match(host):
        # 2130706433, 0177.0.0.1, 0x7f.1, 127.1: inet_aton reads all of these as 127.0.0.1
        raise URLRejected(f"host {host!r} is a numerically encoded address; use a host name")
    return None


def _own_services(own: Iterable[str]) -> set[tuple[str, int | None]]:
    """(host, port) pairs of the product's own services: every port of that host is blocked, and for a
    service bound to every interface (0.0.0.0 / ::) its port is blocked on every address."""
    out: set[tuple[str, int | None]] = set()
    for item in own:
        if not item:
            continue
        parts = urlsplit(item if "://" in item else f"//{item}")
        if parts.hostname:
            try:
                port = parts.port
            except ValueError:
                port = None
            out.add((parts.hostname.lower().rstrip("."), port))
    return out


def _own_addresses(own: set[tuple[str, int | None]], resolve: Resolver) -> set[IPAddress]:
    """Every address of the product's own services: literals, ``localhost`` and names the resolver knows."""
    out: set[IPAddress] = set()
    for host, port in own:
        if _is_ip(host):
            out.add(ipaddress.ip_address(host))
        elif host == "localhost" or host.endswith(".localhost"):
            out.update({ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")})
        else:
            try:
                answers = resolve(host, port or 443)
            except (OSError, UnicodeError):
                continue  # an own service that does not resolve cannot be reached through its name either
            for answer in answers:
                try:
                    out.add(ipaddress.ip_address(str(answer).split("%")[0]))
                except ValueError:
                    continue
    return out


def _networks(items: Iterable[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Parse ``submission_private_allowlist`` entries (CIDR or single addresses); a bad entry is an error."""
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        try:
            out.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"submission_private_allowlist: {item!r} is not a network (e.g. 10.20.0.0/16)") from None
    return out


_URL_IN_TEXT = re.compile(r"https?://[^\s,;\"'<>]+", re.IGNORECASE)


def own_service_urls(settings: Settings) -> list[str]:
    """Every URL in the operator's settings (estimator servers, the scoring LLM's base, ...) and the app's address.

    A rule about information, not about known backends: whatever estimator spec names a server (a plugin's too),
    its URL sits in a setting, so a submission can never point the bench at it.  ``[[candidates]]`` and
    ``[[judges]]`` tables are left out: they name public model APIs a submitter may legitimately use as well.
    """
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.extend(m.group(0).rstrip("/.") for m in _URL_IN_TEXT.finditer(value))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    walk(dict(settings.values))
    found.append(f"http://{settings.app.app_host}:{settings.app.app_port}")
    return list(dict.fromkeys(found))


def check_url(url: str, *, http_allowlist: Iterable[str] = (), own_services: Iterable[str] = (),
              resolver: Resolver | Mapping[str, Iterable[str]] | None = None,
              private_allowlist: Iterable[str] = ()) -> PinnedEndpoint:
    """Validate a submitted base URL and pin the address the later calls must use.

    Raises :class:`URLRejected` naming **every** problem found (``problems``), each with advice fit for the
    submitter, so that one reply says all there is to fix (``http://127.0.0.1:1``: plain http, port 1 and a loopback
    address at once).  No connection is made; the only network action is name resolution through ``resolver``, and
    only for an http(s) URL with a well-formed host.  ``private_allowlist`` (the operator's dangerous
    ``submission_private_allowlist``) lets loopback/private addresses inside those networks through; the product's
    own services and link-local, multicast, unspecified or mapped addresses never pass.
    """
    allowed_private = _networks(private_allowlist)
    text = (url or "").strip()
    if not text:
        raise URLRejected("the base URL is empty")
    if len(text) > MAX_URL_CHARS:  # not parsed further: a huge input gets a short answer
        raise URLRejected(f"the base URL is {len(text):,} characters long (limit {MAX_URL_CHARS:,})")
    if any(ord(c) < 33 for c in text):
        raise URLRejected("the base URL contains spaces or control characters")
    problems: list[str] = []
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if "@" in parts.netloc or parts.username is not None or parts.password is not None:
        problems.append("credentials in the URL (user@host) are not allowed; use the API key field")
    if scheme not in ("https", "http"):  # not a web address: nothing else about it is worth saying
        raise URLRejected([f"scheme {scheme or '(none)'!r} is not allowed; use https://", *problems])
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise URLRejected([*problems, "the URL has no host; write it as https://host[:port]/path"])
    try:
        host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise URLRejected([*problems, f"host {host!r} is not a valid host name"]) from None
    allow = {h.strip().lower() for h in http_allowlist if h.strip()}
    if scheme == "http" and host not in allow:
        problems.append(f"plain http is not allowed for {host}; use https:// (http only for allowlisted hosts)")
    port: int | None
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        port = None
        problems.append("the port is not a number between 0 and 65535")
    if port is not None and port not in (80, 443) and (port < MIN_CUSTOM_PORT or port in _BLOCKED_HIGH_PORTS):
        why = ("a database or admin port" if port in _BLOCKED_HIGH_PORTS
               else f"a privileged port (below {MIN_CUSTOM_PORT})")
        problems.append(f"port {port} is not allowed ({why}); use 443, 80 or another port from {MIN_CUSTOM_PORT} up")
    own = _own_services(own_services)
    addresses: list[IPAddress] = []
    literal: IPAddress | None = None
    if host in _LOCAL_NAMES or host.endswith(_LOCAL_NAMES[1:]):
        problems.append(f"host {host!r} is a local name; use the endpoint's public host name")
    else:
        try:
            literal = _parse_ip_literal(host)
        except URLRejected as exc:
            problems.extend(exc.problems)
        else:
            addresses = [literal] if literal is not None else _resolve(host, port or 443, resolver, problems)
    own_ips = _own_addresses(own, as_resolver(resolver)) if addresses else set()
    any_interface_ports = {p for h, p in own if p is not None and _is_ip(h) and ipaddress.ip_address(h).is_unspecified}
    own_service = any(h == host for h, _ in own)
    blocked = False
    for ip in addresses:
        reason = blocked_reason(ip)
        if reason is not None and not (reason in _OVERRIDABLE and any(ip in net for net in allowed_private
                                                                      if net.version == ip.version)):
            how = "is" if literal is not None else f"resolves to {ip}, which is"
            problems.append(f"host {host!r} {how} {reason}; only public addresses are allowed (the endpoint must be "
                            "reachable from the internet)")
            blocked = True
            break  # one bad address says it: the others of the same name would repeat it
        if ip in own_ips or port in any_interface_ports:
            own_service = True
    if own_service and not blocked:  # an address refused already says all (the app listens on loopback)
        problems.append("this URL points at one of GRE-bench's own services")
    if problems:
        raise URLRejected(problems)
    assert port is not None  # a bad port is a problem above
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{port}"
    normalised = urlunsplit((scheme, netloc, parts.path.rstrip("/") or "", parts.query, ""))
    return PinnedEndpoint(url=normalised, host=host, ip=str(addresses[0]), port=port)


def _resolve(host: str, port: int, resolver: Resolver | Mapping[str, Iterable[str]] | None,
             problems: list[str]) -> list[IPAddress]:
    """The addresses ``host`` resolves to; a failure is added to ``problems`` (and nothing returned)."""
    try:
        answers = as_resolver(resolver)(host, port)
    except (OSError, UnicodeError) as exc:
        problems.append(f"host {host!r} does not resolve ({type(exc).__name__}); check the name")
        return []
    addresses = []
    for answer in answers:
        try:
            addresses.append(ipaddress.ip_address(str(answer).split("%")[0]))
        except ValueError:
            problems.append(f"host {host!r} resolved to an unusable address")
            return []
    if not addresses:
        problems.append(f"host {host!r} does not resolve; check the name")
    return addresses


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def check_submitted_url(url: str, settings: Settings,
                        resolver: Resolver | Mapping[str, Iterable[str]] | None = None) -> PinnedEndpoint:
    """:func:`check_url` with the operator's settings: http and private allowlists, the product's own services."""
    return check_url(url, http_allowlist=settings.submissions.submission_http_allowlist.split(","),
                     own_services=own_service_urls(settings), resolver=resolver,
                     private_allowlist=settings.submissions.submission_private_allowlist.split(","))


def check_redirect(endpoint: PinnedEndpoint, location: str, **kwargs: Any) -> PinnedEndpoint:
    """A redirect target gets the full check again (the HTTP client itself never follows redirects)."""
    from urllib.parse import urljoin

    return check_url(urljoin(endpoint.url + "/", location), **kwargs)
