#!/usr/bin/python3
"""The Python SDK peer (python3-docker, Debian's package), timed in-process.

    sdk.py exec CONTAINER CALLS      S1: container.exec_run(["true"])
    sdk.py run IMAGE CALLS [PAUSE]   S2: client.containers.run(IMAGE, "true", remove=True)

Prints "sample MS" per call and "wall MS". One DockerClient for the whole
run (its requests session keeps the connection alive).
"""
import sys
import time

import docker


def main() -> int:
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    what, target, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    client = docker.from_env(version="1.41")
    failed = 0
    t_start = time.perf_counter()
    if what == "exec":
        container = client.containers.get(target)
        for _ in range(calls):
            t0 = time.perf_counter()
            res = container.exec_run(["true"])
            print("sample %.3f" % ((time.perf_counter() - t0) * 1000.0))
            failed += res.exit_code != 0
    elif what == "run":
        for _ in range(calls):
            t0 = time.perf_counter()
            client.containers.run(target, "true", remove=True, network_mode="none")
            print("sample %.3f" % ((time.perf_counter() - t0) * 1000.0))
            if pause:
                time.sleep(pause)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print("wall %.3f" % ((time.perf_counter() - t_start) * 1000.0))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
