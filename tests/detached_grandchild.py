"""A stand-in for a launch's agent in tests/test_confinement.py: starts a detached (setsid) grandchild that would sleep
for ten minutes, its command line naming argv[1], and exits at once."""

import subprocess
import sys

subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", sys.argv[1]], start_new_session=True)
