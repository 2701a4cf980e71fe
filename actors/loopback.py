"""Whether a host name is this machine only: the HTTP front's bind check and OAuth discovery's
loopback exception read the same rule."""
from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost (brackets and case ignored): only this machine can connect."""
    name = host.strip().lower().strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
