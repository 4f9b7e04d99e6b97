"""Child process of test_consumer_crash.py: a group consumer with auto commit that records
every record it processed before it polls again, until it is killed.

Usage: python -m tests.integration._crash_child BOOTSTRAP TOPIC GROUP MODE OUT_PATH
(MODE: getmany | poll). Each processed record is one line ``partition offset monotonic``,
written and flushed to OUT_PATH (the kernel keeps it across a SIGKILL) before the next
poll. Processing takes a little time per batch, so that a kill mostly lands while records
are handed out but not yet recorded: the window in which an early commit loses them.
"""

from __future__ import annotations

import sys
import time

from kontrakt.clients.consumer import Consumer

BATCH = 200
#: Timed commits this often: many of them land while a batch is being processed.
AUTO_COMMIT_INTERVAL_MS = 20


def main(bootstrap: str, topic: str, group: str, mode: str, out_path: str) -> None:
    with open(out_path, "a") as out, Consumer(
            bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
            session_timeout_ms=1000, heartbeat_interval_ms=100,
            auto_commit_interval_ms=AUTO_COMMIT_INTERVAL_MS, max_poll_records=BATCH,
            fetch_max_wait_ms=100) as consumer:
        consumer.subscribe([topic])
        while True:
            if mode == "getmany":
                got = consumer.getmany(timeout=1.0, max_records=BATCH)
                records = [r for recs in got.values() for r in recs]
                work = 0.02
            else:
                rec = consumer.poll(1.0)
                records = [] if rec is None else [rec]
                work = 0.0005
            if not records:
                continue
            time.sleep(work)  # the application's processing
            now = time.monotonic()
            out.write("".join(f"{r.partition} {r.offset} {now}\n" for r in records))
            out.flush()


if __name__ == "__main__":
    main(*sys.argv[1:6])
