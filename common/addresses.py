"""Which addresses a server may bind without asking (those of this machine alone), and the
error a command gives when it cannot listen on one."""

from __future__ import annotations

import errno
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


def listen_error(command: str, host: str, port: int, error: OSError) -> ValueError:
    """The error of ``command`` (``"gagpo view"``...) failing to listen on ``host:port``, as
    the command line prints it (``gagpo: error: ...``, exit 2) instead of a traceback: the port
    taken, or an address that is not this machine's, with what to do about it."""
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if error.errno == errno.EADDRINUSE:
        why = (f"port {port} is in use (another server, or an earlier {command} still "
               "running): stop it, or pick another with --port")
    elif error.errno == errno.EADDRNOTAVAIL:
        why = f"{host} is not an address of this machine: pick another with --host"
    elif error.errno == errno.EACCES:
        why = f"port {port} needs privileges this user lacks: pick one above 1023 with --port"
    else:
        why = error.strerror or str(error)
    return ValueError(f"{command} cannot listen on {shown}: {why}")
