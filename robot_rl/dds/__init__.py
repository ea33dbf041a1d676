"""DDS plumbing shared by every DDS robot interface: Unitree's low-level message types
(``unitree_go``, ``unitree_hg``), Unitree's CRC over commands (``crc``), and participants bound to one
network interface.

Importing this package does not import Cyclone DDS; the submodules do, with a clear error when the
``deploy`` extra is missing.
"""

from __future__ import annotations

import re
import socket
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cyclonedds.domain import Domain, DomainParticipant

CYCLONEDDS_MISSING = (
    "robot_rl.dds needs the Cyclone DDS Python binding, which is part of the 'deploy' extra: "
    "pip install 'robot-rl[deploy]' (cyclonedds==11.0.1)"
)

# Unitree's topic names for the low-level loop.
TOPIC_LOWCMD = "rt/lowcmd"
TOPIC_LOWSTATE = "rt/lowstate"

LOOPBACK_INTERFACES = ("lo", "lo0")
# Cyclone's default port mapping (7400 + 250·domain + offsets) stays below 65535 up to domain 232.
MAX_DOMAIN_ID = 232
_INTERFACE_NAME = re.compile(r"^[A-Za-z0-9_.:\-]{1,64}$")


def _require_cyclonedds() -> None:
    try:
        import cyclonedds  # noqa: F401
    except ImportError as exc:
        raise ImportError(CYCLONEDDS_MISSING) from exc


def cyclone_config_xml(interface: str = "lo") -> str:
    """Cyclone DDS configuration that binds a domain to one network interface.

    On a loopback interface discovery goes both ways at once, so that every kind of peer on the same
    machine is found:

    - multicast SPDP (``AllowMulticast`` = ``spdp``: participants are announced to, and heard on, Cyclone's
      default discovery group 239.255.0.1). Unitree's SDK (``ChannelFactoryInitialize(0, "lo")``) and
      unitree_mujoco configure nothing but the interface, so their participants announce themselves by
      multicast only, from a unicast port chosen at random; without this nothing of theirs is ever heard.
    - unicast SPDP to 127.0.0.1 at the well-known ports of participant indices (``ParticipantIndex`` auto,
      ``Peer`` 127.0.0.1): our own processes still find each other where ``lo`` carries no multicast
      (some containers and CI machines).

    User data stays unicast (``spdp`` allows multicast for discovery only). On a real interface (the robot's
    Ethernet port) Cyclone's default multicast discovery is kept, as Unitree's SDK does, so the robot's
    participants are found.
    """
    if not isinstance(interface, str) or not _INTERFACE_NAME.match(interface):
        raise ValueError(f"DDS network interface {interface!r} is not a valid interface name "
                         "(letters, digits, '_', '.', ':', '-')")
    if interface in LOOPBACK_INTERFACES:
        return (
            '<CycloneDDS><Domain Id="any">'
            f'<General><Interfaces><NetworkInterface name="{interface}"/></Interfaces>'
            "<AllowMulticast>spdp</AllowMulticast></General>"
            "<Discovery><ParticipantIndex>auto</ParticipantIndex>"
            '<Peers><Peer address="127.0.0.1"/></Peers></Discovery>'
            "</Domain></CycloneDDS>"
        )
    return (
        '<CycloneDDS><Domain Id="any">'
        f'<General><Interfaces><NetworkInterface name="{interface}"/></Interfaces></General>'
        "</Domain></CycloneDDS>"
    )


# A Cyclone domain can be configured once per process, and deleting its Domain object deletes every
# participant in it, so the configured domains live here for the life of the process.
_domains: dict[int, tuple[str, Domain]] = {}
_domains_lock = threading.Lock()


def _check_domain_id(domain_id: int) -> None:
    if isinstance(domain_id, bool) or not isinstance(domain_id, int) or not 0 <= domain_id <= MAX_DOMAIN_ID:
        raise ValueError(f"DDS domain id {domain_id!r} must be an integer in 0..{MAX_DOMAIN_ID}")


def _check_interface_exists(interface: str) -> None:
    names = [name for _, name in socket.if_nameindex()]
    if interface not in names:
        raise ValueError(f"DDS network interface {interface!r} does not exist on this machine; "
                         f"interfaces: {', '.join(names)}")


def make_participant(domain_id: int, interface: str = "lo") -> DomainParticipant:
    """A DomainParticipant on ``domain_id`` whose traffic stays on ``interface``.

    The first call for a domain configures it (see ``cyclone_config_xml``); later calls reuse that
    configuration and must name the same interface. Use a robot's Ethernet interface (e.g. ``eth0``) on
    domain 0 to talk to a Unitree robot, and ``lo`` on a private domain id for tests and sim bridges.
    """
    _check_domain_id(domain_id)
    config = cyclone_config_xml(interface)
    _check_interface_exists(interface)
    _require_cyclonedds()
    from cyclonedds.domain import Domain, DomainParticipant

    with _domains_lock:
        existing = _domains.get(domain_id)
        if existing is None:
            _domains[domain_id] = (interface, Domain(domain_id, config))
        elif existing[0] != interface:
            raise ValueError(f"DDS domain {domain_id} is already bound to interface {existing[0]!r} in this "
                             f"process; cannot also bind it to {interface!r}")
        return DomainParticipant(domain_id)


def close_domain(domain_id: int) -> None:
    """Delete a domain configured by ``make_participant`` together with all its participants, readers
    and writers (their Python objects become unusable). A no-op for a domain that is not configured."""
    with _domains_lock:
        entry = _domains.pop(domain_id, None)
    if entry is not None:
        # Entities are deleted in C when their Python object goes; the registry held the last reference.
        del entry
