"""Run a case server in the foreground (stock config, see servers.py): `serve.py nginx|redis PORT DIR`.

The BO SLO files start it as their workload, inside the server namespace, so xtune restarts it
after each change (the accept backlog is fixed at listen()).
"""

import os
import sys
from pathlib import Path

from servers import SERVERS

if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in SERVERS:
        sys.exit(f"usage: serve.py {{{'|'.join(SERVERS)}}} PORT DIR")
    name, port, where = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    where.mkdir(parents=True, exist_ok=True)
    cmd = SERVERS[name](name, "", port, where).command()
    os.execvp(cmd[0], cmd)
