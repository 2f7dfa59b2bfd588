"""ms-swift multi-turn schedulers (``--multi_turn_scheduler``); importing this package imports ms-swift.

Load with ``--external_plugins plugins/tau2_user.py``; that entry file registers the
``tau2_user`` key in ms-swift's ``multi_turns`` registry.
"""
