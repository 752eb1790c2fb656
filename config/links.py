"""What items of a site file share on the wire, and may not share: Modbus unit ids on a link, line settings on
a serial port, topic/field pairs of an MQTT instrument, and MQTT client ids on a broker.

Checked at load, with the others' mistakes, because each shows only at run time otherwise, and badly: two
devices answering one unit id interleave their readings; two MQTT clients with one client id on one broker
take the session from each other in turn (the broker closes the older connection whenever the other
connects), so both links flap for ever and QoS 1 messages are delivered to whichever happens to be up.
"""

from __future__ import annotations

from collections.abc import Iterable

from config.notify import MqttNotify, NotifySection
from config.reader import Reader
from config.schema import Channel, DriverKind, Instrument, PayloadFormat, SerialSettings, Site
from config.uplink import UplinkSettings

MISSING_POINT = "(missing)"


def check_mqtt_topics(channels: list[Channel], instruments: dict[str, Instrument], p: str,
                      reader: Reader) -> None:
    """Two channels of one MQTT instrument on one topic need distinct JSON fields to tell them apart."""
    seen: dict[tuple[str, str, str], str] = {}
    for ch in channels:
        inst = instruments.get(ch.instrument)
        if inst is None or inst.driver is not DriverKind.MQTT:
            continue
        key = (ch.instrument, ch.topic, ch.field)
        if key in seen:
            reader.error(f"{p}.channel[id={ch.id}].field", ch.field,
                         f"a topic/field pair not already used by channel '{seen[key]}'")
        seen[key] = ch.id
        if ch.payload is PayloadFormat.JSON and not ch.field:
            reader.error(f"{p}.channel[id={ch.id}].field", MISSING_POINT,
                         "the JSON field holding the value (or payload = \"number\")")


def check_shared_links(sites: list[Site], reader: Reader) -> None:
    """One unit id per link, and one set of serial settings per serial port."""
    units: dict[tuple[str, int], str] = {}
    serials: dict[str, tuple[SerialSettings, str]] = {}
    for s in sites:
        for inst in s.instruments:
            where, named = f"site[id={s.id}].instrument[id={inst.id}]", f"site '{s.id}' instrument '{inst.id}'"
            if not inst.driver.is_modbus:
                continue
            key = (inst.link_key, inst.unit_id)
            if key in units:
                reader.error(f"{where}.unit_id", inst.unit_id,
                             f"a unit id not already used on {inst.link_key} (by {units[key]})")
            units.setdefault(key, named)
            if inst.serial is not None:
                prev = serials.get(inst.serial.port)
                if prev is not None and _line_settings(prev[0]) != _line_settings(inst.serial):
                    reader.error(f"{where}.baudrate", inst.serial.baudrate,
                                 f"the same line settings as {prev[1]} on {inst.serial.port}")
                serials.setdefault(inst.serial.port, (inst.serial, named))


def check_mqtt_client_ids(sites: Iterable[Site], notify: NotifySection | None, reader: Reader, *,
                          uplink: UplinkSettings | None = None) -> None:
    """One MQTT client id per broker, across the MQTT instruments, the MQTT alarm channels and the uplink.

    The broker is told by host (case-insensitive) and port as written: two names for one broker are not
    recognised, and the same client id on two different brokers is allowed. This is the only place the
    rule is enforced: the drivers trust a validated configuration."""
    users: dict[tuple[str, int, str], str] = {}

    def claim(host: str, port: int, client_id: str, path: str, what: str) -> None:
        key = (host.lower(), port, client_id)
        if key in users:
            reader.error(path, client_id, f"a client id not already used on {host}:{port} (by {users[key]}): "
                         "two clients with one id take the broker session from each other in turn")
        else:
            users[key] = what

    for s in sites:
        for inst in s.instruments:
            if inst.driver is DriverKind.MQTT and inst.mqtt is not None:
                claim(inst.mqtt.host, inst.mqtt.port, inst.mqtt.client_id,
                      f"site[id={s.id}].instrument[id={inst.id}].client_id", f"instrument {s.id}/{inst.id}")
    for ch in notify.channels if notify is not None else ():
        if isinstance(ch.settings, MqttNotify):
            claim(ch.settings.host, ch.settings.port, ch.settings.client_id,
                  f"notify.channel[id={ch.id}].client_id", f"alarm channel {ch.id}")
    if uplink is not None:
        claim(uplink.host, uplink.port, uplink.mqtt_client_id, "uplink.client_id", "the uplink")


def _line_settings(s: SerialSettings) -> tuple[int, int, str, int]:
    return (s.baudrate, s.bytesize, s.parity, s.stopbits)
