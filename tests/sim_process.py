"""The tests' chat server (tests/sim_server.py) in a process of its own, as a simulator model runs in practice."""

from __future__ import annotations

from typing import Any

from sim_server import SimServer


class SimServerProcess:
    """A :class:`SimServer` in a child process of its own, as a simulator model runs in practice: its request
    handling then shares no interpreter lock with the client. Forked, so ``reply`` may be any callable.

        with SimServerProcess(delay_s=0.2, reply=my_reply) as server:
            sim = OpenAISimulator(server.base_url, "sim", ...)
            ...
            server.stats()  # {"count": requests seen, "max_in_flight": ...}
    """

    def __init__(self, **options: Any) -> None:
        import multiprocessing

        context = multiprocessing.get_context("fork")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve_forked, args=(child, options), daemon=True)
        self.base_url = ""

    def __enter__(self) -> SimServerProcess:
        self._process.start()
        if not self._conn.poll(30):
            raise RuntimeError("the forked SimServer did not start within 30 s")
        self.base_url = self._conn.recv()
        return self

    def stats(self) -> dict[str, int]:
        self._conn.send("stats")
        return dict(self._conn.recv())

    def __exit__(self, *exc: object) -> None:
        self._conn.send("stop")
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()


def _serve_forked(conn: Any, options: dict[str, Any]) -> None:
    with SimServer(**options) as server:
        conn.send(server.base_url)
        while (command := conn.recv()) != "stop":
            if command == "stats":
                conn.send({"count": server.count, "max_in_flight": server.max_in_flight})
