import sys

from runner_agent.cli import main

sys.exit(main())
