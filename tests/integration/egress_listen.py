#!/usr/bin/env python3
"""Listeners of an egress test's own on the engine host (issue 25, finding 3).

  egress_listen.py DIR ADDR...

Binds a TCP and a UDP socket on one free port on each ADDR (each address
on its own, not the wildcard), writes the port to DIR/port once all are
bound, then appends one line per arrival to DIR/log until it is killed:

  tcp ADDR PAYLOAD      a connection to ADDR, with the first bytes it sent
  udp ADDR PAYLOAD      a datagram to ADDR

Each socket is served by one thread, in arrival order, so a marker sent
after an attempt is logged after it (the test waits for its markers, then
reads what came before them).
"""
import os
import socket
import sys
import threading

LOCK = threading.Lock()


def log(directory, kind, addr, payload):
    text = payload.decode("ascii", "replace").strip().replace("\n", " ")[:64] or "-"
    with LOCK, open(os.path.join(directory, "log"), "a") as f:
        f.write(f"{kind} {addr} {text}\n")


def serve_tcp(directory, addr, sock):
    while True:
        conn, _ = sock.accept()
        conn.settimeout(10)
        try:
            data = conn.recv(64)
        except OSError:
            data = b""
        conn.close()
        log(directory, "tcp", addr, data)


def serve_udp(directory, addr, sock):
    while True:
        data, _ = sock.recvfrom(512)
        log(directory, "udp", addr, data)


def bind_all(addrs, port):
    socks = []
    try:
        for a in addrs:
            fam = socket.AF_INET6 if ":" in a else socket.AF_INET
            t = socket.socket(fam, socket.SOCK_STREAM)
            t.bind((a, port))
            port = t.getsockname()[1]
            t.listen(64)
            u = socket.socket(fam, socket.SOCK_DGRAM)
            u.bind((a, port))
            socks.append((a, t, u))
        return port, socks
    except OSError:
        for _, t, u in socks:
            t.close()
            u.close()
        raise


def main():
    directory, addrs = sys.argv[1], sys.argv[2:]
    if not addrs:
        print(__doc__, file=sys.stderr)
        return 2
    for _ in range(50):
        try:
            port, socks = bind_all(addrs, 0)
            break
        except OSError:
            continue
    else:
        print("egress_listen: no port free on every address", file=sys.stderr)
        return 1
    open(os.path.join(directory, "log"), "w").close()
    for a, t, u in socks:
        threading.Thread(target=serve_tcp, args=(directory, a, t), daemon=True).start()
        threading.Thread(target=serve_udp, args=(directory, a, u), daemon=True).start()
    with open(os.path.join(directory, "port.tmp"), "w") as f:
        f.write(f"{port}\n")
    os.rename(os.path.join(directory, "port.tmp"), os.path.join(directory, "port"))
    threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
