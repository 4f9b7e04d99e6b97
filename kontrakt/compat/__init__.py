"""Other Kafka clients' API shapes over Kontrakt's clients, for moving code over in steps.

:mod:`kontrakt.compat.confluent_kafka` has confluent-kafka's method-style records
(``msg.value()``) and error values (``err.code()``); see ``docs/migrating-from-*.md``.
"""
