"""Where a lower layer's notes for the user go: lists of listeners, each called with one line of
text. The CLI registers a printer (stderr) once per process; the library calls every listener.

Kept in a bottom-layer module that imports nothing, so registering a listener loads neither the
catalog nor the model reader (the CLI's root callback runs before every command, `--help` too).
"""

from __future__ import annotations

#: called with a one-line note when a catalog alias is resolved (`--gpu h100`: which part that
#: means); read by gpuplan.catalog
alias_listeners: list = []

#: called with each warning of a config.json read (an unknown model_type read by its fields, ...);
#: read by gpuplan.models.hf_config
config_warning_listeners: list = []
