"""Domains served to trainers over a network protocol, whole episodes at a time.

- ``openenv_server.py``: a domain as an OpenEnv environment (``rewardkit env serve --openenv``): one episode per
  WebSocket session, the simulated user and the task-completion reward on the server.
- ``trl_env.py``: TRL's ``environment_factory`` on such a server, one session per environment.

Its modules import their protocol's package (``openenv``) at module level: import them only where it is
installed (``pip install 'rewardkit[openenv]'``).
"""

MAX_IDLE_S = 86400.0  # a day: a session idle longer holds its database copy for nothing (--idle-s, create_app)
