from daemon.cli import run

run()
