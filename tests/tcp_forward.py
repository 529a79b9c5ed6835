"""A plain TCP forwarder, run as a program by tests/vanishing_host.py (once inside a network namespace):

    python tests/tcp_forward.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT

Prints the port it listens on (LISTEN_PORT 0 picks one), then forwards every connection until killed.
"""

from __future__ import annotations

import socket
import sys
import threading


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the other side went away: the pump of the other direction sees it too


def _serve(client: socket.socket, target: tuple[str, int]) -> None:
    with client, socket.create_connection(target) as upstream:
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()


def main() -> None:
    listen_host, listen_port, target_host, target_port = sys.argv[1:5]
    target = (target_host, int(target_port))
    with socket.create_server((listen_host, int(listen_port)), reuse_port=False) as server:
        print(server.getsockname()[1], flush=True)
        while True:
            client, _ = server.accept()
            threading.Thread(target=_serve, args=(client, target), daemon=True).start()


if __name__ == "__main__":
    main()
