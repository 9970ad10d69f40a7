"""The broker side: the connection, the commands under the base topic and their payloads, voice
installs asked for over MQTT, and the operator's client (`fastvoice send`)."""
