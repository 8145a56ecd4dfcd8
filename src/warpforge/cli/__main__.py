"""``python -m warpforge.cli`` runs the command line (the tests' subprocesses use it)."""

from warpforge.cli.root import main

main()
