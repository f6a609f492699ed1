"""Which machine each engine thread span came from, where SGLang's ``host_id`` is shared.

SGLang's ``host_id`` is the machine's ``/etc/machine-id``, which machines cloned from
one image share. The receiver adds the address each export came from to the stored
resource (:data:`.span_schema.PEER_ADDRESS`); some deployments set ``host.name`` too.
A machine is told by its **address**: one machine's processes all send from it, even
where each (a tokenizer container, a scheduler container) carries a ``host.name`` of its
own, so a ``host_id`` from one address is never split. ``host.name`` tells a machine
only where a span has no address (stored before the receiver kept addresses, or sent
without one): it is then the machine of the one address that ``host.name`` was seen
from with that ``host_id``, else a machine of its own. A ``host_id`` seen from several
machines is a clone: each of its machines becomes a host ``<host_id>@<machine>``. The
machine string is the address alone (``host.name`` only for a span without one), so it
does not depend on which of a machine's spans were read: a join's window and the spans
read beyond it, and one window and the next, name a machine alike.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .span_schema import PEER_ADDRESS, attribute_text


def machine_hosts(host_ids: dict[int, str], resources: dict[int, dict[str, Any]]
                  ) -> tuple[dict[int, str], dict[str, str]]:
    """Each thread span's host (``host_ids``: its ``host_id``; ``resources``: its stored
    resource) and each host's machine where its spans name one. A host_id that several
    machines sent becomes ``<host_id>@<machine>`` on each; one that a single machine
    sent keeps its plain name, with that machine as its machine. A machine reads as its
    address alone, or the ``host.name`` of a span without an address: never from which
    ``host.name``s the spans read happen to carry, so the spans of one window and those
    read beyond it name one machine alike."""
    places = {t: (attribute_text(resources[t].get("host.name")),
                  attribute_text(resources[t].get(PEER_ADDRESS))) for t in host_ids}
    addresses_of_name: dict[tuple[str, str], set[str]] = defaultdict(set)
    for t, (name, address) in places.items():
        if name and address:
            addresses_of_name[(host_ids[t], name)].add(address)
    machine_of: dict[int, str] = {}
    for t, (name, address) in places.items():
        host_id = host_ids[t]
        if not address and name and len(addresses_of_name[(host_id, name)]) == 1:
            address = next(iter(addresses_of_name[(host_id, name)]))
        if address or name:
            machine_of[t] = address or name
    machines_of_id: dict[str, set[str]] = defaultdict(set)
    for t, machine in machine_of.items():
        machines_of_id[host_ids[t]].add(machine)
    hosts = {t: f"{host_id}@{machine_of[t]}"
             if t in machine_of and len(machines_of_id[host_id]) > 1 else host_id
             for t, host_id in host_ids.items()}
    found: dict[str, set[str]] = defaultdict(set)
    for t, machine in machine_of.items():
        found[hosts[t]].add(machine)
    return hosts, {host: next(iter(seen)) for host, seen in found.items() if len(seen) == 1}

