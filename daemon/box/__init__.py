"""The box's chores: doctor, system install, systemd notifications, the clock, logs and files."""
