import sys

from ds4spec.cli import console

sys.exit(console())
