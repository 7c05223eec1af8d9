import sys

from fawkes.cli import main

sys.exit(main())
