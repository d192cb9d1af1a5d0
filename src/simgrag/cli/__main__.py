"""``python -m simgrag.cli``."""

from simgrag.cli import main

main()
