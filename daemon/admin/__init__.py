"""The box's chores, above everything they look at: the doctor, installing the service into
systemd, checking and editing the config file."""
