"""A TCP relay for ssh's ProxyCommand that passes the first LIMIT bytes the client sends, then
holds the rest: it touches FLAG and waits to be killed. An upload through it stops at a known
point, with the server holding part of the file, without a sleep.

Usage: sftp_relay.py HOST PORT LIMIT FLAG
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path


def to_client(sock: socket.socket) -> None:
    while data := sock.recv(65536):
        os.write(1, data)


def main() -> None:
    host, port, limit, flag = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    sock = socket.create_connection((host, port))
    threading.Thread(target=to_client, args=(sock,), daemon=True).start()
    sent = 0
    while sent < limit and (data := os.read(0, min(65536, limit - sent))):
        sock.sendall(data)
        sent += len(data)
    flag.touch()
    threading.Event().wait()  # held until killed


if __name__ == "__main__":
    main()
