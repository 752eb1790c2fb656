"""The MQTT subscriber driver: `MqttDriver` (one per MQTT instrument) and `build_mqtt_drivers`.

The driver (and paho-mqtt with it) is imported on first use of these names, not with the package: the payload
parser (`drivers.mqtt.payload`) serves `pretreat replay` too, whose start should not pay for paho."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from drivers.mqtt.counters import MqttCounters
    from drivers.mqtt.driver import MqttDriver, build_mqtt_drivers

__all__ = ["MqttCounters", "MqttDriver", "build_mqtt_drivers"]


def __getattr__(name: str) -> Any:
    if name == "MqttCounters":
        from drivers.mqtt.counters import MqttCounters

        return MqttCounters
    if name in ("MqttDriver", "build_mqtt_drivers"):
        from drivers.mqtt import driver

        return getattr(driver, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
