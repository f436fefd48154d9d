import sys

from swrag_integrations.cli.tune import main

sys.exit(main())
