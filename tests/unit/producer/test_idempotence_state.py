"""The idempotent producer's per-partition sequence state tells batches of the current
producer id and epoch from those of an older id: a new producer id starts again at epoch 0,
so the epoch alone would take an old id's answer for one of the current id."""

from __future__ import annotations

from kontrakt.clients.producer._accumulator import RecordAccumulator
from kontrakt.clients.producer._batch import ProducerBatch
from kontrakt.clients.producer._idempotence import IdempotenceState
from kontrakt.protocol.records import CompressionType


def _batch(acc: RecordAccumulator, producer_id: int, epoch: int, sequence: int
           ) -> ProducerBatch:
    b = ProducerBatch(acc, "t", 0, None, 0.0)
    b.producer_id, b.producer_epoch, b.base_sequence = producer_id, epoch, sequence
    return b


def test_an_old_producer_ids_late_answer_does_not_move_the_current_sequences() -> None:
    acc = RecordAccumulator(batch_size=16_384, linger=0.0, buffer_memory=1 << 20,
                            compression=CompressionType.NONE, compression_level=None,
                            delivery_timeout=10.0, threaded=False,
                            wakeup=lambda *a, **k: None)
    idem = IdempotenceState()
    idem.producer_id, idem.producer_epoch = 8, 0
    old = _batch(acc, 7, 0, 40)  # sent under the previous id, which also had epoch 0
    idem.assign(old, 5)
    idem.done(old, True, 5)
    assert not idem.current(old)
    new = _batch(acc, -1, -1, -1)
    idem.assign(new, 1)
    new.producer_id, new.producer_epoch = 8, 0
    assert idem.current(new)
    # The current id's first sequence is neither overtaken nor unexpected: the old id's
    # acknowledged sequences 40-44 are not this id's.
    assert not idem.is_overtaken(new)
    assert idem.is_next_expected(new)
