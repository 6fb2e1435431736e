"""The one knob fitter (regularised least squares) and the catalog of modules that declare knobs."""
