"""The MQTT subscriber driver: `MqttDriver` (one per MQTT instrument) and `build_mqtt_drivers`."""

from drivers.mqtt.counters import MqttCounters
from drivers.mqtt.driver import MqttDriver, build_mqtt_drivers

__all__ = ["MqttCounters", "MqttDriver", "build_mqtt_drivers"]
