"""Low-level parts of the box every floor may use: files written safely, the clock, systemd
notifications and the journal's log format."""
