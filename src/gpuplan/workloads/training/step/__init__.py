"""Training step time as named terms, one module per parallel axis (as torchtitan lays out
`distributed/`): `compute` (layers and stages), `tensor` (TP), `context` (CP), `expert` (EP, MoE),
`pipeline` (PP and the bubble), `data` (DP and ZeRO / FSDP), `optimizer`; `inputs` holds what the
terms read and `assembly` composes them into a step (`step_time_arrays`, `estimate_step_time`)."""
