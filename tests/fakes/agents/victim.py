"""An ordinary run holding a secret (from its arm config `args`) in its environment, its /out and
its /world while another run snoops; then it answers. Usage: victim.py SECRET"""

import os
import sys
import time

from _common import out_dir, report

secret = sys.argv[1]
if os.environ.get("VICTIM_SECRET") != secret:  # hold it in this process's environment too
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "VICTIM_SECRET": secret})
out = out_dir()
world = os.environ.get("EVALBOT_WORLD_DIR", "/world")
with open(os.path.join(out, "victim.txt"), "w") as handle:
    handle.write(secret)
with open(os.path.join(world, "victim.txt"), "w") as handle:
    handle.write(secret)
started = time.time()
time.sleep(4)  # alive, with the secret, while the snooper looks
with open(os.path.join(out, "answer.md"), "w") as handle:
    handle.write("The answer is 42.\n")
report({"window": [started, time.time()]})
