"""The county hub: Sparkplug B and event messages from every edge daemon, off a central MQTT broker, into
PostgreSQL (issue 19). Several hubs share one MQTT 5 shared subscription; every write is idempotent, so a
redelivered or replayed message never duplicates a row."""
