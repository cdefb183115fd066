import sys

from connector.cli import main

sys.exit(main(prog="python -m connector"))
