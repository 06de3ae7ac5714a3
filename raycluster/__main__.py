import sys

from raycluster.cli import main

sys.exit(main())
