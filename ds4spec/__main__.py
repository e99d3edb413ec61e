import sys

from ds4spec.cli import main

sys.exit(main())
