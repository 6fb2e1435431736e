"""Plots written by commands (calibration fit, serving plans and frontiers)."""
