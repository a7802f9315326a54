import sys

from legal_agent.cli import main

sys.exit(main())
