import sys

from judgetrain.cli import main

sys.exit(main())
