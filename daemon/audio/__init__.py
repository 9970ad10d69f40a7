"""Audio out: sentence joins, the sounddevice player, the WAV writer."""
