"""Simulation for training: the vectorized MuJoCo env, its randomization, and adapters (Gymnasium).

Import the submodules directly; this package imports nothing heavy on its own.
"""
