import sys

from swrag_integrations.cli.app import main

sys.exit(main())
