import sys

from swrag_integrations.cli.eval import main

sys.exit(main())
