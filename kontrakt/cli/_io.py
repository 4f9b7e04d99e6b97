"""``kontrakt produce`` and ``kontrakt consume``: records from and to the terminal, kcat-style.

Formats (``--format`` for values, ``--key-format`` for keys):

* ``raw``: the bytes as they are (produce: the line, UTF-8);
* ``json``: JSON text, checked on produce;
* ``avro``, ``json-schema``, ``protobuf``: Confluent-framed through the Schema Registry;
  produce reads one JSON document per line and encodes it with ``--schema FILE`` (registered
  under the subject when new) or the subject's latest version; consume decodes any schema
  the registry holds and prints JSON.

A progress display (records, bytes, rate) is drawn on standard error when it is a terminal
and the records do not go to the same terminal, with ``rich`` installed (``kontrakt[cli]``);
``--quiet`` turns it and the closing summary off.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import click

from kontrakt._types import ConsumerRecord, TopicPartition
from kontrakt.cli._common import (
    EXIT_CHECK_FAILED,
    CliError,
    Connection,
    connection_options,
    parse_pairs,
    reported,
)

__all__ = ["consume", "produce"]

FORMATS = ("raw", "json", "avro", "json-schema", "protobuf")
_REGISTRY_FORMATS = ("avro", "json-schema", "protobuf")
_TIMEOUT = 30.0


# ----------------------------------------------------------------------------- progress
class _Progress:
    """Records and bytes so far, drawn live on a terminal (rich), summarised at the end."""

    def __init__(self, verb: str, enabled: bool, quiet: bool) -> None:
        self.verb = verb
        self.records = 0
        self.bytes = 0
        self.quiet = quiet
        self.started = time.monotonic()
        self._live: Any = None
        self._task: Any = None
        if enabled and not quiet:
            try:
                from rich.console import Console
                from rich.progress import Progress, TextColumn, TimeElapsedColumn
            except ImportError:
                return
            self._live = Progress(
                TextColumn(f"{verb} {{task.fields[records]:,}} records, "
                           "{task.fields[mib]:.1f} MiB, {task.fields[rate]:,.0f}/s"),
                TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            self._task = self._live.add_task(verb, records=0, mib=0.0, rate=0.0)
            self._live.start()

    def add(self, nbytes: int) -> None:
        self.records += 1
        self.bytes += nbytes
        if self._live is not None and not self.records % 500:
            elapsed = max(time.monotonic() - self.started, 1e-6)
            self._live.update(self._task, records=self.records, mib=self.bytes / 2**20,
                              rate=self.records / elapsed)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
        if not self.quiet:
            elapsed = time.monotonic() - self.started
            click.echo(f"% {self.verb} {self.records} record(s), {self.bytes} bytes in "
                       f"{elapsed:.1f}s", err=True)


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# ------------------------------------------------------------------------------ produce
def _registry_client(conn: Connection, fmt: str) -> Any:
    from kontrakt.registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": conn.need_registry(f"--format {fmt}")})


def _protobuf_class(client: Any, subject: str, schema_file: str | None,
                    message: str | None) -> Any:
    from google.protobuf.message_factory import GetMessageClass

    from kontrakt.serde._proto_schema import new_pool, proto_text_to_files

    if schema_file:
        text = Path(schema_file).read_text(encoding="utf-8")
    else:
        latest = client.get_latest_version(subject)
        if latest.schema.references:
            raise CliError(f"subject {subject}: Protobuf schemas with references cannot be "
                           "produced from the command line yet; pass --schema FILE")
        text = latest.schema.schema_str
    pool = new_pool()
    files = proto_text_to_files("cli.proto", {"cli.proto": text})
    for fdp in files:
        pool.Add(fdp)
    fd = pool.FindFileByName("cli.proto")
    names = list(fd.message_types_by_name)
    if not names:
        raise CliError("the Protobuf schema declares no message")
    name = message or names[0]
    if name not in fd.message_types_by_name:
        raise CliError(f"--message {name!r}: the schema declares {', '.join(names)}")
    return GetMessageClass(fd.message_types_by_name[name])


def _encoder(conn: Connection, fmt: str, field: str, topic: str, schema_file: str | None,
             message: str | None, closers: list[Callable[[], None]]
             ) -> Callable[[str], bytes | None]:
    """``text -> bytes`` for one line's key or value in ``fmt``."""
    if fmt == "raw":
        return lambda text: text.encode()
    if fmt == "json":
        def encode_json(text: str) -> bytes:
            try:
                return json.dumps(json.loads(text), separators=(",", ":")).encode()
            except ValueError as exc:
                raise CliError(f"not JSON ({exc}): {text[:80]!r}") from None
        return encode_json
    from kontrakt.serde import MessageField, SerializationContext

    client = _registry_client(conn, fmt)
    closers.append(client.close)
    subject = f"{topic}-{field}"
    schema_text = Path(schema_file).read_text(encoding="utf-8") if schema_file else None
    conf: dict[str, Any] = ({"auto.register.schemas": True} if schema_text else
                            {"auto.register.schemas": False, "use.latest.version": True})
    ctx = SerializationContext(topic, MessageField.KEY if field == "key" else
                               MessageField.VALUE)
    if fmt == "avro":
        from kontrakt.serde import AvroSerializer

        if schema_text is None:
            schema_text = client.get_latest_version(subject).schema.schema_str
        ser: Any = AvroSerializer(client, schema_text, conf=conf)
        parse: Callable[[str], Any] = json.loads
    elif fmt == "json-schema":
        from kontrakt.serde import JSONSerializer

        if schema_text is None:
            schema_text = client.get_latest_version(subject).schema.schema_str
        ser = JSONSerializer(schema_text, client, conf=conf)
        parse = json.loads
    else:
        # The serde first: without the protobuf extra it says which extra to install.
        from kontrakt.serde import ProtobufSerializer

        cls = _protobuf_class(client, subject, schema_file, message)
        ser = ProtobufSerializer(cls, client, conf=conf)
        from google.protobuf import json_format

        def parse(text: str) -> Any:
            try:
                return json_format.Parse(text, cls())
            except json_format.ParseError as exc:
                raise CliError(f"does not match the Protobuf message: {exc}") from None

    def encode(text: str) -> bytes | None:
        try:
            obj = parse(text)
        except ValueError as exc:
            raise CliError(f"not JSON ({exc}): {text[:80]!r}") from None
        try:
            data: bytes | None = ser(obj, ctx)
        except Exception as exc:
            raise CliError(f"the {fmt} schema of subject {subject} refuses {text[:80]!r}: "
                           f"{exc}") from None
        return data
    return encode


@click.command()
@connection_options
@click.argument("topic")
@click.option("--file", "source", type=click.File("r"), default="-", show_default=True,
              help="Read records from this file (- for standard input).")
@click.option("-K", "--key-delimiter", default=None, metavar="DELIM",
              help="Split each line into key and value at the first DELIM.")
@click.option("-k", "--key", "fixed_key", default=None, help="One key for every record.")
@click.option("-p", "--partition", type=int, default=None,
              help="Partition (default: by key, or spread).")
@click.option("-H", "--header", "headers", multiple=True, metavar="NAME=VALUE",
              help="A header for every record, repeatable.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="raw", show_default=True,
              help="How to encode values.")
@click.option("--key-format", type=click.Choice(FORMATS), default="raw", show_default=True,
              help="How to encode keys.")
@click.option("--schema", "schema_file", default=None, metavar="FILE",
              help="Value schema (.avsc, .json, .proto), registered when new; default: the "
              "subject's latest version.")
@click.option("--key-schema", "key_schema_file", default=None, metavar="FILE",
              help="Key schema, likewise.")
@click.option("--message", default=None, help="Protobuf message name (default: the first).")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no summary.")
@reported
def produce(conn: Connection, topic: str, source: TextIO, key_delimiter: str | None,
            fixed_key: str | None, partition: int | None, headers: tuple[str, ...], fmt: str,
            key_format: str, schema_file: str | None, key_schema_file: str | None,
            message: str | None, quiet: bool) -> None:
    """Send one record per input line to TOPIC; exits once every record is acknowledged.

    A line that cannot be encoded stops the command (exit 2) after the records before it
    were delivered.
    """
    from kontrakt.clients.producer import Producer

    header_list = [(k, v.encode()) for k, v in parse_pairs(headers, "--header").items()]
    closers: list[Callable[[], None]] = []
    try:
        value_enc = _encoder(conn, fmt, "value", topic, schema_file, message, closers)
        key_enc = _encoder(conn, key_format, "key", topic, key_schema_file, message, closers) \
            if key_delimiter is not None or fixed_key is not None else None
        progress = _Progress("produced", _is_tty(sys.stderr), quiet)
        with Producer(conn.client_config()) as producer:
            failure: list[BaseException] = []

            def delivered(err: Any, md: Any) -> None:
                if err is not None and not failure:
                    failure.append(err)

            try:
                for n, line in enumerate(source, start=1):
                    line = line.rstrip("\n").rstrip("\r")
                    if not line and key_delimiter is None:
                        continue
                    key_text = fixed_key
                    if key_delimiter is not None:
                        key_text, sep, line = line.partition(key_delimiter)
                        if not sep:
                            raise CliError(f"line {n}: no key delimiter {key_delimiter!r}")
                    try:
                        value = value_enc(line)
                        key = key_enc(key_text) if key_enc and key_text is not None else None
                    except CliError as exc:
                        raise CliError(f"line {n}: {exc.message}") from None
                    producer.produce(topic, value, key, partition=partition,
                                     on_delivery=delivered, headers=header_list or None)
                    progress.add(len(value or b"") + len(key or b""))
                    if not n % 1000:
                        producer.poll(0)
                        if failure:
                            break
            finally:
                producer.flush(_TIMEOUT)
                progress.close()
            if failure:
                raise failure[0]
    finally:
        for close in closers:
            close()


# ------------------------------------------------------------------------------ consume
def _decoder(conn: Connection, fmt: str, field: str, closers: list[Callable[[], None]]
             ) -> Callable[[ConsumerRecord[Any, Any], bytes | None], Any]:
    """``(record, bytes) -> a JSON-able value`` for one field in ``fmt``."""
    if fmt == "raw":
        return lambda record, data: data
    if fmt == "json":
        def decode_json(record: ConsumerRecord[Any, Any], data: bytes | None) -> Any:
            if data is None:
                return None
            try:
                return json.loads(data)
            except ValueError as exc:
                raise CliError(f"{record.topic}/{record.partition}@{record.offset}: the "
                               f"{field} is not JSON ({exc})") from None
        return decode_json
    from kontrakt.serde import MessageField, SerializationContext

    client = _registry_client(conn, fmt)
    closers.append(client.close)
    # One format's deserializer only: each loads its own extra's package (an Avro consumer
    # needs no protobuf).
    de: Any
    if fmt == "avro":
        from kontrakt.serde import AvroDeserializer

        de = AvroDeserializer(client)
    elif fmt == "json-schema":
        from kontrakt.serde import JSONDeserializer

        de = JSONDeserializer(None, schema_registry_client=client)
    else:
        from kontrakt.serde import ProtobufDeserializer

        de = ProtobufDeserializer(None, schema_registry_client=client)
    mfield = MessageField.KEY if field == "key" else MessageField.VALUE

    def decode(record: ConsumerRecord[Any, Any], data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            value = de(data, SerializationContext(record.topic, mfield, record.headers))
        except Exception as exc:
            raise CliError(f"{record.topic}/{record.partition}@{record.offset}: the {field} "
                           f"cannot be decoded as {fmt}: {exc}") from None
        if fmt == "protobuf":
            from google.protobuf import json_format

            return json_format.MessageToDict(value, preserving_proto_field_name=True)
        return value
    return decode


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, str):
        return value
    return json.dumps(_jsonable(value), separators=(",", ":"))


def _formatter(template: str) -> Callable[[ConsumerRecord[Any, Any], Any, Any], str]:
    """kcat's ``-f``: %t topic, %p partition, %o offset, %k key, %s value, %h headers,
    %T timestamp (ms), %K / %S key / value size in bytes, %% a percent sign; \\n \\t."""
    template = template.replace("\\n", "\n").replace("\\t", "\t")

    def render(record: ConsumerRecord[Any, Any], key: Any, value: Any) -> str:
        out = []
        i = 0
        while i < len(template):
            ch = template[i]
            if ch == "%" and i + 1 < len(template):
                code = template[i + 1]
                i += 2
                if code == "t":
                    out.append(record.topic)
                elif code == "p":
                    out.append(str(record.partition))
                elif code == "o":
                    out.append(str(record.offset))
                elif code == "k":
                    out.append(_text(key))
                elif code == "s":
                    out.append(_text(value))
                elif code == "h":
                    out.append(",".join(f"{k}={_text(v)}" for k, v in record.headers))
                elif code == "T":
                    out.append(str(record.timestamp))
                elif code == "K":
                    out.append(str(len(record.key) if record.key is not None else -1))
                elif code == "S":
                    out.append(str(len(record.value) if record.value is not None else -1))
                elif code == "%":
                    out.append("%")
                else:
                    raise CliError(f"-f: unknown format code %{code} (known: %t %p %o %k %s "
                                   "%h %T %K %S %%)")
                continue
            out.append(ch)
            i += 1
        return "".join(out)
    return render


def _start_positions(consumer: Any, tps: list[TopicPartition], offset: str) -> None:
    """Seek each partition to where ``-o`` says."""
    if offset == "beginning":
        consumer.seek_to_beginning(*tps)
    elif offset == "end":
        consumer.seek_to_end(*tps)
    elif offset.startswith("@"):
        try:
            ms = int(offset[1:])
        except ValueError:
            raise CliError(f"-o {offset}: @ needs a timestamp in ms") from None
        found = consumer.offsets_for_times({tp: ms for tp in tps}, _TIMEOUT)
        ends = consumer.end_offsets(tps, _TIMEOUT)
        for tp in tps:
            hit = found.get(tp)
            consumer.seek(tp, hit.offset if hit is not None else ends[tp])
    else:
        try:
            n = int(offset)
        except ValueError:
            raise CliError(f"-o {offset!r}: use beginning, end, N, -N or @timestamp_ms"
                           ) from None
        if n >= 0:
            for tp in tps:
                consumer.seek(tp, n)
        else:
            begins = consumer.beginning_offsets(tps, _TIMEOUT)
            ends = consumer.end_offsets(tps, _TIMEOUT)
            for tp in tps:
                consumer.seek(tp, max(ends[tp] + n, begins[tp]))


@contextmanager
def _open_consumer(conn: Connection, topic: str, partitions: tuple[int, ...], group: str | None,
                   offset: str) -> Iterator[tuple[Any, list[TopicPartition]]]:
    from kontrakt.clients.consumer import Consumer

    extra: dict[str, Any] = {"enable.auto.commit": group is not None}
    if group is not None:
        extra["group.id"] = group
        extra["auto.offset.reset"] = "earliest" if offset == "beginning" else "latest"
    with Consumer(conn.client_config(**extra)) as consumer:
        if group is not None:
            if partitions:
                raise CliError("-p and -G cannot be combined: a group assigns partitions")
            consumer.subscribe([topic])
            yield consumer, []
            return
        known: set[int] | None = consumer.partitions_for_topic(topic)
        if not known:
            listed = consumer.list_topics().get(topic)
            known = set(listed) if listed else None
        if not known:
            raise CliError(f"topic {topic!r} does not exist")
        chosen = sorted(known) if not partitions else list(partitions)
        missing = [p for p in chosen if p not in known]
        if missing:
            raise CliError(f"topic {topic!r} has no partition {missing[0]} "
                           f"(partitions {min(known)}..{max(known)})")
        tps = [TopicPartition(topic, p) for p in chosen]
        consumer.assign(tps)
        _start_positions(consumer, tps, offset)
        yield consumer, tps


def _at_end(consumer: Any) -> bool:
    """Every assigned partition read up to the high watermark its last fetch reported (as
    kcat's end-of-partition; ListOffsets is not asked: some brokers answer it wrongly)."""
    assigned = consumer.assignment()
    if not assigned:
        return False
    for tp in assigned:
        high = consumer.highwater(tp)
        if high is None or consumer.position(tp) < high:
            return False
    return True


@click.command()
@connection_options
@click.argument("topic")
@click.option("-p", "--partition", "partitions", type=int, multiple=True,
              help="Read only this partition, repeatable (default: all).")
@click.option("-o", "--offset", default="beginning", show_default=True,
              help="Where to start: beginning, end, N, -N (N before the end), @ms.")
@click.option("-c", "--count", type=int, default=None, help="Stop after this many records.")
@click.option("-e", "--exit-at-end", "exit_at_end", is_flag=True,
              help="Stop once every partition is read to its end.")
@click.option("-G", "--group", default=None,
              help="Consume as this consumer group (committing its offsets).")
@click.option("-f", "--format-string", "template", default="%s\\n", show_default=True,
              help="Output line: %t %p %o %k %s %h %T %K %S.")
@click.option("-J", "--json", "as_json", is_flag=True,
              help="One JSON object per record instead of -f.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="raw", show_default=True,
              help="How to decode values.")
@click.option("--key-format", type=click.Choice(FORMATS), default="raw", show_default=True,
              help="How to decode keys.")
@click.option("--idle-timeout", type=float, default=None, metavar="SECONDS",
              help="Stop when no record arrives for this long.")
@click.option("-q", "--quiet", is_flag=True, help="No progress and no summary.")
@reported
def consume(conn: Connection, topic: str, partitions: tuple[int, ...], offset: str,
            count: int | None, exit_at_end: bool, group: str | None, template: str,
            as_json: bool, fmt: str, key_format: str, idle_timeout: float | None,
            quiet: bool) -> None:
    """Print TOPIC's records, one line each; decodes registry formats to JSON.

    Exit 1 when --count N was not reached before the end (-e) or the idle timeout.
    """
    render = _formatter(template)
    closers: list[Callable[[], None]] = []
    try:
        value_de = _decoder(conn, fmt, "value", closers)
        key_de = _decoder(conn, key_format, "key", closers)
        progress = _Progress("consumed", _is_tty(sys.stderr) and not _is_tty(sys.stdout),
                             quiet)
        out = sys.stdout
        with _open_consumer(conn, topic, partitions, group, offset) as (consumer, _):
            last_record = time.monotonic()
            try:
                while count is None or progress.records < count:
                    if exit_at_end and _at_end(consumer):
                        break
                    record = consumer.poll(0.5)
                    if record is None:
                        if idle_timeout is not None and \
                                time.monotonic() - last_record >= idle_timeout:
                            break
                        continue
                    last_record = time.monotonic()
                    key = key_de(record, record.key)
                    value = value_de(record, record.value)
                    if as_json:
                        line = json.dumps(_jsonable({
                            "topic": record.topic, "partition": record.partition,
                            "offset": record.offset, "timestamp": record.timestamp,
                            "key": key, "value": value,
                            "headers": {k: v for k, v in record.headers}})) + "\n"
                    else:
                        line = render(record, key, value)
                    out.write(line)
                    progress.add(len(record.value or b"") + len(record.key or b""))
            finally:
                out.flush()
                progress.close()
        if count is not None and progress.records < count:
            raise CliError(f"read {progress.records} of the {count} records asked for",
                           EXIT_CHECK_FAILED)
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as kcat does.
        sys.stderr.close()
        raise SystemExit(0) from None
    finally:
        for close in closers:
            close()

