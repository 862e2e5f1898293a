"""``python -m stress``."""

import sys

from stress.cli import main

if __name__ == "__main__":
    sys.exit(main())
