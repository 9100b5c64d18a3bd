"""Which addresses a server may bind without asking: those of this machine alone."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True when ``host`` is reachable from this machine only (``localhost``, 127.0.0.0/8,
    ::1). Host names other than ``localhost`` count as reachable by others."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
