"""ALFWorld for GACA: the ``GACA-ALFWorld-v0`` env, an offline task generator and game engines.

Modules (none is imported by ``import gaca_envs``; the env is built through ``gym.make``):

- :mod:`~gaca_envs.alfworld.env`: the Gymnasium env.
- :mod:`~gaca_envs.alfworld.engines`: the engine interface (``engines.base``), the native engine
  (``engines.native``, the default), ALFWorld's TextWorld engine (``engines.textworld``) and
  the factory ``make_engine``.
- :mod:`~gaca_envs.alfworld.domain`: ALFWorld's domain tables (predicates, appliances, task
  parameters, PDDL spelling of ids), each defined once.
- :mod:`~gaca_envs.alfworld.data`: real ALFWorld data collection and the generated-game cache.
- :mod:`~gaca_envs.alfworld.generate`: ``gaca-alfworld-generate``, ALFWorld-format games.
- :mod:`~gaca_envs.alfworld.scenes`, :mod:`~gaca_envs.alfworld.pddl_writer`: scenes, and the
  PDDL problems written from them (``engines.native.pddl_reader`` reads PDDL back).
- :mod:`~gaca_envs.alfworld.solver`: plans from any state (walkthroughs, ``expert=True``).
- :mod:`~gaca_envs.alfworld.alfred_data`: ALFRED constants, layouts and goals read from the
  installed ``alfworld`` package without importing it.
"""
