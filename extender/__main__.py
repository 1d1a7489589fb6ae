import sys

from extender.cli import main

sys.exit(main())
