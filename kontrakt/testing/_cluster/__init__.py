"""An in-process, pure-Python Kafka cluster for tests and development (:class:`Cluster`).

Modules, one job each: ``_server`` (listeners, connections, dispatch, injected faults),
``_state`` (brokers, topics, settings), ``_log`` (a partition's batches, idempotent producer
state, transaction markers), ``_data`` (metadata, produce, offsets lookups, producers and
log dirs), ``_fetch`` (fetch and its sessions), ``_topics`` (topic admin and configs),
``_groups`` and ``_offsets`` (classic groups and committed offsets), ``_consumer_groups``
(KIP-848), ``_txn`` (producer ids and transactions), ``_faults`` (error replies),
``_admin_apis`` (leader elections, reassignments, DescribeTopicPartitions, features),
``_persist`` (the optional storage folder: segment files, journal, recovery),

``_acls`` (ACL store, authorizer decision, the ACL APIs) and ``_authorize`` (the checks
wrapped around the handlers when ``authorizer=True``), ``_quotas`` (client quotas),
``_tokens`` (delegation tokens), ``_telemetry`` (KIP-714, no subscription).
"""

from __future__ import annotations

from kontrakt.testing._cluster._cluster import Cluster

__all__ = ["Cluster"]
