"""The world's policy instruments, components the flood model composes.

``governed_broker.sim.instruments.base``; registry ``config.world.INSTRUMENTS``.
"""
