"""The running service: its composition, lifecycle and supervisor, the queue, lanes and journal,
scheduling and quiet hours, events and where messages go."""
