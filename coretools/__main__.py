import sys

from coretools.cli import main

sys.exit(main())
