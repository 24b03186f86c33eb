import sys

from quickmoe.cli import main

sys.exit(main())
