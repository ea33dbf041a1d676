"""A DDS peer set up the way Unitree's SDK sets itself up, for tests: a separate process with a raw Cyclone
DDS participant (no robot_rl.dds), configured as unitree_sdk2_python's ``ChannelFactoryInitialize(id, "lo")``
configures its domain, and endpoints with the SDK's QoS (none given: Cyclone's defaults).

What the SDK configures (unitree_sdk2py/core/channel.py + channel_config.py, ``ChannelConfigHasInterface``):
the one interface, with ``priority`` and ``multicast`` left at "default", and a config-level trace file;
nothing else. So AllowMulticast, ParticipantIndex and the peer list are Cyclone's defaults: discovery by
multicast on 239.255.0.1, from a unicast port picked at random (no participant index), and no unicast
peers. unitree_mujoco (unitree_sdk2, C++) does the same through its own Cyclone config.

    python sdk_peer.py robot DOMAIN TRACE_FILE DURATION_S       # feeds rt/lowstate, counts rt/lowcmd
    python sdk_peer.py controller DOMAIN TRACE_FILE DURATION_S  # sends rt/lowcmd, counts rt/lowstate

``--ours-other-group``: instead of the SDK's config, robot_rl's own loopback config with a different SPDP
multicast group (239.255.0.77), so multicast cannot connect this process with ours: it stands in for a
machine whose ``lo`` carries no multicast, where only the unicast peer can find it. With
``--no-unicast-peer`` as well (a control): nothing can.

Prints ``ready`` once its endpoints exist, then at the end ``received=N matched=M`` (samples with a good
CRC taken, most readers its writer matched at once). Ends early when stdin closes.
"""

from __future__ import annotations

import sys
import threading
import time
import xml.etree.ElementTree as ET

from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic

from robot_rl.dds import TOPIC_LOWCMD, TOPIC_LOWSTATE, cyclone_config_xml
from robot_rl.dds import unitree_go as go
from robot_rl.dds.crc import crc_ok, with_crc

# The structure of unitree_sdk2_python's ChannelConfigHasInterface with the interface filled in (its trace
# file is /tmp/cdds.LOG; here one per test).
SDK_CONFIG = """<?xml version="1.0" encoding="UTF-8" ?>
<CycloneDDS>
    <Domain Id="any">
        <General>
            <Interfaces>
                <NetworkInterface name="lo" priority="default" multicast="default"/>
            </Interfaces>
        </General>
        <Tracing>
            <Verbosity>config</Verbosity>
            <OutputFile>{trace}</OutputFile>
        </Tracing>
    </Domain>
</CycloneDDS>"""


def ours_in_another_multicast_group(unicast_peer: bool = True) -> str:
    """Our loopback config, but multicast SPDP on another group AND port (a socket on the same port would
    still get the other group's datagrams: Linux's IP_MULTICAST_ALL), so multicast cannot connect us."""
    root = ET.fromstring(cyclone_config_xml("lo"))
    discovery = root.find("./Domain/Discovery")
    ET.SubElement(discovery, "SPDPMulticastAddress").text = "239.255.0.77"
    ET.SubElement(ET.SubElement(discovery, "Ports"), "MulticastMetaOffset").text = "7"
    if not unicast_peer:  # no unicast discovery either way: no peer list, and a random port (no index)
        discovery.remove(discovery.find("Peers"))
        discovery.find("ParticipantIndex").text = "none"
    return ET.tostring(root, encoding="unicode")


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    role, domain_id, trace, duration_s = args[0], int(args[1]), args[2], float(args[3])
    if "--ours-other-group" in sys.argv:
        config = ours_in_another_multicast_group(unicast_peer="--no-unicast-peer" not in sys.argv)
    else:
        config = SDK_CONFIG.format(trace=trace)
    domain = Domain(domain_id, config)  # kept referenced: dropping it deletes the domain and its config
    dp = DomainParticipant(domain_id)
    if role == "robot":
        reader = DataReader(dp, Topic(dp, TOPIC_LOWCMD, go.LowCmd_))
        writer = DataWriter(dp, Topic(dp, TOPIC_LOWSTATE, go.LowState_))
        msg = go.default_low_state()
    else:
        reader = DataReader(dp, Topic(dp, TOPIC_LOWSTATE, go.LowState_))
        writer = DataWriter(dp, Topic(dp, TOPIC_LOWCMD, go.LowCmd_))
        msg = go.default_low_cmd()
        for i in range(12):
            msg.motor_cmd[i].kd = 1.0  # damping
    print("ready", flush=True)
    stdin_closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stdin_closed.set()), daemon=True).start()
    received, matched, tick, end = 0, 0, 0, time.monotonic() + duration_s
    while time.monotonic() < end and not stdin_closed.is_set():
        tick += 1
        if role == "robot":
            msg.tick = tick
        writer.write(with_crc(msg))
        received += sum(1 for m in reader.take(N=64) if m.sample_info.valid_data and crc_ok(m))
        if tick % 20 == 0:
            matched = max(matched, len(writer.get_matched_subscriptions()))
        time.sleep(0.005)
    print(f"received={received} matched={matched}", flush=True)
    del domain
    return 0


if __name__ == "__main__":
    sys.exit(main())
